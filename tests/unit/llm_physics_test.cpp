// The physics the performance model gets from the llm space's traces, one effect a test, each with
// the expectation worked out by hand: FSDP scales flat with the GPU count, ZeRO stages shard what
// Megatron-LM and DeepSpeed shard, context parallelism costs at short sequences, FP8 speeds up the
// GEMMs only, MoE dispatch crosses nodes at each GPU's own link, hides behind another micro-batch's
// compute when overlapped and sends a token once per destination with a deduplicating dispatcher,
// tensor-parallel transfers hide under their GEMMs when overlapped, the loss costs fp32 passes over
// the logits unless fused, small models wait for the host, and PyTorch-native trainers recompute
// selectively per operator.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>

using cotune::core::Registry;
using cotune::core::Space;
using nlohmann::json;

namespace {

constexpr const char* kPlugin = COTUNE_PLUGIN_DIR "/libcotune-space-llm.so";

class LlmPhysics : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(registry_.load_file(kPlugin)); }

  struct Run {
    cotune_sim_result r{};
    cotune_memory memory{};
    double ops(const std::string& label, double* bytes = nullptr, int32_t* level = nullptr) const {
      double count = 0;
      for (const auto& o : labels)
        if (o.label == label) {
          count += o.count;
          if (bytes) *bytes = o.bytes;
          if (level) *level = o.level;
        }
      return count;
    }
    // The bytes of one instance of each op so labelled on one network level, summed.
    double bytes_on(const std::string& label, int32_t level) const {
      double bytes = 0;
      for (const auto& o : labels)
        if (o.label == label && o.level == level) bytes += o.bytes;
      return bytes;
    }
    // 2mnk x count of the GEMMs flagged COTUNE_OP_RECOMPUTE.
    double recomputed_gemm_flops() const {
      double f = 0;
      for (const auto& o : labels)
        if (o.kind == COTUNE_OP_GEMM && (o.flags & COTUNE_OP_RECOMPUTE)) f += 2 * o.m * o.n * o.k * o.count;
      return f;
    }
    struct Op {
      std::string label;
      double count, bytes;
      int32_t level;
      int32_t kind = 0;
      uint32_t flags = 0;
      double m = 0, n = 0, k = 0;
      int32_t dtype = COTUNE_DTYPE_BF16;
    };
    std::vector<Op> labels;
  };

  Run simulate(const json& model, const json& training, const std::string& gpu, double gpus, const json& config) {
    const json w = {{"model", model}, {"training", training}, {"cluster", {{"gpu", gpu}, {"nodes", std::ceil(gpus / 8)}}}};
    json options = json::object();
    for (auto it = config.begin(); it != config.end(); ++it) options[it.key()] = {it.value()};
    options["gpus"] = {gpus};
    json c = config;
    c["gpus"] = gpus;
    auto s = registry_.make_space("llm", w.dump(), options.dump());
    const auto v = s->parse(c.dump());
    const cotune_trace& t = s->lower(v.data());
    Run run;
    run.r.struct_size = sizeof run.r;
    cotune::core::perf::simulate(t, &run.r);
    run.memory = t.memory;
    for (size_t i = 0; i < t.num_ops; ++i)
      run.labels.push_back({std::string(t.ops[i].label.data, t.ops[i].label.len), t.ops[i].count, t.ops[i].bytes,
                            t.ops[i].net_level, t.ops[i].kind, t.ops[i].flags, t.ops[i].m, t.ops[i].n, t.ops[i].k,
                            t.ops[i].dtype});
    return run;
  }
  Registry registry_;
};

const json kLlama7b = {{"layers", 32}, {"hidden", 4096}, {"heads", 32}, {"ffn_hidden", 11008}, {"vocab", 32000},
                       {"seq_len", 2048}, {"gated_mlp", true}};

TEST_F(LlmPhysics, FsdpKeepsAFlatStepTimeFromEightToFiveHundredTwelveGpus) {
  // A fixed per-GPU batch (8 sequences of 2048): each rank gathers (N-1)/N of a layer, whatever N,
  // prefetched under compute. Before, the gathered buffer was N times a layer: 145 s at 512 GPUs.
  double lo = 1e9, hi = 0;
  for (double gpus : {8.0, 64.0, 512.0}) {
    const Run run = simulate(kLlama7b, {{"global_batch", 8 * gpus}}, "h100-sxm", gpus,
                             {{"dp", gpus}, {"micro_batch", 8}, {"zero", 3}});
    lo = std::min(lo, run.r.step_time_s), hi = std::max(hi, run.r.step_time_s);
    double bytes = 0;
    ASSERT_GT(run.ops("fsdp_allgather", &bytes), 0);
    EXPECT_LT(bytes, 2 * 2 * 0.21e9) << "one layer's bf16 weights (a hierarchical gather: at most the layer)";
  }
  EXPECT_LT(hi / lo, 1.2) << "step time from " << lo << " to " << hi << " s";
}

TEST_F(LlmPhysics, ZeroStagesShardWhatTheFrameworksShard) {
  const json training = {{"global_batch", 64}};
  auto mem = [&](int zero) { return simulate(kLlama7b, training, "h100-sxm", 8, {{"dp", 8}, {"zero", zero}}).memory; };
  const cotune_memory z0 = mem(0), z1 = mem(1), z2 = mem(2), z3 = mem(3);
  // ZeRO-1 = Megatron-LM's distributed optimizer: the optimizer state only.
  EXPECT_NEAR(z1.optimizer, z0.optimizer / 8, 1);
  EXPECT_NEAR(z1.gradients, z0.gradients, 1);
  EXPECT_NEAR(z1.weights, z0.weights, 1);
  // ZeRO-2 (DeepSpeed) the gradients too; ZeRO-3 / FSDP the weights as well.
  EXPECT_NEAR(z2.gradients, z0.gradients / 8, 1);
  EXPECT_NEAR(z2.weights, z0.weights, 1);
  EXPECT_NEAR(z3.weights, z0.weights / 8, 1);
}

TEST_F(LlmPhysics, Fp8WeightCopiesAreShardedAsTheWeightsAre) {
  // Transformer Engine keeps a one-byte copy of each GEMM weight under FP8. With the weights whole
  // (ZeRO-1) the copy is whole: 1 byte a parameter of the rank. Under FSDP it is gathered with its
  // layer, so between uses only the rank's shard is kept: 1/8 of that on 8 ranks.
  const json bf16 = {{"global_batch", 64}}, fp8 = {{"global_batch", 64}, {"dtype", "fp8"}};
  auto buffers = [&](const json& training, int zero) {
    return simulate(kLlama7b, training, "h100-sxm", 8, {{"dp", 8}, {"zero", zero}}).memory.buffers;
  };
  const double params = simulate(kLlama7b, bf16, "h100-sxm", 8, {{"dp", 8}, {"zero", 1}}).memory.weights / 2;
  EXPECT_NEAR(buffers(fp8, 1) - buffers(bf16, 1), params, 1e-6 * params);
  EXPECT_NEAR(buffers(fp8, 3) - buffers(bf16, 3), params / 8, 1e-6 * params);
}

TEST_F(LlmPhysics, TheGradientsBackwardProducesLastAreReducedAfterIt) {
  // Overlapped reduction hides a bucket under the backward that follows it; the input embedding's
  // gradient comes last (its weights are the first the forward uses), and the bucket of the first
  // layers just before it: Megatron-LM's buckets hold max(40M, 1M x dp) parameters. With dp 64,
  // 64M. Llama 7B's embedding is 32,000 x 4,096 = 131,072,000 parameters: 195,072,000 reduced after
  // backward (fp32: 4 bytes each) and gathered before the next forward (bf16: 2 bytes each).
  // Micro-batches of 4 x 2,048 tokens: one backward (about 0.4 s) hides the rest of the reduction.
  const json config = {{"dp", 64}, {"zero", 1}, {"micro_batch", 4}};
  const Run on = simulate(kLlama7b, {{"global_batch", 2048}}, "h100-sxm", 64, config);
  // Each collective crosses 8 nodes: inside a node on the whole buffer, then across them on an eighth.
  const double tail_rs = on.bytes_on("dp_grad_reducescatter_last_bucket", COTUNE_NET_NODE);
  const double tail_ag = on.bytes_on("dp_param_allgather_first_bucket", COTUNE_NET_NODE);
  const double rest_rs = on.bytes_on("dp_grad_reducescatter", COTUNE_NET_NODE);
  EXPECT_DOUBLE_EQ(tail_rs, 195072000.0 * 4);
  EXPECT_DOUBLE_EQ(tail_ag, 195072000.0 * 2);
  EXPECT_GT(rest_rs, 10 * tail_rs);
  // Bandwidth-bound, the exposed reduction is the tail's share of what reducing everything after
  // backward exposes (no overlap): tail / all of the same collectives.
  const Run off = simulate(kLlama7b, {{"global_batch", 2048}, {"overlap_grad_reduce", false}}, "h100-sxm", 64, config);
  const double share = tail_rs / (tail_rs + rest_rs);
  EXPECT_NEAR(on.r.exposed_comm_s[COTUNE_GROUP_DP] / off.r.exposed_comm_s[COTUNE_GROUP_DP], share, 0.1 * share);
  // The experts' gradients (their own buffer, reduced over the expert-data-parallel group) hide
  // under backward like the rest: twice the experts, the same exposed reduction (only the dense
  // tail is exposed, and the router's few more parameters do not reach it).
  const auto moe = [&](int experts) {
    json m = kLlama7b;
    m["layers"] = 8, m["experts"] = experts, m["top_k"] = 2, m["expert_ffn_hidden"] = 4096;
    return simulate(m, {{"global_batch", 2048}}, "h100-sxm", 64,
                    {{"dp", 64}, {"ep", 8}, {"zero", 1}, {"micro_batch", 4}})
        .r.exposed_comm_s[COTUNE_GROUP_DP];
  };
  const double eight = moe(8), sixteen = moe(16);
  ASSERT_GT(eight, 0);
  EXPECT_NEAR(sixteen / eight, 1.0, 0.05);
  // One data-parallel rank reduces nothing.
  EXPECT_EQ(simulate(kLlama7b, {{"global_batch", 8}}, "h100-sxm", 1, {{"dp", 1}, {"zero", 1}})
                .ops("dp_grad_reducescatter_last_bucket"),
            0);
}

TEST_F(LlmPhysics, LearnedPositionsAreAddedOnceRotaryOnesInEveryLayer) {
  // Megatron-LM's default (--position-embedding-type learned_absolute), which GPT-2/3 and the
  // Table 1 models ran: one position lookup and add at the embedding, and no rotation of queries
  // and keys. Llama-class models (SwiGLU, a rope_base) rotate them in every layer, forward and
  // backward, once per micro-batch.
  json gpt = kLlama7b;
  gpt["gated_mlp"] = false;
  const json config = {{"dp", 1}, {"micro_batch", 1}};
  const Run learned = simulate(gpt, {{"global_batch", 4}}, "a100-80gb", 1, config);
  EXPECT_EQ(learned.ops("rope"), 0);
  EXPECT_EQ(learned.ops("rope_grad"), 0);
  EXPECT_EQ(learned.ops("position_embedding"), 1);
  EXPECT_EQ(learned.ops("position_embedding_grad"), 1);
  gpt["rope_base"] = 10000;
  const Run rotated = simulate(gpt, {{"global_batch", 4}}, "a100-80gb", 1, config);
  EXPECT_EQ(rotated.ops("rope"), 32);
  EXPECT_EQ(rotated.ops("rope_grad"), 32);
  EXPECT_EQ(rotated.ops("position_embedding"), 0);
  EXPECT_GT(rotated.r.step_time_s, learned.r.step_time_s);
  // A SwiGLU model without a rope_base is rotary too, as its launch arguments say; so is a
  // squared-ReLU (Nemotron-style) one.
  EXPECT_EQ(simulate(kLlama7b, {{"global_batch", 4}}, "a100-80gb", 1, config).ops("rope"), 32);
  json nemotron = kLlama7b;
  nemotron["gated_mlp"] = false;
  nemotron["activation"] = "squared_relu";
  EXPECT_EQ(simulate(nemotron, {{"global_batch", 4}}, "a100-80gb", 1, config).ops("rope"), 32);
  // Under sequence parallelism Megatron-Core reduce-scatters the embedding only without a position
  // embedding; with learned positions it all-reduces the lookup, adds the positions and splits.
  gpt.erase("rope_base");
  const json sp = {{"tp", 2}, {"dp", 1}, {"sp", true}, {"micro_batch", 1}};
  const Run gpt_sp = simulate(gpt, {{"global_batch", 4}}, "a100-80gb", 2, sp);
  const Run llama_sp = simulate(kLlama7b, {{"global_batch", 4}}, "a100-80gb", 2, sp);
  const auto embedding_collectives = [](const Run& r, const std::string& label) {
    double n = 0;
    for (const auto& o : r.labels)
      if (o.label == label && o.bytes == 2048.0 * 4096 * 2) n += o.count;
    return n;
  };
  EXPECT_EQ(embedding_collectives(gpt_sp, "tp_allreduce"), 1);
  EXPECT_EQ(embedding_collectives(llama_sp, "tp_allreduce"), 0);
  EXPECT_GE(embedding_collectives(llama_sp, "tp_reducescatter"), 1);
}

TEST_F(LlmPhysics, Bf16GradientReductionHalvesTheBufferAndTheBytesReduced) {
  // Megatron-LM keeps fp32 main gradients with bf16 unless --grad-reduce-in-bf16 (Megatron-Bridge's
  // perf recipes: grad_reduce_in_fp32 = False): 2 bytes a parameter instead of 4, in the buffer and
  // in the data-parallel reduce-scatter. Nothing else moves.
  const json config = {{"dp", 8}, {"zero", 1}};
  const Run fp32 = simulate(kLlama7b, {{"global_batch", 64}}, "h100-sxm", 8, config);
  const Run bf16 = simulate(kLlama7b, {{"global_batch", 64}, {"grad_reduce", "bf16"}}, "h100-sxm", 8, config);
  EXPECT_NEAR(bf16.memory.gradients, fp32.memory.gradients / 2, 1);
  EXPECT_DOUBLE_EQ(bf16.memory.weights, fp32.memory.weights);
  EXPECT_DOUBLE_EQ(bf16.memory.optimizer, fp32.memory.optimizer);
  EXPECT_DOUBLE_EQ(bf16.memory.activations, fp32.memory.activations);
  double b32 = 0, b16 = 0;
  ASSERT_GT(fp32.ops("dp_grad_reducescatter", &b32), 0);
  ASSERT_GT(bf16.ops("dp_grad_reducescatter", &b16), 0);
  EXPECT_DOUBLE_EQ(b16, b32 / 2);
  EXPECT_DOUBLE_EQ(bf16.r.compute_s, fp32.r.compute_s);
  // FSDP reduce-scatters each layer's gradients in the same dtype.
  const json fsdp = {{"dp", 8}, {"zero", 3}};
  ASSERT_GT(simulate(kLlama7b, {{"global_batch", 64}}, "h100-sxm", 8, fsdp).ops("fsdp_reducescatter", &b32), 0);
  simulate(kLlama7b, {{"global_batch", 64}, {"grad_reduce", "bf16"}}, "h100-sxm", 8, fsdp).ops("fsdp_reducescatter", &b16);
  EXPECT_DOUBLE_EQ(b16, b32 / 2);
}

TEST_F(LlmPhysics, ContextParallelismCostsAtShortSequencesAndPaysAtLongOnes) {
  // 64 GPUs, a fixed number of tokens per GPU. At 4k tokens a ring of 8 chunks of 512 tokens runs
  // small attention kernels and exchanges keys and values it cannot hide: cp 8 is slower than cp 1.
  json model = kLlama7b;
  model["seq_len"] = 4096;
  const double cp1 = simulate(model, {{"global_batch", 64}}, "h100-sxm", 64, {{"dp", 64}, {"cp", 1}}).r.step_time_s;
  const Run cp8run = simulate(model, {{"global_batch", 64}}, "h100-sxm", 64, {{"dp", 8}, {"cp", 8}});
  EXPECT_GT(cp8run.r.step_time_s, 1.05 * cp1) << cp8run.r.step_time_s << " against " << cp1;
  EXPECT_EQ(cp8run.ops("cp_kv_ring"), 32 * 7) << "seven steps of the ring per layer";
  // At 128k tokens a micro-batch of one sequence does not fit without it; with cp 8 the ring hides
  // behind attention that grows with the square of the chunk.
  model["seq_len"] = 131072;
  const Run long_run = simulate(model, {{"global_batch", 8}}, "h100-sxm", 64, {{"dp", 8}, {"cp", 8}, {"tp", 1}});
  EXPECT_LT(long_run.r.exposed_comm_s[COTUNE_GROUP_CP], 0.05 * long_run.r.step_time_s);
}

TEST_F(LlmPhysics, Fp8SpeedsUpTheGemmsOnlyAndPaysForItsCasts) {
  // Llama-3 70B on 64 H100, tp 4 pp 4: FP8 halves the GEMMs' time at most (its own efficiency),
  // attention stays bf16 and every GEMM input is cast: the step takes 0.6-0.8 of bf16's, as the
  // published runs of Llama-class models show, not 0.5.
  const json model = {{"preset", "llama3-70b"}};
  const json config = {{"tp", 4}, {"pp", 4}, {"dp", 4}, {"vpp", 5}, {"sp", true}, {"zero", 1}};
  const Run bf16 = simulate(model, {{"global_batch", 128}, {"dtype", "bf16"}}, "h100-sxm", 64, config);
  const Run fp8 = simulate(model, {{"global_batch", 128}, {"dtype", "fp8"}}, "h100-sxm", 64, config);
  const double ratio = fp8.r.step_time_s / bf16.r.step_time_s;
  EXPECT_GT(ratio, 0.6);
  EXPECT_LT(ratio, 0.8);
  EXPECT_GT(fp8.ops("fp8_cast"), 0);
  EXPECT_EQ(bf16.ops("fp8_cast"), 0);
}

TEST_F(LlmPhysics, Fp8RecipesScaleBlocksOnBlackwellAndPerTensorBefore) {
  // Llama-3 8B on 8 GB200: MXFP8 (the default there) flags every FP8 GEMM as block-scaled (the
  // output layer stays bf16), timed at the catalogue's 0.91 of per-tensor FP8's efficiency;
  // per-tensor scaling flags none and is faster.
  // On H100 the default is per-tensor, and MXFP8, which needs Blackwell's tensor cores, is refused.
  const json model = {{"preset", "llama3-8b"}};
  const json config = {{"dp", 8}, {"zero", 1}};
  auto training = [](const char* recipe) {
    json t = {{"global_batch", 64}, {"dtype", "fp8"}};
    if (recipe) t["fp8_recipe"] = recipe;
    return t;
  };
  const Run mx = simulate(model, training(nullptr), "gb200", 8, config);
  const Run tensorwise = simulate(model, training("tensorwise"), "gb200", 8, config);
  size_t fp8_gemms = 0;
  for (size_t i = 0; i < mx.labels.size(); ++i) {
    const auto& a = mx.labels[i];
    if (a.kind != COTUNE_OP_GEMM) continue;
    EXPECT_EQ(static_cast<bool>(a.flags & COTUNE_OP_BLOCK_SCALED), a.dtype == COTUNE_DTYPE_FP8) << a.label;
    fp8_gemms += a.dtype == COTUNE_DTYPE_FP8;
    EXPECT_FALSE(tensorwise.labels[i].flags & COTUNE_OP_BLOCK_SCALED) << a.label;
  }
  EXPECT_GT(fp8_gemms, 10u);
  EXPECT_GT(mx.r.step_time_s, 1.03 * tensorwise.r.step_time_s);
  EXPECT_LT(mx.r.step_time_s, tensorwise.r.step_time_s / 0.91);  // only the GEMMs slow down

  const Run h100 = simulate(model, training(nullptr), "h100-sxm", 8, config);
  const Run h100_tensorwise = simulate(model, training("tensorwise"), "h100-sxm", 8, config);
  EXPECT_DOUBLE_EQ(h100.r.step_time_s, h100_tensorwise.r.step_time_s);
  const json w = {{"model", model}, {"training", training("mxfp8")}, {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 1}}}};
  auto s = registry_.make_space("llm", w.dump(), R"({"gpus": [8], "dp": [8]})");
  const auto v = s->parse(R"({"dp": 8, "gpus": 8})");
  EXPECT_THAT(s->explain(v.data()), ::testing::HasSubstr("fp8_recipe mxfp8 needs tensor cores that scale blocks"));
  // A recipe scales FP8 GEMMs only.
  const json bf16 = {{"model", model}, {"training", {{"global_batch", 64}, {"fp8_recipe", "mxfp8"}}},
                     {"cluster", {{"gpu", "gb200"}, {"nodes", 1}}}};
  try {
    registry_.make_space("llm", bf16.dump(), "{}");
    ADD_FAILURE() << "fp8_recipe was taken for a bf16 training";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("/training/fp8_recipe: scales FP8 GEMMs; the training's dtype is bf16"));
  }
}

TEST_F(LlmPhysics, MoeDispatchCrossesNodesAtEachGpusOwnLink) {
  // Mixtral 8x7B, ep 8 on one node against 16 experts on ep 16 over two: the all-to-all inside a node runs over
  // NVLink; across nodes each GPU sends the half of its buffer bound for the other node over its own
  // 50 GB/s link (no 8-way aggregation as a ring all-reduce would get).
  const json model = {{"preset", "mixtral-8x7b"}};
  const Run inside = simulate(model, {{"global_batch", 64}}, "h100-sxm", 8, {{"dp", 8}, {"ep", 8}, {"etp", 1}});
  int32_t level = -1;
  double bytes = 0;
  EXPECT_GT(inside.ops("ep_dispatch", &bytes, &level), 0);
  EXPECT_EQ(level, COTUNE_NET_NODE);
  EXPECT_GT(inside.ops("router"), 0);
  EXPECT_GT(inside.ops("permute"), 0);
  json sixteen = model;
  sixteen["experts"] = 16;
  const Run across = simulate(sixteen, {{"global_batch", 64}}, "h100-sxm", 16, {{"dp", 16}, {"ep", 16}, {"etp", 1}});
  across.ops("ep_dispatch", &bytes, &level);
  EXPECT_EQ(level, COTUNE_NET_CLUSTER);
  EXPECT_GT(across.r.exposed_comm_s[COTUNE_GROUP_EP], 0);
}

TEST_F(LlmPhysics, ExpertGemmsAreGroupedGemmsAndOnlyThey) {
  // Mixtral 8x7B on ep 8: each GPU's expert GEMMs (up and down, forward, dgrad and wgrad: six) run
  // as grouped GEMMs, timed by the hardware's grouped_gemm_efficiency; attention, the router and
  // the output layer are dense GEMMs. On a machine whose grouped GEMMs reach 0.5 of a dense GEMM's
  // efficiency the step is slower, and a dense model's is not.
  const json model = {{"preset", "mixtral-8x7b"}};
  const json config = {{"dp", 8}, {"ep", 8}, {"etp", 1}};
  const Run run = simulate(model, {{"global_batch", 64}}, "h100-sxm", 8, config);
  std::vector<std::string> grouped;
  for (const auto& o : run.labels)
    if (o.flags & COTUNE_OP_GROUPED) {
      EXPECT_EQ(o.kind, COTUNE_OP_GEMM) << o.label;
      grouped.push_back(o.label);
    }
  EXPECT_THAT(grouped, ::testing::UnorderedElementsAre("expert_up", "expert_down", "expert_down_dgrad",
                                                       "expert_down_wgrad", "expert_up_dgrad", "expert_up_wgrad"));
  // Half the catalogue's grouped efficiency (H100: 0.55 of a dense GEMM's).
  json slow_cluster = {{"gpu", "h100-sxm"}, {"nodes", 1}, {"gpu_spec", {{"grouped_gemm_efficiency", 0.275}}}};
  auto step = [&](const json& m, const json& cluster, const json& c) {
    const json w = {{"model", m}, {"training", {{"global_batch", 64}}}, {"cluster", cluster}};
    json options = json::object();
    for (auto it = c.begin(); it != c.end(); ++it) options[it.key()] = {it.value()};
    auto s = registry_.make_space("llm", w.dump(), options.dump());
    const auto v = s->parse(c.dump());
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    cotune::core::perf::simulate(s->lower(v.data()), &r);
    return r.step_time_s;
  };
  const json plain_cluster = {{"gpu", "h100-sxm"}, {"nodes", 1}};
  EXPECT_GT(step(model, slow_cluster, config), 1.2 * step(model, plain_cluster, config));
  const json dense = {{"preset", "llama3-8b"}};
  EXPECT_DOUBLE_EQ(step(dense, slow_cluster, {{"tp", 2}}), step(dense, plain_cluster, {{"tp", 2}}));
}

TEST_F(LlmPhysics, OverlappedExpertParallelAllToAllsHideBehindCompute) {
  // Mixtral 8x7B with 16 experts on ep 16 over two H100 nodes, micro-batch 1 of 4096 tokens: each
  // all-to-all sends half its buffer over the 50 GB/s link, less time than the micro-batch's GEMMs
  // take. With --overlap-moe-expert-parallel-comm another micro-batch computes meanwhile: the
  // exposed expert-parallel time goes to zero and the step is shorter by exactly what was exposed.
  json model = {{"preset", "mixtral-8x7b"}, {"experts", 16}, {"seq_len", 4096}};
  const json config = {{"dp", 16}, {"ep", 16}, {"etp", 1}, {"micro_batch", 1}};
  const Run plain = simulate(model, {{"global_batch", 64}}, "h100-sxm", 16, config);
  const Run overlapped = simulate(model, {{"global_batch", 64}, {"overlap_moe_comm", true}}, "h100-sxm", 16, config);
  const double exposed = plain.r.exposed_comm_s[COTUNE_GROUP_EP];
  ASSERT_GT(exposed, 0.05 * plain.r.step_time_s);
  EXPECT_LT(exposed, plain.r.compute_s);
  EXPECT_NEAR(overlapped.r.exposed_comm_s[COTUNE_GROUP_EP], 0, 1e-9);
  EXPECT_NEAR(overlapped.r.step_time_s, plain.r.step_time_s - exposed, 1e-6 * plain.r.step_time_s);
  EXPECT_DOUBLE_EQ(overlapped.r.compute_s, plain.r.compute_s);

  // Megatron-LM's rule M50: with pipeline parallelism only under the interleaved schedule, never
  // with full recomputation.
  const json w = {{"model", model},
                  {"training", {{"global_batch", 64}, {"overlap_moe_comm", true}}},
                  {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 2}}}};
  auto space = registry_.make_space("llm", w.dump(), R"({"gpus": [16], "etp": [1]})");
  auto why = [&](const json& c) {
    const auto v = space->parse(c.dump());
    return space->explain(v.data());
  };
  EXPECT_THAT(why({{"pp", 2}, {"dp", 8}, {"ep", 8}, {"vpp", 1}, {"gpus", 16}}),
              ::testing::HasSubstr("overlap_moe_comm (--overlap-moe-expert-parallel-comm) needs vpp > 1"));
  EXPECT_THAT(why({{"dp", 16}, {"ep", 16}, {"recompute", "full"}, {"gpus", 16}}),
              ::testing::HasSubstr("does not run with full recomputation"));
  EXPECT_THAT(why({{"pp", 2}, {"dp", 8}, {"ep", 8}, {"vpp", 2}, {"gpus", 16}}),
              ::testing::Not(::testing::HasSubstr("overlap_moe_comm")));
}

TEST_F(LlmPhysics, OverlappedTensorParallelTransfersHideUnderTheirGemms) {
  // Four layers of Llama-3 70B's width on two H100 of one node, tp 2 with sequence parallelism,
  // four micro-batches of 2048 tokens. Each tensor-parallel transfer moves T h 2 = 33.5 MB, of which
  // a ring of two sends half over NVLink (450 GB/s x 0.8) after one 3 us hop, and its kernel costs
  // the 4 us every kernel costs the GPU: c = 53.6 us. A layer
  // sends eight per micro-batch (forward: gather and reduce-scatter around attention and the MLP;
  // backward: the same two pairs). Overlapped (Transformer Engine's userbuffers), the gathers stream
  // into their GEMMs and the backward reduce-scatters run under the weight gradients, all hidden
  // here since every GEMM takes longer; a forward reduce-scatter is pipelined with its GEMM in four
  // splits, and the last split's transfer, c4 = 11.65 + 3 + 4 us, is waited for. The step is shorter by
  // exactly what stops being exposed: 4 layers x 4 micro-batches x (8 c - 2 c4).
  const json model = {{"layers", 4},        {"hidden", 8192}, {"heads", 64},       {"kv_heads", 8},
                      {"ffn_hidden", 28672}, {"vocab", 32000}, {"seq_len", 2048}, {"gated_mlp", true}};
  const json config = {{"tp", 2}, {"sp", true}, {"dp", 1}, {"micro_batch", 1}, {"recompute", "none"}};
  const Run plain = simulate(model, {{"global_batch", 4}}, "h100-sxm", 2, config);
  const Run overlapped = simulate(model, {{"global_batch", 4}, {"tp_comm_overlap", true}}, "h100-sxm", 2, config);
  const double bw = 450e9 * 0.8, hop = 3e-6, launch = 4e-6, bytes = 2048.0 * 8192 * 2;
  const double c = 0.5 * bytes / bw + hop + launch, c4 = 0.5 * bytes / 4 / bw + hop + launch;
  const double saved = 4 * 4 * (8 * c - 2 * c4);
  EXPECT_NEAR(plain.r.exposed_comm_s[COTUNE_GROUP_TP] - overlapped.r.exposed_comm_s[COTUNE_GROUP_TP], saved,
              1e-6 * saved);
  EXPECT_NEAR(plain.r.step_time_s - overlapped.r.step_time_s, saved, 1e-6 * saved);
  EXPECT_DOUBLE_EQ(overlapped.r.compute_s, plain.r.compute_s);

  // Without sequence parallelism there is nothing to overlap (Megatron-LM's rule M09; Bridge drops it).
  json no_sp = config;
  no_sp["sp"] = false;
  EXPECT_DOUBLE_EQ(simulate(model, {{"global_batch", 4}, {"tp_comm_overlap", true}}, "h100-sxm", 2, no_sp).r.step_time_s,
                   simulate(model, {{"global_batch", 4}}, "h100-sxm", 2, no_sp).r.step_time_s);
}

TEST_F(LlmPhysics, TheLossMakesFp32PassesOverTheLogitsUnlessFused) {
  // Llama-7B's 32000-word vocabulary over tp 2, one micro-batch of 2048 tokens: 2048 x 16000 logits
  // per GPU. Megatron-Core's unfused cross entropy casts them to fp32 (2 + 4 bytes each), takes the max
  // (4), subtracts it (8), exponentiates (8), sums (4) and keeps the softmax (8): 38 bytes a logit;
  // backward scales it (8) and casts it to bf16 (6): 14. Fused (--cross-entropy-loss-fusion, or
  // torch.compile under kernels compiled): 6 and 4. Eager PyTorch makes the unfused passes, not three
  // times them as its other elementwise work.
  const json config = {{"tp", 2}, {"sp", true}, {"dp", 1}, {"micro_batch", 1}};
  const double logits = 2048.0 * 32000 / 2;
  auto loss_bytes = [&](const json& training) {
    json t = training;
    t["global_batch"] = 1;
    const Run run = simulate(kLlama7b, t, "h100-sxm", 2, config);
    double forward = 0, backward = 0;
    EXPECT_EQ(run.ops("cross_entropy", &forward), 1);
    EXPECT_EQ(run.ops("cross_entropy_grad", &backward), 1);
    return std::make_pair(forward / logits, backward / logits);
  };
  EXPECT_EQ(loss_bytes(json::object()), std::make_pair(38.0, 14.0));
  EXPECT_EQ(loss_bytes({{"kernels", "eager"}}), std::make_pair(38.0, 14.0));
  EXPECT_EQ(loss_bytes({{"cross_entropy_fusion", true}}), std::make_pair(6.0, 4.0));
  EXPECT_EQ(loss_bytes({{"kernels", "compiled"}}), std::make_pair(6.0, 4.0));
}

TEST_F(LlmPhysics, FlexDispatcherSendsATokenOncePerGpuAndOncePerNode) {
  // Qwen3-30B-A3B's routing (128 experts, top 8) on ep 16 over two H100 nodes, 4096 tokens per GPU.
  // alltoall sends each of a token's 8 copies, half of them to the other node. DeepEP and HybridEP
  // send it once to the other node when any of its experts are there -- with probability
  // 1 - C(64, 8) / C(128, 8) -- and once to each GPU that holds one: the network carries
  // 2 (1 - C(64, 8) / C(128, 8)) / 8, about a quarter, of alltoall's bytes.
  const json model = {{"preset", "qwen3-30b-a3b"}};
  const json config = {{"dp", 16}, {"ep", 16}, {"etp", 1}, {"micro_batch", 1}};
  const Run alltoall = simulate(model, {{"global_batch", 64}}, "h100-sxm", 16, config);
  const Run flex = simulate(model, {{"global_batch", 64}, {"moe_dispatcher", "flex"}}, "h100-sxm", 16, config);
  auto miss = [](double others) {  // C(others, 8) / C(128, 8)
    double p = 1;
    for (int i = 0; i < 8; ++i) p *= (others - i) / (128 - i);
    return p;
  };
  auto dispatch_bytes = [](const Run& run, int32_t level) { return run.bytes_on("ep_dispatch", level); };
  const double across = dispatch_bytes(flex, COTUNE_NET_CLUSTER) / dispatch_bytes(alltoall, COTUNE_NET_CLUSTER);
  EXPECT_NEAR(across, 2 * (1 - miss(64)) / 8, 1e-9);
  // Over NVLink every GPU the token's experts sit on gets it once, on either node (the receiving GPU
  // forwards what crossed): 16 (1 - C(120, 8) / C(128, 8)) GPUs, against alltoall's 4 copies for
  // this node's GPUs. NVLink carries more, the network far less.
  const double within = dispatch_bytes(flex, COTUNE_NET_NODE) / dispatch_bytes(alltoall, COTUNE_NET_NODE);
  EXPECT_NEAR(within, 16 * (1 - miss(120)) / 4, 1e-9);
  EXPECT_LT(flex.r.exposed_comm_s[COTUNE_GROUP_EP], 0.5 * alltoall.r.exposed_comm_s[COTUNE_GROUP_EP]);
  EXPECT_DOUBLE_EQ(flex.r.compute_s, alltoall.r.compute_s) << "the experts compute every copy either way";
}

TEST_F(LlmPhysics, GroupLimitedRoutingSendsATokenToFewerNodes) {
  // 64 experts in 8 groups, top 4 within the best 2 groups (DeepSeek-V3's node-limited routing, scaled
  // down), on ep 16 over two H100 nodes with the flex dispatcher. Each chosen group gives the token
  // about 4 / 2 = 2 of its experts, at least one. Each node holds 4 whole groups: the other node is
  // hit unless both chosen groups are this node's, 1 - C(4, 2) / C(8, 2) = 22/28; without groups
  // 1 - C(32, 4) / C(64, 4). Each GPU holds 4 experts of one group's 8: hit when that group is chosen
  // (2/8) and one of its 2 experts is the GPU's, 2/8 (1 - C(4, 2) / C(8, 2)); without groups
  // 1 - C(60, 4) / C(64, 4).
  const json routed = {{"layers", 4}, {"hidden", 1024}, {"heads", 8}, {"vocab", 32000}, {"seq_len", 1024},
                       {"experts", 64}, {"top_k", 4}, {"expert_ffn_hidden", 512}, {"gated_mlp", true}};
  auto with_groups = [&](double groups, double chosen) {
    json m = routed;
    m["expert_groups"] = groups;
    m["group_top_k"] = chosen;
    return m;
  };
  const json training = {{"global_batch", 64}, {"moe_dispatcher", "flex"}};
  const json config = {{"dp", 16}, {"ep", 16}, {"etp", 1}, {"micro_batch", 1}};
  const Run plain = simulate(routed, training, "h100-sxm", 16, config);
  const Run limited = simulate(with_groups(8, 2), training, "h100-sxm", 16, config);
  auto c = [](double n, double k) {
    double v = 1;
    for (int i = 0; i < static_cast<int>(k); ++i) v *= (n - i) / (k - i);
    return v;
  };
  auto dispatch_bytes = [](const Run& run, int32_t level) { return run.bytes_on("ep_dispatch", level); };
  EXPECT_NEAR(dispatch_bytes(limited, COTUNE_NET_CLUSTER) / dispatch_bytes(plain, COTUNE_NET_CLUSTER),
              (22.0 / 28) / (1 - c(32, 4) / c(64, 4)), 1e-9);
  EXPECT_NEAR(dispatch_bytes(limited, COTUNE_NET_NODE) / dispatch_bytes(plain, COTUNE_NET_NODE),
              (2.0 / 8 * 22.0 / 28) / (1 - c(60, 4) / c(64, 4)), 1e-9);
  EXPECT_LT(limited.r.exposed_comm_s[COTUNE_GROUP_EP], plain.r.exposed_comm_s[COTUNE_GROUP_EP]);
  EXPECT_DOUBLE_EQ(limited.r.compute_s, plain.r.compute_s) << "the experts compute the same tokens";
  // 96 experts in 6 groups of 16 on 16 GPUs of 6 experts: the GPUs cut the groups, and are timed as
  // without groups; each of the two nodes holds 3 whole groups: 1 - C(3, 2) / C(6, 2) = 12/15.
  json six = routed, six_plain = routed;
  six["experts"] = six_plain["experts"] = 96;
  six["expert_groups"] = 6;
  six["group_top_k"] = 2;
  const Run cut = simulate(six, training, "h100-sxm", 16, config);
  const Run cut_plain = simulate(six_plain, training, "h100-sxm", 16, config);
  EXPECT_DOUBLE_EQ(dispatch_bytes(cut, COTUNE_NET_NODE), dispatch_bytes(cut_plain, COTUNE_NET_NODE));
  EXPECT_NEAR(dispatch_bytes(cut, COTUNE_NET_CLUSTER) / dispatch_bytes(cut_plain, COTUNE_NET_CLUSTER),
              (12.0 / 15) / (1 - c(48, 4) / c(96, 4)), 1e-9);
  // Every group chosen, or one group: routing over all experts; alltoall sends every copy whatever
  // the groups.
  for (const auto& [groups, chosen] : {std::pair{8.0, 8.0}, std::pair{1.0, 1.0}})
    EXPECT_DOUBLE_EQ(simulate(with_groups(groups, chosen), training, "h100-sxm", 16, config).r.step_time_s,
                     plain.r.step_time_s);
  json all = training;
  all["moe_dispatcher"] = "alltoall";
  EXPECT_DOUBLE_EQ(simulate(with_groups(8, 2), all, "h100-sxm", 16, config).r.step_time_s,
                   simulate(routed, all, "h100-sxm", 16, config).r.step_time_s);
}

TEST_F(LlmPhysics, SmallModelsWaitForTheHostThatIssuesTheirKernels) {
  // GPT-350M (hidden 1024) at micro-batch 1 and tp 8 on 8 A100: each layer's kernels run in a few
  // microseconds but each takes the framework host_launch_us to issue; the GPU waits. At
  // micro-batch 16 and tp 1 the same model keeps the GPU busy.
  const json model = {{"layers", 24}, {"hidden", 1024}, {"heads", 16}, {"vocab", 51200}, {"seq_len", 1024}};
  const Run small = simulate(model, {{"global_batch", 64}}, "a100-80gb", 8, {{"tp", 8}, {"dp", 1}, {"micro_batch", 1}});
  EXPECT_GT(small.r.launch_bound_s, 0.1 * small.r.step_time_s);
  const Run big = simulate(model, {{"global_batch", 128}}, "a100-80gb", 8, {{"tp", 1}, {"dp", 8}, {"micro_batch", 16}});
  EXPECT_EQ(big.r.launch_bound_s, 0);
}

TEST_F(LlmPhysics, EagerFrameworksRunUnfusedElementwiseWorkAndSdpaAttention) {
  // The same Llama 7B FSDP step on 8 GPUs under Transformer Engine, torch.compile and eager PyTorch.
  // Eager runs three kernels (and three times the bytes) for each fused elementwise one; both
  // PyTorch modes run attention through SDPA, which on Hopper reaches 60 % of the fused kernel's
  // throughput and on Ampere the same as everyone's (FlashAttention-2).
  const json config = {{"dp", 8}, {"micro_batch", 4}, {"zero", 3}};
  auto run = [&](const char* kernels, const char* gpu) {
    return simulate(kLlama7b, {{"global_batch", 32}, {"kernels", kernels}}, gpu, 8, config);
  };
  const Run fused = run("fused", "h100-sxm"), compiled = run("compiled", "h100-sxm"), eager = run("eager", "h100-sxm");
  double fused_bytes = 0, eager_bytes = 0;
  fused.ops("mlp_activation", &fused_bytes);
  eager.ops("mlp_activation", &eager_bytes);
  EXPECT_DOUBLE_EQ(eager_bytes, 3 * fused_bytes);
  EXPECT_LT(fused.r.step_time_s, compiled.r.step_time_s);
  EXPECT_LT(compiled.r.step_time_s, eager.r.step_time_s);
  EXPECT_LT(eager.r.step_time_s, 1.5 * fused.r.step_time_s) << "GEMMs are most of the step";
  // On A100 compiled PyTorch and Transformer Engine with the loss fused run the same kernels.
  const Run fused_loss = simulate(kLlama7b, {{"global_batch", 32}, {"kernels", "fused"}, {"cross_entropy_fusion", true}},
                                  "a100-80gb", 8, config);
  EXPECT_NEAR(run("compiled", "a100-80gb").r.step_time_s, fused_loss.r.step_time_s, 1e-12);
}

TEST_F(LlmPhysics, PyTorchNativeSelectiveRecomputationIsPerOperator) {
  // Llama-3 8B shape (GQA: 8 KV heads of 128), one GPU's micro-batch of 2 x 8192 tokens, tp 1.
  // Under eager PyTorch "selective" is TorchTitan's per-operator policy: each layer keeps the outputs
  // of its 1st, 3rd, 5th and 7th matrix multiplies (wq, wv, w1, w2) and of attention, and reruns
  // the 2nd, 4th and 6th (wk, wo, w3) in backward. Megatron-LM's selective recomputation reruns the
  // attention core only: no GEMM.
  const json model = {{"layers", 32}, {"hidden", 4096}, {"heads", 32}, {"kv_heads", 8}, {"ffn_hidden", 14336},
                      {"vocab", 128256}, {"seq_len", 8192}, {"gated_mlp", true}};
  const json config = {{"dp", 8}, {"micro_batch", 2}, {"zero", 3}, {"recompute", "selective"}};
  auto run = [&](const char* kernels) {
    return simulate(model, {{"global_batch", 16}, {"kernels", kernels}}, "h100-sxm", 8, config);
  };
  const Run eager = run("eager"), fused = run("fused");
  const double T = 2 * 8192, h = 4096, kv = 8 * 128, ffn = 14336, layers = 32;
  EXPECT_DOUBLE_EQ(eager.recomputed_gemm_flops(), layers * 2 * T * (h * kv + h * h + h * ffn));
  EXPECT_EQ(fused.recomputed_gemm_flops(), 0);
  // Kept per layer: the block's input, wq (h wide), wv (kv), attention's output (h), w1 (ffn) and
  // w2 (h), in bf16; plus the logits (bf16 and the fp32 softmax) of the last rank.
  const double per_layer = T * (h + h + kv + h + ffn + h) * 2;
  EXPECT_NEAR(eager.memory.activations, layers * per_layer + T * 128256 * 6, 1);
  EXPECT_LT(eager.memory.activations, 0.6 * fused.memory.activations);
}

}  // namespace
