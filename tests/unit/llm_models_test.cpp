// Today's models and layouts in the llm space: preset parameter counts against their published
// totals, FLOPs of MLA, shared experts and dense-first layers by hand, uneven pipeline splits (the
// heaviest stage timed, each rank's memory), NVL72 groups on NVLink, and a clear error for every bad
// value of the new workload fields.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include <string>
#include <vector>

using cotune::core::PluginError;
using cotune::core::Registry;
using cotune::core::Space;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

constexpr const char* kPlugin = COTUNE_PLUGIN_DIR "/libcotune-space-llm.so";

class LlmModels : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(registry_.load_file(kPlugin)); }
  std::unique_ptr<Space> make(const json& model, const json& options = json::object(), const std::string& gpu = "h100-sxm",
                              double nodes = 1, double batch = 64) {
    const json w = {{"model", model}, {"training", {{"global_batch", batch}}}, {"cluster", {{"gpu", gpu}, {"nodes", nodes}}}};
    return registry_.make_space("llm", w.dump(), options.dump());
  }
  // Parameters of a whole model on one GPU: its weights (2 bytes each) at tp = pp = ep = 1.
  double parameters(const json& model) {
    auto s = make(model, {{"gpus", {1}}, {"dp", {1}}});
    const auto c = s->parse(R"({"gpus": 1})");
    return s->lower(c.data()).memory.weights / 2;
  }
  std::string error(const json& model) {
    try {
      make(model);
    } catch (const PluginError& e) {
      return e.what();
    }
    return "no error";
  }
  Registry registry_;
};

TEST_F(LlmModels, PresetsMatchTheirPublishedParameterCounts) {
  // Totals as their authors publish them (billions; DeepSeek-V3 and Kimi K2 without the MTP module).
  const std::vector<std::pair<std::string, double>> published = {
      {"llama2-7b", 6.74},      {"llama2-13b", 13.02},     {"llama2-70b", 68.98},         {"llama3-8b", 8.03},
      {"llama3-70b", 70.55},    {"llama3.1-405b", 405.85}, {"mixtral-8x7b", 46.70},       {"mixtral-8x22b", 140.62},
      {"qwen3-30b-a3b", 30.53}, {"qwen3-235b-a22b", 235.09}, {"deepseek-v3", 671.03},     {"kimi-k2", 1026.4},
      {"gpt-oss-120b", 116.83}, {"nemotron-4-340b", 341.0},  {"gpt3-175b", 174.6}};
  for (const auto& [preset, billions] : published) {
    json model = {{"preset", preset}};
    if (preset == "deepseek-v3") model["mtp_layers"] = 0;
    EXPECT_NEAR(parameters(model) / 1e9 / billions, 1.0, 0.01) << preset << ": " << parameters(model) / 1e9;
  }
}

TEST_F(LlmModels, FlopsOfMlaSharedExpertsAndDenseFirstLayers) {
  // 4 layers (the first dense), MLA, 8 experts top 2 of width 256 and one shared expert of 128.
  const double h = 512, s = 1024, V = 1000, heads = 8, q = 128, kv = 64, rope = 16, nope = 32, v = 32;
  const json model = {{"layers", 4}, {"hidden", h}, {"heads", heads}, {"vocab", V}, {"seq_len", s},
                      {"ffn_hidden", 1024}, {"experts", 8}, {"top_k", 2}, {"expert_ffn_hidden", 256},
                      {"shared_experts", 1}, {"shared_expert_ffn_hidden", 128}, {"dense_layers_first", 1},
                      {"gated_mlp", true},
                      {"mla", {{"q_lora_rank", q}, {"kv_lora_rank", kv}, {"qk_rope_head_dim", rope},
                               {"qk_nope_head_dim", nope}, {"v_head_dim", v}}}};
  auto sp = make(model, {{"gpus", {1}}, {"dp", {1}}}, "h100-sxm", 1, 8);
  const auto c = sp->parse(R"({"gpus": 1})");
  const cotune_trace& t = sp->lower(c.data());
  // Forward FLOPs per token: MLA projections, the causal core (half the keys, q/k and v widths),
  // one dense layer's SwiGLU MLP, three MoE layers' top-2 experts + shared expert + router, the
  // output layer; training is 3x.
  const double qk = nope + rope;
  const double mla = h * q + q * heads * qk + h * (kv + rope) + kv * heads * (nope + v) + heads * v * h;
  const double core = 2 * (s / 2) * heads * (qk + v);
  const double dense = 3 * h * 1024;
  const double moe = 2 * 3 * h * 256 + 3 * h * 128 + h * 8;
  const double per_token = 4 * (2 * mla + core) + 2 * dense + 3 * 2 * moe + 2 * h * V;
  EXPECT_NEAR(t.model_flops_per_gpu / (3 * per_token * 8 * s), 1.0, 1e-9);
  // Parameters: the norms of MLA's latents, and the MoE layers hold every expert.
  const double mla_params = mla + q + kv;
  const double params = 4 * (mla_params + 2 * h) + 3 * h * 1024 + 3 * (8 * 3 * h * 256 + 3 * h * 128 + h * 8) + 2 * V * h;
  EXPECT_NEAR(t.memory.weights / 2 / params, 1.0, 1e-9);
  // Routed layers dispatch their tokens; the dense one does not: three layers' all-to-alls per
  // micro-batch, none in a dense model of the same shape.
  json dense_model = model;
  dense_model.erase("experts"), dense_model.erase("top_k"), dense_model.erase("expert_ffn_hidden");
  dense_model.erase("shared_experts"), dense_model.erase("shared_expert_ffn_hidden"), dense_model.erase("dense_layers_first");
  auto ep = make(model, {{"ep", {2}}, {"dp", {2}}, {"gpus", {2}}}, "h100-sxm", 1, 8);
  const auto c2 = ep->parse(R"({"ep": 2, "dp": 2, "gpus": 2})");
  const cotune_trace& t2 = ep->lower(c2.data());
  double dispatches = 0;
  for (size_t i = 0; i < t2.num_ops; ++i)
    if (std::string(t2.ops[i].label.data, t2.ops[i].label.len) == "ep_dispatch") dispatches += t2.ops[i].count;
  EXPECT_EQ(dispatches, 3);
}

TEST_F(LlmModels, UnevenPipelineStagesTimeTheHeaviestRankAndCountEachRanksMemory) {
  // 10 layers over pp 4: not even, but (10 + 2) / 4 = 3 with the embedding and loss as layers:
  // ranks hold 2, 3, 3, 2 decoder layers.
  const json model = {{"layers", 10}, {"hidden", 1024}, {"heads", 8}, {"vocab", 1000}, {"seq_len", 1024}};
  auto s = make(model, {{"pp", {4}}, {"dp", {2}}});
  const auto c = s->parse(R"({"pp": 4, "dp": 2})");
  EXPECT_EQ(s->explain(c.data()), "");
  EXPECT_THAT(s->render(c.data(), COTUNE_RENDER_MEGATRON),
              AllOf(HasSubstr("--account-for-embedding-in-pipeline-split\n"), HasSubstr("--account-for-loss-in-pipeline-split\n")));
  auto layers_in = [](const cotune_trace& t) {
    for (size_t i = 0; i < t.num_ops; ++i)
      if (std::string(t.ops[i].label.data, t.ops[i].label.len) == "qkv") return t.ops[i].count;
    return 0.0;
  };
  EXPECT_EQ(layers_in(s->lower(c.data())), 3);  // a middle rank: its three layers outweigh the last's two + a small output
  // With a vocabulary of 256k the last rank's output layer is the heavier: it is the one timed.
  json big_vocab = model;
  big_vocab["vocab"] = 256000;
  auto s2 = make(big_vocab, {{"pp", {4}}, {"dp", {2}}});
  const auto c2 = s2->parse(R"({"pp": 4, "dp": 2})");
  const cotune_trace& t2 = s2->lower(c2.data());
  EXPECT_EQ(layers_in(t2), 2);
  // The bubble is (p - 1) / v of the timed rank's micro-batch.
  cotune_sim_result r{};
  r.struct_size = sizeof r;
  cotune::core::perf::simulate(t2, &r);
  EXPECT_NEAR(r.bubble_s / ((r.step_time_s - r.bubble_s - r.optimizer_s) / t2.micro_batches), 3.0, 0.5);

  // Explicit first/last stages: 1 + 4 + 4 + 1, the middle ranks even.
  auto s3 = make(model, {{"pp", {4}}, {"dp", {2}}, {"first_stage_layers", {1}}, {"last_stage_layers", {1}}});
  const auto c3 = s3->parse(R"({"pp": 4, "dp": 2, "first_stage_layers": 1, "last_stage_layers": 1})");
  EXPECT_EQ(s3->explain(c3.data()), "");
  EXPECT_EQ(layers_in(s3->lower(c3.data())), 4);
  EXPECT_THAT(s3->render(c3.data(), COTUNE_RENDER_MEGATRON),
              AllOf(HasSubstr("--decoder-first-pipeline-num-layers 1\n"), HasSubstr("--decoder-last-pipeline-num-layers 1\n")));
  auto s4 = make(model, {{"pp", {4}}, {"dp", {2}}, {"first_stage_layers", {3}}, {"last_stage_layers", {2}}});
  const auto c4 = s4->parse(R"({"pp": 4, "dp": 2, "first_stage_layers": 3, "last_stage_layers": 2})");
  EXPECT_THAT(s4->explain(c4.data()), HasSubstr("do not split evenly over 2 pipeline ranks"));
  // A split no flag makes even (61 layers, pp 16): an explicit layout, the middle stages deeper.
  const json ds = {{"layers", 61}, {"hidden", 1024}, {"heads", 8}, {"vocab", 1000}, {"seq_len", 1024}};
  auto s5 = make(ds, {{"pp", {16}}, {"dp", {1}}, {"gpus", {16}}}, "h100-sxm", 2, 64);
  const auto c5 = s5->parse(R"({"pp": 16, "dp": 1, "gpus": 16})");
  EXPECT_EQ(s5->explain(c5.data()), "");
  EXPECT_THAT(s5->render(c5.data(), COTUNE_RENDER_MEGATRON),
              HasSubstr("--pipeline-model-parallel-layout 'Ettt|tttt|"));
  // With one multi-token-prediction layer (DeepSeek-V3) the last stage also runs it, a decoder
  // layer's work and an output layer more: it takes one decoder layer fewer. floor(61 / 16) = 3:
  // the first stage 3, the last 3 - 1 = 2 and the MTP layer, the 14 middle ones 56 / 14 = 4 each
  // (without MTP: 3, thirteen 4s and a 3, then 3 and the MTP layer on the last).
  json ds_mtp = ds;
  ds_mtp["mtp_layers"] = 1;
  auto s6 = make(ds_mtp, {{"pp", {16}}, {"dp", {1}}, {"gpus", {16}}}, "h100-sxm", 2, 64);
  const auto c6 = s6->parse(R"({"pp": 16, "dp": 1, "gpus": 16})");
  EXPECT_EQ(s6->explain(c6.data()), "");
  std::string layout = "Ettt";
  for (int i = 0; i < 14; ++i) layout += "|tttt";
  layout += "|ttmL";
  EXPECT_THAT(s6->render(c6.data(), COTUNE_RENDER_MEGATRON),
              HasSubstr("--pipeline-model-parallel-layout '" + layout + "'"));
  // Memory: the first rank holds the most micro-batches in flight; with fewer layers than the
  // middle ranks it can still be the largest, and a rank that holds the embedding counts it.
  const cotune_memory m = s->lower(c.data()).memory;
  EXPECT_GT(m.activations, 0);
}

TEST_F(LlmModels, Nvl72GroupsStayOnNvlinkWhereHgxGroupsCrossNodes) {
  const json model = {{"layers", 8}, {"hidden", 8192}, {"heads", 64}, {"vocab", 32000}, {"seq_len", 4096}};
  auto level_of_tp = [&](const std::string& gpu, double nodes) {
    auto s = make(model, {{"tp", {16}}, {"dp", {1}}, {"gpus", {16}}}, gpu, nodes);
    const auto c = s->parse(R"({"tp": 16, "dp": 1, "gpus": 16})");
    const cotune_trace& t = s->lower(c.data());
    std::set<int32_t> levels;
    for (size_t i = 0; i < t.num_ops; ++i)
      if (t.ops[i].kind == COTUNE_OP_COLLECTIVE && t.ops[i].group == COTUNE_GROUP_TP) levels.insert(t.ops[i].net_level);
    return levels;
  };
  EXPECT_EQ(level_of_tp("gb200", 4), std::set<int32_t>{COTUNE_NET_NODE});  // 16 of one 72-GPU domain
  EXPECT_EQ(level_of_tp("h100-sxm", 2), (std::set<int32_t>{COTUNE_NET_NODE, COTUNE_NET_CLUSTER}));
}

TEST_F(LlmModels, BadValuesOfTheNewFieldsNameTheField) {
  const json base = {{"layers", 4}, {"hidden", 512}, {"heads", 8}, {"vocab", 1000}, {"seq_len", 1024}};
  auto with = [&](const json& extra) {
    json m = base;
    for (auto it = extra.begin(); it != extra.end(); ++it) m[it.key()] = it.value();
    return error(m);
  };
  EXPECT_THAT(with({{"head_dim", 0}}), HasSubstr("/model/head_dim: expected a positive integer, got 0"));
  EXPECT_THAT(with({{"shared_experts", 1}}), HasSubstr("/model/shared_experts: only a mixture of experts"));
  EXPECT_THAT(with({{"dense_layers_first", 1}}), HasSubstr("/model/dense_layers_first: only a mixture of experts"));
  EXPECT_THAT(with({{"capacity_factor", -1}}), HasSubstr("/model/capacity_factor: expected a number in [0, 64]"));
  EXPECT_THAT(with({{"mtp_layers", 1.5}}), HasSubstr("/model/mtp_layers: expected a whole number"));
  EXPECT_THAT(with({{"mla", {{"kv_lora_rank", 64}}}}), HasSubstr("/model/mla/qk_nope_head_dim: missing"));
  EXPECT_THAT(with({{"mla", {{"kv_lora_rank", 64}, {"qk_nope_head_dim", 32}, {"v_head_dim", 32}, {"rank", 1}}}}),
              HasSubstr("/model/mla/rank: unknown field"));
  EXPECT_THAT(with({{"experts", 8}, {"dense_layers_first", 4}}),
              HasSubstr("/model/dense_layers_first: must be below layers (4)"));
  EXPECT_THAT(with({{"experts", 8}, {"moe_layer_freq", 0}}), HasSubstr("/model/moe_layer_freq: expected a positive integer"));
  EXPECT_THAT(with({{"experts", 8}, {"shared_expert_ffn_hidden", 64}}),
              HasSubstr("/model/shared_expert_ffn_hidden: set shared_experts too"));
  // Group-limited routing: both fields, whole groups, and enough experts in the chosen groups.
  EXPECT_THAT(with({{"expert_groups", 2}, {"group_top_k", 1}}), HasSubstr("/model/expert_groups: only a mixture of experts"));
  const json moe = {{"experts", 16}, {"top_k", 4}};
  auto with_moe = [&](const json& extra) {
    json m = moe;
    for (auto it = extra.begin(); it != extra.end(); ++it) m[it.key()] = it.value();
    return with(m);
  };
  EXPECT_THAT(with_moe({{"expert_groups", 4}}), HasSubstr("/model/group_top_k: missing (group-limited routing needs"));
  EXPECT_THAT(with_moe({{"expert_groups", 3}, {"group_top_k", 1}}),
              HasSubstr("/model/expert_groups: must divide experts (16), got 3"));
  EXPECT_THAT(with_moe({{"expert_groups", 4}, {"group_top_k", 5}}),
              HasSubstr("/model/group_top_k: must not exceed expert_groups (4), got 5"));
  EXPECT_THAT(with_moe({{"expert_groups", 8}, {"group_top_k", 1}}),
              HasSubstr("/model/group_top_k: the 1 chosen groups hold 2 experts, fewer than top_k (4)"));
  EXPECT_THAT(with_moe({{"expert_groups", 1}, {"group_top_k", 2}}),
              HasSubstr("/model/group_top_k: must not exceed expert_groups (1), got 2"));
  EXPECT_THAT(with_moe({{"top_k", 2}, {"expert_groups", 4}, {"group_top_k", 3}}),
              HasSubstr("/model/group_top_k: must not exceed top_k (2)"));
  EXPECT_EQ(with_moe({{"expert_groups", 4}, {"group_top_k", 2}}), "no error");
  EXPECT_EQ(with_moe({{"expert_groups", 1}, {"group_top_k", 1}}), "no error");
  // A value the preset set is said to be the preset's, with the way to route over all experts.
  EXPECT_THAT(error({{"preset", "deepseek-v3"}, {"experts", 100}}),
              HasSubstr("/model/expert_groups: must divide experts (100), got 8 (preset deepseek-v3 sets them; "
                        "expert_groups 1 and group_top_k 1 route over all experts)"));
  EXPECT_EQ(error({{"preset", "deepseek-v3"}, {"experts", 100}, {"expert_groups", 1}, {"group_top_k", 1}}), "no error");
  EXPECT_THAT(error({{"preset", "llama-9"}}), HasSubstr("/model/preset: unknown preset 'llama-9'"));
  EXPECT_THAT(with({{"activation", "relu"}}),
              HasSubstr("/model/activation: expected \"swiglu\", \"gelu\" or \"squared_relu\", got \"relu\""));
  EXPECT_THAT(with({{"activation", "squared_relu"}, {"gated_mlp", true}}),
              HasSubstr("/model/activation: squared_relu is not gated, but gated_mlp is true"));
  EXPECT_THAT(with({{"rope_base", -1}}), HasSubstr("/model/rope_base: expected a number >= 0"));
  EXPECT_THAT(with({{"heads", 7}}), HasSubstr("/model/heads: hidden (512) must be divisible by heads (7), or give head_dim"));
  // With head_dim the heads need not divide the hidden size (gpt-oss: 64 x 64 over 2880).
  EXPECT_EQ(with({{"heads", 7}, {"kv_heads", 7}, {"head_dim", 64}}), "no error");
  try {
    registry_.make_space("llm", json{{"model", base}, {"training", {{"global_batch", 8}, {"peft", "qlora"}}},
                                     {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 1}}}}.dump());
    FAIL() << "peft qlora accepted";
  } catch (const PluginError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/training/peft: expected none or lora, got 'qlora'"));
  }
  try {
    registry_.make_space("llm", json{{"model", base}, {"training", {{"global_batch", 8}, {"kernels", "jit"}}},
                                     {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 1}}}}.dump());
    FAIL() << "kernels jit accepted";
  } catch (const PluginError& e) {
    EXPECT_THAT(e.what(), HasSubstr("/training/kernels: expected fused, compiled or eager, got 'jit'"));
  }
}

TEST_F(LlmModels, MegatronBuildsTheModelThePresetDescribes) {
  auto render = [&](const json& model) {
    auto s = make(model, {{"tp", {8}}, {"pp", {1}}, {"dp", {1}}});
    const auto c = s->parse(R"({"tp": 8, "pp": 1, "dp": 1, "sp": true})");
    return s->render(c.data(), COTUNE_RENDER_MEGATRON);
  };
  json nemotron = {{"preset", "nemotron-8b"}};
  const std::string n = render(nemotron);
  EXPECT_THAT(n, HasSubstr("  --squared-relu\n"));
  EXPECT_THAT(n, HasSubstr("  --position-embedding-type rope\n"));
  EXPECT_THAT(n, HasSubstr("  --disable-bias-linear\n"));
  EXPECT_THAT(n, Not(HasSubstr("--swiglu")));
  EXPECT_THAT(n, Not(HasSubstr("RMSNorm")));
  EXPECT_THAT(n, Not(HasSubstr("--rotary-base")));  // Megatron's default, 10000
  const std::string l = render({{"preset", "llama3-8b"}});
  EXPECT_THAT(l, HasSubstr("  --swiglu\n"));
  EXPECT_THAT(l, HasSubstr("  --normalization RMSNorm\n"));
  EXPECT_THAT(l, HasSubstr("  --rotary-base 500000\n"));
  const std::string d = render({{"preset", "deepseek-v3"}});  // node-limited routing: 4 of 8 groups
  EXPECT_THAT(d, HasSubstr("  --moe-router-num-groups 8\n"));
  EXPECT_THAT(d, HasSubstr("  --moe-router-group-topk 4\n"));
  EXPECT_THAT(render({{"preset", "qwen3-30b-a3b"}}), Not(HasSubstr("--moe-router-num-groups")));
  // Every group chosen is no limit: nothing to pass.
  EXPECT_THAT(render({{"preset", "deepseek-v3"}, {"group_top_k", 8}}), Not(HasSubstr("--moe-router-num-groups")));
  const std::string g = render({{"preset", "gpt3-5b"}});
  EXPECT_THAT(g, Not(HasSubstr("--position-embedding-type")));  // learned positions, biases, GeLU
  EXPECT_THAT(g, Not(HasSubstr("--disable-bias-linear")));
}

TEST_F(LlmModels, BadLayoutParametersAreRefusedWithTheRule) {
  const json moe = {{"preset", "mixtral-8x7b"}};
  auto s = make(moe, {{"tp", {2}}, {"etp", {1, 2, 4}}, {"ep", {8}}}, "h100-sxm", 2, 64);
  auto why = [&](const json& c) {
    const auto v = s->parse(c.dump());
    return s->explain(v.data());
  };
  // etp 1 fits the expert grid (8 x 1 of the 16 tensor x data ranks); its memory is another matter.
  EXPECT_EQ(why({{"tp", 2}, {"ep", 8}, {"etp", 1}, {"dp", 8}, {"sp", true}}).find("ep*etp"), std::string::npos);
  EXPECT_THAT(why({{"tp", 2}, {"ep", 8}, {"etp", 4}, {"dp", 8}, {"sp", true}}),
              HasSubstr("ep*etp (8*4) must divide tp*cp*dp (16)"));
  const std::string megatron = [&] {
    const auto v = s->parse(json{{"tp", 2}, {"ep", 8}, {"etp", 1}, {"dp", 8}, {"sp", true}}.dump());
    return s->render(v.data(), COTUNE_RENDER_MEGATRON);
  }();
  EXPECT_THAT(megatron, HasSubstr("--expert-tensor-parallel-size 1"));
  auto r = make(moe, {{"recompute", {"selective", "none"}}, {"recompute_modules", {"core_attn", "mla_up_proj", "moe_act"}}});
  auto rwhy = [&](const json& c) {
    const auto v = r->parse(c.dump());
    return r->explain(v.data());
  };
  EXPECT_THAT(rwhy({{"recompute", "selective"}, {"recompute_modules", "mla_up_proj"}, {"ep", 8}, {"dp", 8}}),
              HasSubstr("recompute module mla_up_proj needs multi-latent attention"));
  EXPECT_THAT(rwhy({{"recompute", "none"}, {"recompute_modules", "moe_act"}, {"ep", 8}, {"dp", 8}}),
              HasSubstr("recompute_modules (moe_act) applies to selective recomputation only"));
  EXPECT_THROW(make(moe, {{"recompute_modules", {"attention"}}}), PluginError);
}

}  // namespace
