// The llm space plugin through the real Registry: FLOP and memory formulas against hand-computed
// values, every constraint with its reason, sampling, features, lowering, rendering and parsing.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

using cotune::core::Registry;
using cotune::core::Space;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

constexpr const char* kPlugin = COTUNE_PLUGIN_DIR "/libcotune-space-llm.so";
constexpr double GiB = 1073741824.0;

json gpt_workload(const std::string& preset, double nodes, double batch, bool dropout = true) {
  return {{"model", {{"preset", preset}}},
          {"training", {{"global_batch", batch}, {"dtype", "bf16"}, {"attention", "unfused"}, {"dropout", dropout}}},
          {"cluster", {{"gpu", "a100-80gb"}, {"nodes", nodes}}}};
}

class LlmSpaceTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(registry_.load_file(kPlugin)) << kPlugin; }
  std::unique_ptr<Space> make(const json& workload, const json& options = json::object()) {
    return registry_.make_space("llm", workload.dump(), options.dump());
  }
  static std::vector<double> config(const Space& s, const json& c) { return s.parse(c.dump()); }
  Registry registry_;
};

}  // namespace

TEST_F(LlmSpaceTest, DescribesItsParameters) {
  auto s = make(gpt_workload("gpt-1.7b", 4, 512));
  std::vector<std::string> names;
  for (const auto& p : s->params()) names.push_back(p.name);
  EXPECT_THAT(names, ::testing::ElementsAre("tp", "pp", "dp", "cp", "ep", "micro_batch", "vpp", "zero", "recompute",
                                            "sp", "gpus", "gpu", "etp", "first_stage_layers", "last_stage_layers",
                                            "recompute_modules"));
  // Added later: stored configurations and tables may leave them out, and keys stay as they were.
  for (size_t i = 12; i < s->params().size(); ++i) EXPECT_TRUE(s->params()[i].flags & COTUNE_PARAM_OPTIONAL);
  const auto c = s->parse(R"({"tp": 2, "dp": 16})");
  EXPECT_EQ(s->key(c.data()),
            "tp=2;pp=1;dp=16;cp=1;ep=1;micro_batch=1;vpp=1;zero=0;recompute=none;sp=false;gpus=32;gpu=a100-80gb");
  EXPECT_TRUE(s->can_lower());
}

TEST_F(LlmSpaceTest, PipelineDegreesIncludeTheNearlyEvenUnevenSplits) {
  // The even splits, and the powers of two whose heaviest stage has at most a third more layers
  // than the lightest: DeepSeek-V3's 61 layers on pp 8 (8 and 7 layers) and 16 (4 and 3), not 32
  // (2 and 1); Llama-3 70B's 80 layers split evenly on every power of two up to 16 and pp 32 would
  // leave stages of 3 and 2.
  auto domain = [&](const char* preset, const char* name) {
    auto s = make({{"model", {{"preset", preset}}}, {"training", {{"global_batch", 8192}}},
                   {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 128}}}});
    for (const auto& p : s->params())
      if (p.name == name) return p.domain();
    return std::vector<double>{};
  };
  EXPECT_EQ(domain("deepseek-v3", "pp"), (std::vector<double>{1, 2, 4, 8, 16, 61}));
  EXPECT_EQ(domain("llama3-70b", "pp"), (std::vector<double>{1, 2, 4, 5, 8, 10, 16, 20, 40, 80}));
  EXPECT_EQ(domain("deepseek-v3", "vpp"), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(domain("llama3-70b", "vpp"), (std::vector<double>{1, 2, 4, 5, 8}));
  // Such a layout is timed as the framework builds it (Megatron-LM's pipeline layout).
  auto s = make({{"model", {{"preset", "deepseek-v3"}}}, {"training", {{"global_batch", 8192}, {"dtype", "fp8"}}},
                 {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 128}}}});
  const auto c = config(*s, {{"tp", 2}, {"pp", 8}, {"vpp", 4}, {"ep", 64}, {"dp", 64}, {"zero", 1},
                             {"recompute", "full"}, {"sp", true}});
  EXPECT_EQ(s->explain(c.data()), "");
  EXPECT_THAT(s->render(c.data(), COTUNE_RENDER_MEGATRON), HasSubstr("--pipeline-model-parallel-layout"));
}

TEST_F(LlmSpaceTest, ModelFlopsFollowMegatronEquation) {
  // Megatron-LM with causal attention (as Megatron-LM and NeMo count it now): the attention
  // scores cover half the sequence, 72 B s l h^2 (1 + s/(12h) + V/(12 l h)) per step without
  // recomputation.
  auto s = make(gpt_workload("gpt3-175b", 128, 1536));
  const auto c = config(*s, {{"tp", 8}, {"pp", 16}, {"micro_batch", 1}});
  const cotune_trace& t = s->lower(c.data());
  const double B = 1536, sq = 2048, l = 96, h = 12288, V = 51200;
  const double expected = 72 * B * sq * l * h * h * (1 + sq / (12 * h) + V / (12 * l * h)) / 1024;
  EXPECT_NEAR(t.model_flops_per_gpu / expected, 1.0, 1e-12);
  EXPECT_EQ(t.micro_batches, 1536 / 8);
  EXPECT_EQ(t.pipeline_stages, 16);
  EXPECT_DOUBLE_EQ(t.tokens_per_step, 1536 * 2048);
  EXPECT_EQ(std::string(t.hardware.gpu_name.data, t.hardware.gpu_name.len), "a100-80gb");
}

TEST_F(LlmSpaceTest, WeightGradientAndOptimizerMemory) {
  auto s = make(gpt_workload("gpt-1.7b", 4, 512));
  const double h = 2304, L = 24, V = 51200;
  // Per layer: QKV + projection 4h^2, MLP 8h^2, two norms 2h; tied embedding once (pp = 1).
  const double params = L * (12 * h * h + 2 * h) + V * h;
  auto c = config(*s, {{"tp", 1}, {"pp", 1}, {"dp", 32}, {"zero", 0}});
  cotune_memory m = s->lower(c.data()).memory;
  EXPECT_NEAR(m.weights, 2 * params, 1);
  EXPECT_NEAR(m.gradients, 4 * params, 1);
  EXPECT_NEAR(m.optimizer, 12 * params, 1);
  c = config(*s, {{"tp", 1}, {"pp", 1}, {"dp", 32}, {"zero", 1}});
  m = s->lower(c.data()).memory;
  EXPECT_NEAR(m.optimizer, 12 * params / 32, 1);
  EXPECT_NEAR(m.gradients, 4 * params, 1);
  c = config(*s, {{"tp", 1}, {"pp", 1}, {"dp", 32}, {"zero", 3}});
  m = s->lower(c.data()).memory;
  EXPECT_NEAR(m.weights, 2 * params / 32, 1);
  EXPECT_NEAR(m.gradients, 4 * params / 32, 1);
}

TEST_F(LlmSpaceTest, ActivationMemoryFollowsKorthikanti) {
  auto s = make(gpt_workload("gpt-22b", 1, 4));
  const double sq = 2048, b = 4, h = 6144, a = 64, t = 8, L = 48, V = 51200;
  const double sbh = sq * b * h;
  const double tail = sq * b * V / t * 6;  // bf16 logits and the fp32 softmax the loss keeps
  // Tensor parallel only: sbh (10 + 24/t + 5as/(ht)) per layer.
  auto c = config(*s, {{"tp", 8}, {"micro_batch", 4}, {"recompute", "none"}, {"sp", false}});
  EXPECT_NEAR(s->lower(c.data()).memory.activations, L * sbh * (10 + 24 / t + 5 * a * sq / (h * t)) + tail, 1e3);
  // Sequence parallel + selective recomputation: 34 sbh / t.
  c = config(*s, {{"tp", 8}, {"micro_batch", 4}, {"recompute", "selective"}, {"sp", true}});
  EXPECT_NEAR(s->lower(c.data()).memory.activations, L * 34 * sbh / t + tail, 1e3);
  // Full recomputation keeps each layer's input (2 sbh / t) and rebuilds one layer.
  c = config(*s, {{"tp", 8}, {"micro_batch", 4}, {"recompute", "full"}, {"sp", true}});
  EXPECT_NEAR(s->lower(c.data()).memory.activations,
              L * 2 * sbh / t + sbh * (34 / t + 5 * a * sq / (h * t)) + tail, 1e3);
}

TEST_F(LlmSpaceTest, EveryConstraintExplainsItself) {
  json w = {{"model", {{"preset", "mixtral-8x7b"}}},
            {"training", {{"global_batch", 64}}},
            {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 2}}}};
  auto s = make(w);
  auto why = [&](const json& c) {
    std::vector<double> v = config(*s, c);
    return s->explain(v.data());
  };
  EXPECT_THAT(why({{"tp", 2}, {"pp", 2}, {"dp", 2}}), HasSubstr("tp*pp*dp*cp = 2*2*2*1 = 8 but gpus = 16"));
  EXPECT_THAT(why({{"tp", 16}, {"dp", 1}}), HasSubstr("kv_heads (8) are not divisible by tp (16)"));
  EXPECT_THAT(why({{"tp", 2}, {"pp", 8}, {"vpp", 8}, {"dp", 1}}),
              HasSubstr("pp*vpp (8*8) exceeds the layers (32) with the embedding and the loss"));
  std::vector<double> outside = config(*s, {{"tp", 4}, {"dp", 4}});
  outside[5] = 32;  // micro_batch beyond its domain
  EXPECT_THAT(s->explain(outside.data()), HasSubstr("micro_batch = 32 is outside its domain [1, 2, 4, 8, 16]"));
  EXPECT_THAT(why({{"tp", 2}, {"dp", 8}, {"micro_batch", 16}}),
              HasSubstr("global_batch (64) is not divisible by dp*micro_batch (8*16)"));
  EXPECT_THAT(why({{"tp", 1}, {"dp", 16}, {"sp", true}}), HasSubstr("sp (sequence parallelism) needs tp > 1"));
  EXPECT_THAT(why({{"tp", 8}, {"dp", 2}, {"ep", 4}}), HasSubstr("ep*etp (4*8) must divide tp*cp*dp (16)"));
  EXPECT_THAT(why({{"tp", 1}, {"dp", 16}, {"zero", 0}}), HasSubstr("out of memory: needs"));
  EXPECT_THAT(why({{"tp", 1}, {"dp", 16}, {"zero", 0}}), HasSubstr("optimizer state"));
  EXPECT_EQ(why({{"tp", 8}, {"dp", 2}, {"ep", 2}, {"sp", true}, {"recompute", "selective"}}), "");

  auto dense = make(gpt_workload("gpt-1.7b", 4, 512));
  auto dwhy = [&](const json& c) {
    std::vector<double> v = config(*dense, c);
    return dense->explain(v.data());
  };
  EXPECT_THAT(dwhy({{"tp", 1}, {"dp", 32}, {"vpp", 2}}), HasSubstr("vpp > 1 (interleaving) needs pp > 1"));
  EXPECT_THAT(dwhy({{"tp", 16}, {"dp", 2}}), HasSubstr("heads (24) are not divisible by tp (16)"));
  auto small_batch = make(gpt_workload("gpt-1.7b", 4, 96));
  std::vector<double> interleaved = config(*small_batch, {{"tp", 1}, {"pp", 2}, {"vpp", 3}, {"dp", 16}, {"micro_batch", 2}});
  EXPECT_THAT(small_batch->explain(interleaved.data()),
              HasSubstr("interleaved schedule needs micro-batches per step (3) divisible by pp (2)"));
  std::vector<double> v = config(*dense, {{"tp", 1}, {"dp", 32}});
  v[4] = 2;  // ep on a dense model
  EXPECT_THAT(dense->explain(v.data()), HasSubstr("outside its domain"));
}

TEST_F(LlmSpaceTest, SamplesAreValidAndReproducible) {
  auto s = make({{"model", {{"preset", "llama3-70b"}}},
                 {"training", {{"global_batch", 1024}}},
                 {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 64}}}});
  std::vector<double> a(50 * s->num_params()), b(50 * s->num_params());
  ASSERT_EQ(s->sample(7, 50, a.data()), 50u);
  ASSERT_EQ(s->sample(7, 50, b.data()), 50u);
  EXPECT_EQ(a, b);
  std::vector<int32_t> ok(50);
  s->check(a.data(), 50, ok.data());
  for (int32_t v : ok) EXPECT_EQ(v, 1);
}

TEST_F(LlmSpaceTest, FeaturesHaveNamesAndDerivedQuantities) {
  auto s = make(gpt_workload("gpt3-175b", 128, 1536));
  const auto& names = s->feature_names();
  for (const char* f : {"tp", "bubble_fraction", "model_flops_per_gpu", "comm_bytes_node", "comm_bytes_cluster",
                        "memory_gib", "arithmetic_intensity"})
    EXPECT_THAT(names, ::testing::Contains(f));
  const auto c = config(*s, {{"tp", 8}, {"pp", 16}, {"micro_batch", 1}, {"vpp", 2}});
  std::vector<double> f(names.size());
  s->featurize(c.data(), 1, f.data());
  auto at = [&](const std::string& n) { return f[std::find(names.begin(), names.end(), n) - names.begin()]; };
  EXPECT_DOUBLE_EQ(at("tp"), 8);
  EXPECT_DOUBLE_EQ(at("bubble_fraction"), 15.0 / (2 * 192));
  EXPECT_GT(at("comm_bytes_node"), 0);     // tensor parallel inside the node
  EXPECT_GT(at("comm_bytes_cluster"), 0);  // pipeline and data parallel across nodes
  EXPECT_EQ(at("comm_bytes_island"), 0);
  EXPECT_GT(at("hardware_flops_per_gpu"), at("model_flops_per_gpu"));  // the unfused attention and the output layer's
  for (double x : f) EXPECT_TRUE(std::isfinite(x));
}

// An invalid configuration inside the domains (dp * micro_batch above the global batch: no
// whole micro-batch per step) still has finite features: predictors refuse inf.
TEST_F(LlmSpaceTest, FeaturesOfAnInvalidConfigurationAreFinite) {
  auto s = make(gpt_workload("gpt3-175b", 128, 1536));
  const auto c = config(*s, {{"tp", 1}, {"pp", 2}, {"dp", 512}, {"micro_batch", 16}});  // 8192 > 1536
  EXPECT_FALSE(s->valid(c.data()));
  std::vector<double> f(s->feature_names().size());
  s->featurize(c.data(), 1, f.data());
  for (double x : f) EXPECT_TRUE(std::isfinite(x));
}

TEST_F(LlmSpaceTest, LowersTensorParallelCommunicationInsideTheNode) {
  auto s = make(gpt_workload("gpt3-175b", 128, 1536));
  const auto c = config(*s, {{"tp", 8}, {"pp", 16}, {"micro_batch", 1}, {"recompute", "full"}});
  const cotune_trace& t = s->lower(c.data());
  int tp_ops = 0, recompute_ops = 0;
  for (size_t i = 0; i < t.num_ops; ++i) {
    const cotune_op& op = t.ops[i];
    if (op.kind == COTUNE_OP_COLLECTIVE && op.group == COTUNE_GROUP_TP) {
      ++tp_ops;
      EXPECT_EQ(op.net_level, COTUNE_NET_NODE);
      EXPECT_EQ(op.group_size, 8);
    }
    if (op.flags & COTUNE_OP_RECOMPUTE) ++recompute_ops;
  }
  EXPECT_GT(tp_ops, 4);
  EXPECT_GT(recompute_ops, 5);
}

TEST_F(LlmSpaceTest, RendersMegatronTorchTitanAndJson) {
  auto s = make({{"model", {{"preset", "llama3-70b"}}},
                 {"training", {{"global_batch", 1024}}},
                 {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 64}}}});
  const auto c = config(*s, {{"tp", 8}, {"pp", 4}, {"vpp", 5}, {"micro_batch", 1}, {"sp", true},
                             {"recompute", "selective"}, {"zero", 1}});
  const std::string mg = s->render(c.data(), COTUNE_RENDER_MEGATRON);
  EXPECT_THAT(mg, HasSubstr("--tensor-model-parallel-size 8"));
  EXPECT_THAT(mg, HasSubstr("--pipeline-model-parallel-size 4"));
  EXPECT_THAT(mg, HasSubstr("--num-layers-per-virtual-pipeline-stage 4"));
  EXPECT_THAT(mg, HasSubstr("--sequence-parallel"));
  EXPECT_THAT(mg, HasSubstr("--recompute-granularity selective"));
  EXPECT_THAT(mg, HasSubstr("--use-distributed-optimizer"));
  EXPECT_THAT(mg, HasSubstr("--num-query-groups 8"));
  // Without a target: the newest TorchTitan, whose configuration is command-line overrides.
  const std::string tt = s->render(c.data(), COTUNE_RENDER_TORCHTITAN);
  EXPECT_THAT(tt, HasSubstr("--parallelism.tensor_parallel_degree 8\n"));
  EXPECT_THAT(tt, HasSubstr("--parallelism.pipeline_parallel_schedule Interleaved1F1B\n"));
  EXPECT_THAT(tt, HasSubstr("--parallelism.data_parallel_shard_degree 16\n"));
  EXPECT_THAT(tt, Not(HasSubstr("activation_checkpoint:")));  // selective is TorchTitan's default
  // v0.2.2 reads a TOML job file.
  s->set_target("torchtitan@v0.2.2");
  const auto c2 = config(*s, {{"tp", 8}, {"pp", 4}, {"vpp", 2}, {"micro_batch", 1}, {"sp", true},
                              {"recompute", "selective"}, {"zero", 3}});
  const std::string toml = s->render(c2.data(), COTUNE_RENDER_TORCHTITAN);
  EXPECT_THAT(toml, HasSubstr("tensor_parallel_degree = 8"));
  EXPECT_THAT(toml, HasSubstr("pipeline_parallel_schedule = \"Interleaved1F1B\""));
  EXPECT_THAT(toml, HasSubstr("data_parallel_shard_degree = 16"));
  EXPECT_THAT(toml, HasSubstr("mode = \"selective\""));
  EXPECT_THAT(toml, HasSubstr("[model]\nname = \"llama3\"\nflavor = \"70B\"\n"));
  // A GPT-style model of Llama-3 70B's sizes (GeLU, learned positions) is no llama3 flavor.
  auto gpt = make({{"model", {{"preset", "llama3-70b"}, {"gated_mlp", false}, {"activation", "gelu"}, {"rope_base", 0}}},
                   {"training", {{"global_batch", 1024}}},
                   {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 64}}}});
  gpt->set_target("torchtitan@v0.2.2");
  EXPECT_THAT(gpt->render(config(*gpt, {{"tp", 8}, {"pp", 4}, {"sp", true}, {"zero", 3}}).data(),
                          COTUNE_RENDER_TORCHTITAN),
              HasSubstr("name = \"<your model's registry name>\""));
  const std::string js = s->render(c.data(), COTUNE_RENDER_JSON);
  EXPECT_EQ(json::parse(js)["recompute"], "selective");
  EXPECT_EQ(s->parse(js), c);  // round trip
  EXPECT_THROW(s->render(c.data(), COTUNE_RENDER_TORCHREC), std::exception);
}

TEST_F(LlmSpaceTest, FlexDispatcherIsExportedWhereTheFrameworkHasIt) {
  const json w = {{"model", {{"preset", "qwen3-30b-a3b"}}},
                  {"training", {{"global_batch", 256}, {"moe_dispatcher", "flex"}}},
                  {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 4}}}};
  auto s = make(w, {{"ep", {16}}, {"etp", {1, 2}}, {"tp", {2}}, {"sp", {true}}, {"zero", {1, 3}}});
  const auto c = config(*s, {{"tp", 2}, {"ep", 16}, {"etp", 1}, {"sp", true}, {"zero", 1}});
  const std::string mg = s->render(c.data(), COTUNE_RENDER_MEGATRON);
  EXPECT_THAT(mg, HasSubstr("--moe-token-dispatcher-type flex"));
  EXPECT_THAT(mg, HasSubstr("--moe-flex-dispatcher-backend deepep"));
  s->set_target("nemo");
  EXPECT_THAT(s->render(c.data(), COTUNE_RENDER_NEMO), HasSubstr("cfg.model.moe_flex_dispatcher_backend = \"deepep\""));
  // TorchTitan v0.2.2 names its deepep backend, which needs etp 1.
  s->set_target("torchtitan@v0.2.2");
  const auto c3 = config(*s, {{"tp", 2}, {"ep", 16}, {"etp", 1}, {"sp", true}, {"zero", 3}});
  EXPECT_THAT(s->render(c3.data(), COTUNE_RENDER_TORCHTITAN), HasSubstr("expert_parallel_comm_backend = \"deepep\""));
  // No TorchTitan flavor has Qwen3-30B's dimensions: [model] names placeholders TorchTitan refuses,
  // rather than nothing, which would train its default llama3 debugmodel.
  EXPECT_THAT(s->render(c3.data(), COTUNE_RENDER_TORCHTITAN),
              HasSubstr("[model]\nname = \"<your model's registry name>\"\nflavor = \"<its flavor with the dimensions above>\"\n"));
  const auto etp2 = config(*s, {{"tp", 2}, {"ep", 16}, {"etp", 2}, {"sp", true}, {"zero", 3}});
  EXPECT_THAT(s->explain(etp2.data()), HasSubstr("etp must be 1 with the deepep backend"));
  // Where the job config cannot say it, the workload is refused with the reason.
  for (const char* target : {"torchtitan@v0.1.0", "torchtitan", "deepspeed"}) {
    try {
      s->set_target(target);
      ADD_FAILURE() << target << " accepted a flex dispatcher";
    } catch (const std::exception& e) {
      EXPECT_THAT(e.what(), HasSubstr("cannot run it: moe_dispatcher flex")) << target;
    }
  }
}

TEST_F(LlmSpaceTest, Fp8RecipeIsExportedAsEachFrameworkNamesIt) {
  auto space_for = [&](const char* recipe, const char* gpu) {
    json training = {{"global_batch", 128}, {"dtype", "fp8"}};
    if (recipe) training["fp8_recipe"] = recipe;
    const json w = {{"model", {{"preset", "llama3-8b"}}}, {"training", training}, {"cluster", {{"gpu", gpu}, {"nodes", 1}}}};
    return make(w, {{"tp", {1}}, {"zero", {1}}});
  };
  struct Case {
    const char* recipe;
    const char* gpu;
    const char* megatron;  // --fp8-format and --fp8-recipe
    const char* nemo;      // the mixed-precision preset
    const char* torchtitan;
  };
  for (const Case& k : {Case{nullptr, "gb200", "--fp8-format e4m3\n  --fp8-recipe mxfp8", "bf16_with_mxfp8_mixed",
                             "converters = [\"quantize.linear.mx\"]"},
                        Case{"tensorwise", "gb200", "--fp8-format hybrid\n  --fp8-recipe tensorwise",
                             "bf16_with_fp8_current_scaling_mixed", "converters = [\"quantize.linear.float8\"]"},
                        Case{nullptr, "h100-sxm", "--fp8-recipe tensorwise", "bf16_with_fp8_current_scaling_mixed",
                             "converters = [\"quantize.linear.float8\"]"},
                        Case{"blockwise", "h100-sxm", "--fp8-recipe blockwise", "bf16_with_fp8_subchannel_scaling_mixed",
                             nullptr}}) {
    const std::string label = std::string(k.recipe ? k.recipe : "auto") + " on " + k.gpu;
    auto s = space_for(k.recipe, k.gpu);
    const auto c = config(*s, {{"tp", 1}, {"zero", 1}});
    EXPECT_THAT(s->render(c.data(), COTUNE_RENDER_MEGATRON), HasSubstr(k.megatron)) << label;
    s->set_target("nemo");
    EXPECT_THAT(s->render(c.data(), COTUNE_RENDER_NEMO), HasSubstr(k.nemo)) << label;
    if (k.torchtitan) {
      s->set_target("torchtitan@v0.2.2");
      EXPECT_THAT(s->render(c.data(), COTUNE_RENDER_TORCHTITAN), HasSubstr(k.torchtitan)) << label;
    } else {
      try {
        s->set_target("torchtitan@v0.2.2");
        ADD_FAILURE() << label << ": TorchTitan accepted it";
      } catch (const std::exception& e) {
        EXPECT_THAT(e.what(), HasSubstr("cannot run it: fp8_recipe blockwise")) << label;
      }
    }
  }
  // TorchTitan's HEAD scales float8 per row only: a named recipe is refused there, auto is not.
  for (const char* recipe : {"tensorwise", "mxfp8"}) {
    auto named = space_for(recipe, "gb200");
    try {
      named->set_target("torchtitan");
      ADD_FAILURE() << recipe << ": TorchTitan's HEAD accepted it";
    } catch (const std::exception& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("cannot run it: fp8_recipe ") + recipe)) << recipe;
    }
  }
  auto automatic = space_for(nullptr, "gb200");
  automatic->set_target("torchtitan");
  EXPECT_THAT(automatic->render(config(*automatic, {{"tp", 1}, {"zero", 1}}).data(), COTUNE_RENDER_TORCHTITAN),
              HasSubstr("recipe_name=\"rowwise\""));
  // A misspelt recipe names the one it most likely means; Megatron-LM's delayed scaling points to
  // tensorwise.
  for (const auto& [recipe, message] :
       {std::pair<const char*, const char*>{"mxfp9", "got 'mxfp9' (did you mean \"mxfp8\"?)"},
        {"delayed", "'delayed' (Megatron-LM's delayed scaling) scales per tensor too: write tensorwise"}}) {
    try {
      space_for(recipe, "gb200");
      ADD_FAILURE() << recipe << " was taken";
    } catch (const std::exception& e) {
      EXPECT_THAT(e.what(), HasSubstr(message)) << recipe;
    }
  }
  // TorchTitan v0.1.0 names the MX converter and its recipe in a table of its own.
  auto s = space_for("mxfp8", "b200");
  s->set_target("torchtitan@v0.1.0");
  const std::string toml = s->render(config(*s, {{"tp", 1}, {"zero", 1}}).data(), COTUNE_RENDER_TORCHTITAN);
  EXPECT_THAT(toml, HasSubstr("converters = [\"mx\"]"));
  EXPECT_THAT(toml, HasSubstr("[mx]\nrecipe_name = \"mxfp8\"\n"));
}

TEST_F(LlmSpaceTest, Bf16GradientReductionIsExportedWhereTheFrameworkHasIt) {
  const json w = {{"model", {{"preset", "llama3-8b"}}},
                  {"training", {{"global_batch", 128}, {"grad_reduce", "bf16"}}},
                  {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 2}}}};
  auto s = make(w, {{"tp", {1, 2}}, {"sp", {true, false}}, {"zero", {1}}});
  const auto c = config(*s, {{"tp", 2}, {"sp", true}, {"zero", 1}});
  EXPECT_THAT(s->render(c.data(), COTUNE_RENDER_MEGATRON), HasSubstr("--grad-reduce-in-bf16"));
  // The preset's grad_reduce_in_fp32 overrides the ddp config's: it is set on the preset's object.
  s->set_target("nemo");
  const std::string nemo = s->render(c.data(), COTUNE_RENDER_NEMO);
  EXPECT_THAT(nemo, HasSubstr("from megatron.bridge.training.mixed_precision import get_mixed_precision_config\n"));
  EXPECT_THAT(nemo, HasSubstr("    cfg.mixed_precision = get_mixed_precision_config(\"bf16_mixed\")\n"
                              "    cfg.mixed_precision.grad_reduce_in_fp32 = False\n"));
  // Without the distributed optimizer the reduction still overlaps (as the model times it and as
  // the Megatron-LM export says); only the parameter gather needs the distributed optimizer.
  auto plain_dp = make(w, {{"tp", {1}}, {"sp", {false}}, {"zero", {0}}});
  plain_dp->set_target("nemo");
  const auto z0 = config(*plain_dp, {{"tp", 1}, {"sp", false}, {"zero", 0}});
  const std::string nemo0 = plain_dp->render(z0.data(), COTUNE_RENDER_NEMO);
  EXPECT_THAT(nemo0, HasSubstr("cfg.ddp.overlap_grad_reduce = True\n"));
  EXPECT_THAT(nemo0, HasSubstr("cfg.ddp.overlap_param_gather = False\n"));
  plain_dp->set_target("megatron");
  EXPECT_THAT(plain_dp->render(z0.data(), COTUNE_RENDER_MEGATRON), HasSubstr("--overlap-grad-reduce"));
  s->set_target("deepspeed");
  const auto c1 = config(*s, {{"tp", 1}, {"sp", false}, {"zero", 1}});
  const json ds = json::parse(s->render(c1.data(), COTUNE_RENDER_DEEPSPEED));
  EXPECT_EQ(ds.at("communication_data_type"), "bf16");
  EXPECT_EQ(ds.at("data_types").at("grad_accum_dtype"), "bf16");
  // TorchTitan reduces in float32 only.
  for (const char* target : {"torchtitan@v0.1.0", "torchtitan@v0.2.2", "torchtitan"}) {
    try {
      s->set_target(target);
      ADD_FAILURE() << target << " accepted bf16 gradient reduction";
    } catch (const std::exception& e) {
      EXPECT_THAT(e.what(), HasSubstr("cannot run it: grad_reduce bf16")) << target;
    }
  }
  // Without it, nothing changes: the preset by name, no flag.
  auto plain = make({{"model", {{"preset", "llama3-8b"}}}, {"training", {{"global_batch", 128}}},
                     {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 2}}}},
                    {{"tp", {2}}, {"sp", {true}}, {"zero", {1}}});
  const auto pc = config(*plain, {{"tp", 2}, {"sp", true}, {"zero", 1}});
  EXPECT_THAT(plain->render(pc.data(), COTUNE_RENDER_MEGATRON), Not(HasSubstr("grad-reduce-in-bf16")));
  plain->set_target("nemo");
  EXPECT_THAT(plain->render(pc.data(), COTUNE_RENDER_NEMO), HasSubstr("    cfg.mixed_precision = \"bf16_mixed\"\n"));
}

// A layout over the memory estimate is still timed (a run that ran did fit); one the framework
// refuses is not, so the framework's reason is the one given when both apply.
TEST_F(LlmSpaceTest, AFrameworkRuleOutranksTheMemoryEstimate) {
  const json w = {{"model", {{"preset", "llama3-70b"}}}, {"training", {{"global_batch", 64}}},
                  {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 1}}}};
  auto s = make(w, {{"tp", {2}}, {"sp", {false}}, {"zero", {0}}});
  const auto c = config(*s, {{"tp", 2}, {"sp", false}, {"zero", 0}});
  EXPECT_THAT(s->explain(c.data()), HasSubstr("out of memory"));
  s->set_target("torchtitan");
  EXPECT_THAT(s->explain(c.data()), HasSubstr("TorchTitan main"));
  EXPECT_THAT(s->explain(c.data()), Not(HasSubstr("out of memory")));
}

TEST_F(LlmSpaceTest, CoDesignOverGpuTypesAndCounts) {
  json w = {{"model", {{"preset", "llama3-8b"}}},
            {"training", {{"global_batch", 256}}},
            {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 4}, {"price_per_gpu_hour", 3}}}};
  auto s = make(w, {{"gpu", {"h100-sxm", "a100-80gb"}}, {"gpus", {8, 16, 32}}});
  const auto c = config(*s, {{"gpu", "a100-80gb"}, {"gpus", 16}, {"tp", 2}});
  EXPECT_EQ(c[2], 8);  // dp derived from gpus/(tp*pp*cp)
  const cotune_trace& t = s->lower(c.data());
  EXPECT_EQ(std::string(t.hardware.gpu_name.data, t.hardware.gpu_name.len), "a100-80gb");
  EXPECT_EQ(t.gpus, 16);
  EXPECT_EQ(t.hardware.nodes, 2);
  EXPECT_DOUBLE_EQ(t.hardware.price_per_gpu_hour, 3);
}

TEST_F(LlmSpaceTest, RejectsBadWorkloadsAndOptionsNamingTheField) {
  auto error = [&](const json& w, const json& o = json::object()) -> std::string {
    try {
      make(w, o);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  json w = gpt_workload("gpt-1.7b", 4, 512);
  json bad = w;
  bad["model"]["preset"] = "gpt-5";
  EXPECT_THAT(error(bad), HasSubstr("/model/preset: unknown preset 'gpt-5'"));
  bad = w;
  bad["training"]["dtype"] = "int4";
  EXPECT_THAT(error(bad), HasSubstr("/training/dtype: expected bf16, fp16, fp8 or fp4"));
  bad = w;
  bad["training"].erase("global_batch");
  EXPECT_THAT(error(bad), HasSubstr("/training/global_batch: missing"));
  bad = w;
  bad["model"] = {{"layers", 2}, {"hidden", 100}, {"heads", 3}, {"vocab", 10}, {"seq_len", 8}};
  EXPECT_THAT(error(bad), HasSubstr("/model/heads: hidden (100) must be divisible by heads (3)"));
  bad = w;
  bad["cluster"]["gpu"] = "v100";
  EXPECT_THAT(error(bad), HasSubstr("/cluster/gpu: unknown GPU 'v100'"));
  EXPECT_THAT(error(bad), Not(HasSubstr("/cluster: /cluster"))) << "the path once";
  EXPECT_THAT(error(w, {{"tp", {3, "x"}}}), HasSubstr("space options/tp"));
  EXPECT_THAT(error(w, {{"colour", {1}}}), HasSubstr("space options/colour: unknown option (expected a parameter"));
  EXPECT_THAT(error(w, {{"micro-batch", {1}}}), HasSubstr("space options/micro-batch: unknown option (did you mean \"micro_batch\"?)"));
  bad = w;
  bad["training"]["tp_overlap_comm"] = true;
  EXPECT_THAT(error(bad), HasSubstr("/training/tp_overlap_comm: unknown training field (did you mean \"tp_comm_overlap\"?) "
                                    "(expected global_batch, "));
  bad = w;
  bad["model"]["ffn_hiden"] = 128;
  EXPECT_THAT(error(bad), HasSubstr("/model/ffn_hiden: unknown model field (did you mean \"ffn_hidden\"?)"));
  auto s = make(w);
  EXPECT_THROW(s->parse(R"({"tp": 3})"), std::exception);
  EXPECT_THROW(s->parse(R"({"recompute": "some"})"), std::exception);
  EXPECT_THROW(s->parse(R"({"tpp": 1})"), std::exception);
}
