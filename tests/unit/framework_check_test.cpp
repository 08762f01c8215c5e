// The export checker (tests/support/framework_check.hpp) on small hand-written exports: for every
// format a valid export that passes, and broken ones that fail naming the rule they break. These
// do not involve the exporters: they pin down what the checker itself accepts.
#include "support/framework_check.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

using cotune::testing::CheckResult;
using cotune::testing::FrameworkData;
using nlohmann::json;
using ::testing::HasSubstr;

namespace {

const FrameworkData& data() { return FrameworkData::load(COTUNE_SHARED_DIR "/data/frameworks"); }

// `text` with its only occurrence of `from` replaced by `to` (the test fails if there is none).
std::string with(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "no '" << from << "' in the export";
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

::testing::AssertionResult passes(const CheckResult& r) {
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "[" << r.rule << "] " << r.message;
}

// Fails with `rule`, and the message names `mentions`.
::testing::AssertionResult breaks(const CheckResult& r, const std::string& rule, const std::string& mentions = "") {
  if (r.ok) return ::testing::AssertionFailure() << "passed; expected a failure of " << rule;
  if (r.rule != rule || r.message.find(mentions) == std::string::npos)
    return ::testing::AssertionFailure() << "expected [" << rule << "] mentioning '" << mentions << "', got [" << r.rule
                                         << "] " << r.message;
  return ::testing::AssertionSuccess();
}

// ---- Megatron-LM ----------------------------------------------------------------------------------

const std::string kMegatron = R"(# Megatron-LM main (d98e8a64): pretrain_gpt.py arguments for 64 GPUs (8 nodes of 8)
# torchrun --nnodes 8 --nproc-per-node 8 pretrain_gpt.py "${MEGATRON_ARGS[@]}" plus your data and tokenizer
export CUDA_DEVICE_MAX_CONNECTIONS=1
MEGATRON_ARGS=(
  --num-layers 80
  --hidden-size 8192
  --num-attention-heads 64
  --ffn-hidden-size 28672
  --group-query-attention
  --num-query-groups 8
  --seq-length 8192
  --max-position-embeddings 8192
  --tokenizer-type NullTokenizer
  --vocab-size 128256
  --untie-embeddings-and-output-weights
  --swiglu
  --normalization RMSNorm
  --position-embedding-type rope
  --disable-bias-linear
  --micro-batch-size 1
  --global-batch-size 512
  --tensor-model-parallel-size 4
  --pipeline-model-parallel-size 4
  --sequence-parallel
  --pipeline-model-parallel-layout 'Et*4|(t*4|)*18,t*4L'
  --recompute-granularity selective
  --recompute-modules core_attn mlp
  --use-distributed-optimizer
  --overlap-grad-reduce
  --overlap-param-gather
  --attention-backend auto
  --bf16
  --attention-dropout 0
  --hidden-dropout 0
)
)";

const json kMegatronConfig = {{"tp", 4},         {"pp", 4},          {"dp", 4},           {"cp", 1},
                              {"ep", 1},         {"micro_batch", 1}, {"vpp", 5},          {"zero", 1},
                              {"recompute", "selective"}, {"sp", true}, {"gpus", 64},     {"gpu", "h100-sxm"},
                              {"recompute_modules", "core_attn,mlp"}, {"global_batch", 512}, {"seq_len", 8192},
                              {"num_layers", 80}};

CheckResult megatron(const std::string& text, const std::string& version = "main", const json& config = json()) {
  return check_export(data(), "megatron", version, text, config);
}

std::string megatron_v019(const std::string& text) {
  return with(text, "Megatron-LM main (d98e8a64)", "Megatron-LM core_v0.19.0 (5be96267)");
}

TEST(FrameworkCheckMegatron, AcceptsAValidExportAtBothVersions) {
  EXPECT_TRUE(passes(megatron(kMegatron)));
  EXPECT_TRUE(passes(megatron(kMegatron, "main", kMegatronConfig)));
  EXPECT_TRUE(passes(megatron(megatron_v019(kMegatron), "core_v0.19.0", kMegatronConfig)));
  EXPECT_TRUE(passes(megatron(kMegatron, "HEAD")));
}

TEST(FrameworkCheckMegatron, RefusesFlagsTheVersionDoesNotHave) {
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --bf16\n", "  --bf16\n  --no-such-flag 3\n")), "flag", "--no-such-flag"));
  // --megatron-fsdp-version exists only at HEAD.
  const std::string head_only = with(kMegatron, "  --bf16\n", "  --bf16\n  --megatron-fsdp-version 1\n");
  EXPECT_TRUE(passes(megatron(head_only)));
  EXPECT_TRUE(breaks(megatron(megatron_v019(head_only), "core_v0.19.0"), "flag", "exists at main"));
}

TEST(FrameworkCheckMegatron, RefusesWrongArityTypesAndChoices) {
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "--num-layers 80", "--num-layers eighty")), "type", "--num-layers"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "--hidden-dropout 0", "--hidden-dropout none")), "type"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "--attention-backend auto", "--attention-backend fastest")), "choices",
                     "flash"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "--normalization RMSNorm", "--normalization rmsnorm")), "choices"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --bf16\n", "  --bf16 true\n")), "arity", "--bf16"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "--seq-length 8192", "--seq-length")), "arity"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --bf16\n", "  --bf16\n  --bf16\n")), "duplicate"));
}

TEST(FrameworkCheckMegatron, RefusesMalformedFragments) {
  // An unquoted layout would be bash syntax (parentheses, a pipe), not one argument.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "'Et*4|(t*4|)*18,t*4L'", "Et*4|(t*4|)*18,t*4L")), "format", "bash"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "MEGATRON_ARGS=(", "ARGS=(")), "format"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --hidden-dropout 0\n)\n", "  --hidden-dropout 0\n")), "format"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "(d98e8a64)", "(5be96267)")), "header", "d98e8a64"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "for 64 GPUs", "for some GPUs")), "header"));
}

TEST(FrameworkCheckMegatron, TensorAndSequenceParallelRules) {
  // M08: --sequence-parallel with tp 1.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "--tensor-model-parallel-size 4", "--tensor-model-parallel-size 1")), "M08"));
  // M07: 3 KV groups on tp 4.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "--num-query-groups 8", "--num-query-groups 3")), "M07"));
  // M59: the groups are dropped without --group-query-attention.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --group-query-attention\n", "")), "M59"));
  // M01: 64 GPUs are not a multiple of tp 4 x pp 4 x cp 3.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --bf16\n", "  --bf16\n  --context-parallel-size 3\n")), "M01"));
  // M11: tp > 1 needs CUDA_DEVICE_MAX_CONNECTIONS=1.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "export CUDA_DEVICE_MAX_CONNECTIONS=1\n", "")), "M11"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "CUDA_DEVICE_MAX_CONNECTIONS=1", "CUDA_DEVICE_MAX_CONNECTIONS=8")), "M11"));
}

TEST(FrameworkCheckMegatron, PipelineRules) {
  // M20: 79 decoder layers in the layout for --num-layers 80.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "t*4L'", "t*3L'")), "M20", "79"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "'Et*4|", "'t*4|E")), "M20", "start with E"));
  // M20: 21 stages are not a multiple of pp 4.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "(t*4|)*18,t*4L", "(t*4|)*18,t*2|t*2L")), "M20", "stages"));
  // M13: two ways to say the virtual pipeline.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --bf16\n", "  --bf16\n  --num-virtual-stages-per-pipeline-rank 5\n")),
                     "M13"));
  // M14/M15/M18 on splits without a layout.
  const std::string plain = with(kMegatron, "  --pipeline-model-parallel-layout 'Et*4|(t*4|)*18,t*4L'\n", "");
  EXPECT_TRUE(passes(megatron(plain)));
  EXPECT_TRUE(passes(megatron(with(plain, "  --bf16\n", "  --bf16\n  --num-layers-per-virtual-pipeline-stage 5\n"))));
  EXPECT_TRUE(breaks(megatron(with(plain, "  --bf16\n", "  --bf16\n  --num-layers-per-virtual-pipeline-stage 3\n")),
                     "M15"));
  EXPECT_TRUE(breaks(megatron(with(plain, "--num-layers 80", "--num-layers 78")), "M14"));
  const std::string uneven = "  --decoder-first-pipeline-num-layers 18\n  --decoder-last-pipeline-num-layers 18\n";
  EXPECT_TRUE(passes(megatron(with(plain, "  --bf16\n", "  --bf16\n" + uneven))));
  EXPECT_TRUE(breaks(megatron(with(plain, "  --bf16\n", "  --bf16\n" + with(uneven, "18\n", "19\n"))), "M18"));
  EXPECT_TRUE(breaks(
      megatron(with(plain, "  --bf16\n", "  --bf16\n" + uneven + "  --account-for-loss-in-pipeline-split\n")), "M18b"));
}

TEST(FrameworkCheckMegatron, ShardingAndBatchRules) {
  // M33: 510 sequences are not a multiple of micro 1 x dp 4.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "--global-batch-size 512", "--global-batch-size 510")), "M33"));
  // M27: Torch FSDP2 with pp 4 (and without the environment of M11, which FSDP refuses).
  const std::string no_env = with(kMegatron, "export CUDA_DEVICE_MAX_CONNECTIONS=1\n", "");
  EXPECT_TRUE(breaks(megatron(with(no_env, "  --bf16\n", "  --bf16\n  --use-torch-fsdp2\n")), "M27", "pp 1"));
  // M11 again: Megatron-FSDP wants CUDA_DEVICE_MAX_CONNECTIONS other than 1.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --bf16\n", "  --bf16\n  --use-megatron-fsdp\n")), "M11"));
  // M28: Megatron-FSDP without --ckpt-format fsdp_dtensor.
  EXPECT_TRUE(breaks(megatron(with(no_env, "  --bf16\n", "  --bf16\n  --use-megatron-fsdp\n")), "M28"));
  EXPECT_TRUE(passes(megatron(
      with(no_env, "  --bf16\n", "  --bf16\n  --use-megatron-fsdp\n  --ckpt-format fsdp_dtensor\n"))));
  // M26: --overlap-param-gather without the distributed optimizer.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --use-distributed-optimizer\n", "")), "M26"));
  // M37: 8190 tokens do not split into 2 x cp 2 chunks.
  EXPECT_TRUE(breaks(megatron(with(with(kMegatron, "--seq-length 8192", "--seq-length 8190"), "  --bf16\n",
                                   "  --bf16\n  --context-parallel-size 2\n")),
                     "M37"));
}

TEST(FrameworkCheckMegatron, ModelRules) {
  const std::string moe = "  --num-experts 8\n  --moe-grouped-gemm\n  --moe-token-dispatcher-type alltoall\n";
  const std::string with_moe = with(kMegatron, "  --bf16\n", "  --bf16\n" + moe);
  EXPECT_TRUE(passes(megatron(with_moe)));
  EXPECT_TRUE(passes(megatron(with(with_moe, "  --bf16\n", "  --bf16\n  --moe-layer-freq '([0]*3+[1]*77)'\n"))));
  // M44: the list expression gives 79 layers for 80.
  EXPECT_TRUE(breaks(megatron(with(with_moe, "  --bf16\n", "  --bf16\n  --moe-layer-freq '([0]*3+[1]*76)'\n")), "M44",
                     "79"));
  EXPECT_TRUE(breaks(megatron(with(with_moe, "  --bf16\n", "  --bf16\n  --moe-layer-freq '([0]*3+[1]*'\n")), "type"));
  // M42: an MoE model with biases and etp 4.
  EXPECT_TRUE(breaks(megatron(with(with_moe, "  --disable-bias-linear\n", "")), "M42"));
  // M41: ep 4 does not divide 6 experts.
  EXPECT_TRUE(breaks(megatron(with(with_moe, "--num-experts 8", "--num-experts 6\n  --expert-model-parallel-size 4")),
                     "M41"));
  // M43: top-1 routing without --moe-router-pre-softmax.
  EXPECT_TRUE(breaks(megatron(with(with_moe, "  --bf16\n", "  --bf16\n  --moe-router-topk 1\n")), "M43"));
  // M47: moe_act recompute without grouped GEMM.
  EXPECT_TRUE(breaks(megatron(with(with(with_moe, "  --moe-grouped-gemm\n", ""), "core_attn mlp", "core_attn moe_act")),
                     "M47"));
  // M50: overlapped expert-parallel communication needs ep > 1, and no full recomputation.
  const std::string ep2 = with(with_moe, "  --bf16\n", "  --bf16\n  --expert-model-parallel-size 2\n");
  EXPECT_TRUE(passes(megatron(with(ep2, "  --bf16\n", "  --bf16\n  --overlap-moe-expert-parallel-comm\n"))));
  EXPECT_TRUE(breaks(megatron(with(with_moe, "  --bf16\n", "  --bf16\n  --overlap-moe-expert-parallel-comm\n")), "M50",
                     "ep > 1"));
  EXPECT_TRUE(breaks(megatron(with(with(ep2, "  --bf16\n", "  --bf16\n  --overlap-moe-expert-parallel-comm\n"),
                                   "core_attn mlp", "core_attn moe")),
                     "M50", "moe recompute module"));
  // M55, M62, M63, M53.
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --bf16\n", "  --bf16\n  --use-flash-attn\n")), "M55"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --bf16\n", "  --bf16\n  --squared-relu\n")), "M62"));
  // M63 on an even split (with the layout, its missing m layers would be M20 first).
  const std::string plain = with(kMegatron, "  --pipeline-model-parallel-layout 'Et*4|(t*4|)*18,t*4L'\n", "");
  EXPECT_TRUE(breaks(megatron(with(plain, "--position-embedding-type rope",
                                   "--position-embedding-type learned_absolute\n  --mtp-num-layers 1")),
                     "M63"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --bf16\n", "  --bf16\n  --mtp-num-layers 1\n")), "M20", "m layers"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --bf16\n", "  --bf16\n  --fp16\n")), "M53"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "--seq-length 8192", "--seq-length 16384")), "M56b"));
}

TEST(FrameworkCheckMegatron, RecomputeRules) {
  // M54: full recomputation needs a method and a layer count; selective forbids them.
  EXPECT_TRUE(breaks(megatron(with(with(kMegatron, "selective", "full"), "  --recompute-modules core_attn mlp\n", "")),
                     "M54", "--recompute-method"));
  EXPECT_TRUE(passes(megatron(with(with(kMegatron, "selective", "full"), "  --recompute-modules core_attn mlp\n",
                                   "  --recompute-method uniform\n  --recompute-num-layers 1\n"))));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "  --bf16\n", "  --bf16\n  --recompute-num-layers 1\n")), "M54"));
  EXPECT_TRUE(breaks(megatron(with(kMegatron, "core_attn mlp", "core_attn mla_up_proj")), "M54", "MLA"));
  // gdp_qkv is a HEAD-only module.
  const std::string head_module = with(kMegatron, "core_attn mlp", "core_attn gdp_qkv");
  EXPECT_TRUE(passes(megatron(head_module)));
  EXPECT_TRUE(breaks(megatron(megatron_v019(head_module), "core_v0.19.0"), "M54", "gdp_qkv"));
}

TEST(FrameworkCheckMegatron, ChecksTheExportCarriesTheConfiguration) {
  json c = kMegatronConfig;
  c["tp"] = 8;
  EXPECT_TRUE(breaks(megatron(kMegatron, "main", c), "consistency", "tp"));
  c = kMegatronConfig;
  c["vpp"] = 1;
  EXPECT_TRUE(breaks(megatron(kMegatron, "main", c), "consistency", "virtual pipeline"));
  c = kMegatronConfig;
  c["zero"] = 2;
  EXPECT_TRUE(breaks(megatron(kMegatron, "main", c), "consistency", "zero 2"));
  c = kMegatronConfig;
  c["global_batch"] = 1024;
  EXPECT_TRUE(breaks(megatron(kMegatron, "main", c), "consistency", "global batch"));
  c = kMegatronConfig;
  c["recompute_modules"] = "core_attn";
  EXPECT_TRUE(breaks(megatron(kMegatron, "main", c), "consistency", "recompute_modules"));
  c = kMegatronConfig;
  c["first_stage_layers"] = 3;
  EXPECT_TRUE(breaks(megatron(kMegatron, "main", c), "consistency", "first pipeline rank"));
  c["first_stage_layers"] = 20;  // 4 virtual stages of 4 plus the first's E t*4 ... = 20 on rank 0
  EXPECT_TRUE(passes(megatron(kMegatron, "main", c)));
}

TEST(FrameworkCheckMegatron, Expressions) {
  const auto freq = cotune::testing::eval_layer_pattern("([0]*3+[1]*29)");
  ASSERT_EQ(freq.size(), 32u);
  EXPECT_EQ(freq[2], 0);
  EXPECT_EQ(freq[3], 1);
  EXPECT_EQ(cotune::testing::eval_layer_pattern("([1]*3+[0])*8").size(), 32u);
  EXPECT_EQ(cotune::testing::eval_layer_pattern("[1, 0]*2"), (std::vector<int64_t>{1, 0, 1, 0}));
  EXPECT_THROW(cotune::testing::eval_layer_pattern("([0]*3"), std::invalid_argument);
  EXPECT_THROW(cotune::testing::eval_layer_pattern("3"), std::invalid_argument);
  const auto stages = cotune::testing::expand_pipeline_layout("Et*2|(t*2|)*38,tL");
  ASSERT_EQ(stages.size(), 40u);
  EXPECT_EQ(stages.front(), "Ett");
  EXPECT_EQ(stages[1], "tt");
  EXPECT_EQ(stages.back(), "tL");
  EXPECT_THROW(cotune::testing::expand_pipeline_layout("Et*2|(t*2"), std::invalid_argument);
  EXPECT_THROW(cotune::testing::expand_pipeline_layout("Ex|L"), std::invalid_argument);
}

// ---- TorchTitan -----------------------------------------------------------------------------------

const std::string kTitan022 = R"(# TorchTitan v0.2.2 (73a0e697) job config for 64 GPUs: torchrun --nnodes 8 --nproc-per-node 8 -m torchtitan.train --job.config_file job.toml
[model]
name = "llama3"
flavor = "8B"
converters = ["quantize.linear.float8"]

[training]
local_batch_size = 8
global_batch_size = 512  # sequences per step
seq_len = 8192

[parallelism]
data_parallel_shard_degree = 4
fsdp_reshard_after_forward = "always"
tensor_parallel_degree = 4
pipeline_parallel_degree = 4
pipeline_parallel_schedule = "Interleaved1F1B"
pipeline_parallel_layers_per_stage = 3
pipeline_parallel_microbatch_size = 1

[activation_checkpoint]
mode = "selective"
selective_ac_option = "op"

[quantize.linear.float8]
enable_fsdp_float8_all_gather = true
precompute_float8_dynamic_scale_for_fsdp = true
)";

const json kTitanConfig = {{"tp", 4},         {"pp", 4},          {"dp", 4},   {"cp", 1},
                           {"ep", 1},         {"micro_batch", 1}, {"vpp", 3},  {"zero", 3},
                           {"recompute", "selective"}, {"sp", true}, {"gpus", 64}, {"global_batch", 512},
                           {"seq_len", 8192}, {"num_layers", 32}};

const std::string kTitan010 = R"(# TorchTitan v0.1.0 (f7084fc7) job config for 64 GPUs
[model]
name = "llama3"
flavor = "8B"
converters = ["float8"]

[training]
local_batch_size = 16
global_batch_size = 512
seq_len = 8192

[parallelism]
data_parallel_shard_degree = 8
fsdp_reshard_after_forward = "always"
tensor_parallel_degree = 4
pipeline_parallel_degree = 2
pipeline_parallel_schedule = "1F1B"
pipeline_parallel_layers_per_stage = 17
pipeline_parallel_microbatch_size = 2

[activation_checkpoint]
mode = "full"

[float8]
enable_fsdp_float8_all_gather = true
)";

const std::string kTitanHead = R"(# TorchTitan main (b5bcd76c): command-line overrides for 64 GPUs (8 nodes of 8)
# torchrun --nnodes 8 --nproc-per-node 8 -m torchtitan.train --module llama3 --config <config function> "${TORCHTITAN_ARGS[@]}"
TORCHTITAN_ARGS=(
  --parallelism.data_parallel_shard_degree 4
  --parallelism.fsdp_reshard_after_forward always
  --parallelism.tensor_parallel_degree 4
  --parallelism.pipeline_parallel_degree 4
  --parallelism.pipeline_parallel_schedule Interleaved1F1B
  --parallelism.pipeline_parallel_layers_per_stage 3
  --parallelism.num_pp_microbatches 8
  --training.num_tokens_per_microbatch_per_dp_rank 8192
  --training.num_tokens_per_train_step 4194304
  --training.max_context_length 8192
  --training.disable_cuda_graphs
  activation_checkpoint:full
)
)";

CheckResult titan(const std::string& text, const std::string& version, const json& config = json()) {
  return check_export(data(), "torchtitan", version, text, config);
}

TEST(FrameworkCheckTorchTitan, AcceptsValidJobsAtEachVersion) {
  EXPECT_TRUE(passes(titan(kTitan022, "v0.2.2")));
  EXPECT_TRUE(passes(titan(kTitan022, "v0.2.2", kTitanConfig)));
  json c010 = kTitanConfig;
  c010["pp"] = 2, c010["dp"] = 8, c010["micro_batch"] = 2, c010["vpp"] = 1, c010["recompute"] = "full";
  EXPECT_TRUE(passes(titan(kTitan010, "v0.1.0", c010)));
  json head = kTitanConfig;
  head["recompute"] = "full";
  EXPECT_TRUE(passes(titan(kTitanHead, "main", head)));
}

TEST(FrameworkCheckTorchTitan, RefusesKeysTablesAndTypesTheVersionDoesNotHave) {
  // [float8] is the v0.1.0 table; v0.2.2 fails loading it.
  EXPECT_TRUE(breaks(titan(with(kTitan022, "[quantize.linear.float8]", "[float8]"), "v0.2.2"), "tt-float8", "[float8]"));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "\"quantize.linear.float8\"]", "\"float8\"]"), "v0.2.2"), "tt-float8"));
  EXPECT_TRUE(breaks(titan(with(kTitan010, "[float8]", "[quantize.linear.float8]"), "v0.1.0"), "key"));
  EXPECT_TRUE(breaks(titan(kTitan010 + "[compile]\nenable = true\n", "v0.1.0"), "key",
                     "compile"));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "seq_len = 8192", "seq_len = 8192\nsequence_length = 8192"), "v0.2.2"), "key",
                     "sequence_length"));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "local_batch_size = 8", "local_batch_size = \"8\""), "v0.2.2"), "type"));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "mode = \"selective\"", "mode = \"sometimes\""), "v0.2.2"), "choices"));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "local_batch_size = 8", "local_batch_size = 8\nlocal_batch_size = 8"), "v0.2.2"),
                     "format"));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "[training]", "[training"), "v0.2.2"), "format"));
  // expert_parallel_degree does not exist at v0.1.0.
  EXPECT_TRUE(breaks(titan(with(kTitan010, "tensor_parallel_degree = 4", "tensor_parallel_degree = 4\nexpert_parallel_degree = 2"),
                           "v0.1.0"),
                     "key"));
}

TEST(FrameworkCheckTorchTitan, MeshAndBatchRules) {
  // With a pipeline, TorchTitan's "default" keeps the gathered weights: that is zero 2, not 3.
  EXPECT_TRUE(breaks(titan(with(kTitan022, "fsdp_reshard_after_forward = \"always\"\n", ""), "v0.2.2", kTitanConfig),
                     "consistency", "fsdp_reshard_after_forward never"));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "data_parallel_shard_degree = 4", "data_parallel_shard_degree = 8"), "v0.2.2"),
                     "tt-world"));
  EXPECT_TRUE(passes(titan(with(kTitan022, "data_parallel_shard_degree = 4", "data_parallel_shard_degree = -1"), "v0.2.2")));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "tensor_parallel_degree = 4", "tensor_parallel_degree = -1"), "v0.2.2"),
                     "tt-degree"));
  // Pure DDP with tensor parallelism.
  EXPECT_TRUE(breaks(titan(with(kTitan022, "data_parallel_shard_degree = 4",
                                "data_parallel_shard_degree = 1\ndata_parallel_replicate_degree = 4"),
                           "v0.2.2"),
                     "tt-ddp"));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "global_batch_size = 512", "global_batch_size = 500"), "v0.2.2"), "tt-batch"));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "pipeline_parallel_microbatch_size = 1", "pipeline_parallel_microbatch_size = 3"),
                           "v0.2.2"),
                     "tt-pp-microbatch"));
  // v0.2.2: seq_len divisible by 2 x tp x cp.
  EXPECT_TRUE(breaks(titan(with(kTitan022, "seq_len = 8192", "seq_len = 8196"), "v0.2.2"), "tt-seq-len"));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "mode = \"selective\"", "mode = \"memory_budget\""), "v0.2.2"),
                     "tt-memory-budget"));
  EXPECT_TRUE(breaks(titan(with(kTitan022, "enable_fsdp_float8_all_gather = true", "recipe_name = \"rowwise\"\n"
                                                                                  "enable_fsdp_float8_all_gather = true"),
                           "v0.2.2"),
                     "tt-float8"));
}

TEST(FrameworkCheckTorchTitan, LayersPerStage) {
  const json n32 = {{"num_layers", 32}};
  // v0.2.2: ceil(34 / 4) = 9 stages, not a multiple of pp 4.
  EXPECT_TRUE(breaks(titan(with(kTitan022, "layers_per_stage = 3", "layers_per_stage = 4"), "v0.2.2", n32),
                     "tt-pp-stages", "9 stages"));
  // ceil(34 / 9) = 4 stages: one per rank, too few for Interleaved1F1B; fine for 1F1B.
  const std::string nine = with(kTitan022, "layers_per_stage = 3", "layers_per_stage = 9");
  EXPECT_TRUE(breaks(titan(nine, "v0.2.2", n32), "tt-pp-stages", "Interleaved1F1B"));
  EXPECT_TRUE(passes(titan(with(nine, "\"Interleaved1F1B\"", "\"1F1B\""), "v0.2.2", n32)));
  // v0.1.0 wants an exact fit: 34 layers over pp 2 are 17 per rank, not a multiple of 3.
  EXPECT_TRUE(breaks(titan(with(kTitan010, "layers_per_stage = 17", "layers_per_stage = 3"), "v0.1.0", n32),
                     "tt-pp-stages", "exactly"));
  EXPECT_TRUE(breaks(titan(with(kTitan010, "\"1F1B\"", "\"Sometimes1F1B\""), "v0.1.0", n32), "tt-schedule"));
  // Stages against the configuration's vpp.
  json c = kTitanConfig;
  c["vpp"] = 2;
  EXPECT_TRUE(breaks(titan(kTitan022, "v0.2.2", c), "consistency", "pp x vpp"));
}

TEST(FrameworkCheckTorchTitan, HeadCommandLine) {
  EXPECT_TRUE(breaks(titan(with(kTitanHead, "  --training.disable_cuda_graphs\n", ""), "main"), "tt-cuda-graphs"));
  EXPECT_TRUE(breaks(titan(with(kTitanHead, "--training.disable_cuda_graphs", "--training.disable_cuda_graphs true"), "main"),
                     "arity"));
  EXPECT_TRUE(breaks(titan(with(kTitanHead, "  activation_checkpoint:full\n", "  --model_spec llama3\n"), "main"), "tt-cli"));
  EXPECT_TRUE(breaks(titan(with(kTitanHead, "activation_checkpoint:full", "activation_checkpoint:some"), "main"),
                     "tt-variant"));
  EXPECT_TRUE(breaks(titan(with(kTitanHead, "--training.max_context_length", "--training.seq_len"), "main"), "key"));
  EXPECT_TRUE(breaks(titan(with(kTitanHead, "activation_checkpoint:full\n",
                                "activation_checkpoint:full\n  --activation_checkpoint.memory_budget 0.5\n"),
                           "main"),
                     "key", "variant full"));
  EXPECT_TRUE(passes(titan(with(kTitanHead, "activation_checkpoint:full\n",
                                "activation_checkpoint:memory-budget\n  --activation_checkpoint.memory_budget 0.5\n"
                                "  --compile.enable\n"),
                           "main")));
  EXPECT_TRUE(breaks(titan(with(kTitanHead, "activation_checkpoint:full", "activation_checkpoint:memory-budget"), "main"),
                     "tt-memory-budget"));
  EXPECT_TRUE(breaks(titan(with(kTitanHead, "num_tokens_per_train_step 4194304", "num_tokens_per_train_step 4194000"),
                           "main"),
                     "tt-tokens"));
  // The configuration: 2 sequences per micro-batch are 16384 tokens, not 8192.
  json c = kTitanConfig;
  c["micro_batch"] = 2;
  c["recompute"] = "full";
  EXPECT_TRUE(breaks(titan(kTitanHead, "main", c), "consistency", "tokens per micro-batch"));
}

// ---- Megatron-Bridge (NeMo) -----------------------------------------------------------------------

const std::string kNemo = R"(# Megatron-Bridge main (067f987d): recipe overrides for 64 GPUs (8 nodes of 8)
# cfg = apply_cotune(llama3_70b_pretrain_config())
def apply_cotune(cfg):
    cfg.model.tensor_model_parallel_size = 4
    cfg.model.pipeline_model_parallel_size = 4
    cfg.model.virtual_pipeline_model_parallel_size = 5
    cfg.model.context_parallel_size = 1
    cfg.model.expert_model_parallel_size = 1
    cfg.model.sequence_parallel = True
    cfg.model.recompute_granularity = "selective"
    cfg.model.recompute_modules = ["core_attn", "mlp"]
    cfg.model.seq_length = 8192
    cfg.dataset.seq_length = 8192
    cfg.train.micro_batch_size = 1
    cfg.train.global_batch_size = 512
    cfg.ddp.use_distributed_optimizer = True
    cfg.optimizer.use_distributed_optimizer = True
    cfg.mixed_precision = "bf16_with_fp8_current_scaling_mixed"
    return cfg
)";

CheckResult nemo(const std::string& text, const json& config = json()) {
  return check_export(data(), "nemo", "main", text, config);
}

TEST(FrameworkCheckNemo, AcceptsAValidRecipeOverride) {
  EXPECT_TRUE(passes(nemo(kNemo)));
  EXPECT_TRUE(passes(nemo(kNemo, kMegatronConfig)));
  // The md's shorthand rows expand to both fields.
  EXPECT_TRUE(passes(nemo(with(kNemo, "    return cfg", "    cfg.model.num_layers_in_last_pipeline_stage = 20\n"
                                                       "    cfg.ddp.overlap_param_gather = True\n    return cfg"))));
}

TEST(FrameworkCheckNemo, RefusesUnknownFieldsValuesAndSyntax) {
  EXPECT_TRUE(breaks(nemo(with(kNemo, "cfg.model.tensor_model_parallel_size", "cfg.model.tensor_parallel_size")), "field"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "bf16_with_fp8_current_scaling_mixed", "fp8_mixed")), "choices", "bf16_mixed"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "sequence_parallel = True", "sequence_parallel = true")), "format"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "sequence_parallel = True", "sequence_parallel = 1")), "type"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "\"selective\"", "\"partial\"")), "choices"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "    return cfg\n", "")), "format"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "    cfg.model.seq_length", "  cfg.model.seq_length")), "format"));
}

TEST(FrameworkCheckNemo, MegatronCoreRules) {
  EXPECT_TRUE(breaks(nemo(with(kNemo, "tensor_model_parallel_size = 4", "tensor_model_parallel_size = 1")), "M08b"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "global_batch_size = 512", "global_batch_size = 510")), "M33"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "pipeline_model_parallel_size = 4", "pipeline_model_parallel_size = 1")), "M16b"));
  EXPECT_TRUE(breaks(nemo(with(with(kNemo, "\"selective\"", "\"full\""), "    cfg.model.recompute_modules = [\"core_attn\", \"mlp\"]\n", "")),
                     "M54"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "[\"core_attn\", \"mlp\"]", "[\"core_attn\", \"attention\"]")), "M54"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "context_parallel_size = 1", "context_parallel_size = 2\n    cfg.model.seq_length = 8190")),
                     "duplicate"));
  EXPECT_TRUE(breaks(nemo(with(with(kNemo, "context_parallel_size = 1", "context_parallel_size = 2"), "seq_length = 8192\n    cfg.dataset",
                               "seq_length = 8190\n    cfg.dataset")),
                     "M37"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "cfg.optimizer.use_distributed_optimizer = True",
                               "cfg.optimizer.use_distributed_optimizer = False")),
                     "nemo-dist-opt"));
  // zero 0 in a recipe that keeps overlap_param_gather on: M26.
  EXPECT_TRUE(breaks(nemo(with(with(kNemo, "cfg.optimizer.use_distributed_optimizer = True", "cfg.optimizer.use_distributed_optimizer = False"),
                               "cfg.ddp.use_distributed_optimizer = True", "cfg.ddp.use_distributed_optimizer = False")),
                     "M26"));
}

TEST(FrameworkCheckNemo, ChecksTheExportCarriesTheConfiguration) {
  json c = kMegatronConfig;
  c["zero"] = 0;
  EXPECT_TRUE(breaks(nemo(kNemo, c), "consistency", "zero 0"));
  c = kMegatronConfig;
  c["vpp"] = 1;
  EXPECT_TRUE(breaks(nemo(kNemo, c), "consistency", "virtual_pipeline"));
  EXPECT_TRUE(breaks(nemo(with(kNemo, "    cfg.model.context_parallel_size = 1\n", ""), kMegatronConfig), "consistency",
                     "context_parallel_size is not set"));
}

// ---- DeepSpeed ------------------------------------------------------------------------------------

const json kDeepSpeed = json::parse(R"({
  "train_batch_size": 512, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
  "zero_optimization": {"stage": 3, "overlap_comm": true, "stage3_prefetch_bucket_size": 50000000},
  "bf16": {"enabled": true}, "gradient_clipping": 1.0, "tensor_parallel": {"autotp_size": 2}})");

const json kDeepSpeedConfig = {{"tp", 2},         {"pp", 1},   {"dp", 64},   {"cp", 1},     {"ep", 1},
                               {"micro_batch", 2}, {"zero", 3}, {"gpus", 128}, {"global_batch", 512}};

CheckResult deepspeed(const json& ds, const std::string& version = "v0.19.5", const json& config = kDeepSpeedConfig) {
  return check_export(data(), "deepspeed", version, ds.dump(2), config);
}

TEST(FrameworkCheckDeepSpeed, AcceptsAValidConfig) {
  EXPECT_TRUE(passes(deepspeed(kDeepSpeed)));
  EXPECT_TRUE(passes(deepspeed(kDeepSpeed, "master")));
  EXPECT_TRUE(passes(deepspeed(kDeepSpeed, "v0.19.5", json())));
  // A derived accumulation count: 512 / 2 / 64 = 4.
  json derived = kDeepSpeed;
  derived.erase("gradient_accumulation_steps");
  EXPECT_TRUE(passes(deepspeed(derived)));
}

TEST(FrameworkCheckDeepSpeed, RefusesKeysTypesAndValues) {
  json ds = kDeepSpeed;
  ds["zero_optimization"]["stage4_prefetch"] = 1;
  EXPECT_TRUE(breaks(deepspeed(ds), "key", "zero_optimization.stage4_prefetch"));
  ds = kDeepSpeed;
  ds["train_batch"] = 512;
  EXPECT_TRUE(breaks(deepspeed(ds), "key"));
  ds = kDeepSpeed;
  ds["zero_optimization"]["stage"] = "3";
  EXPECT_TRUE(breaks(deepspeed(ds), "type"));
  ds["zero_optimization"]["stage"] = 4;
  EXPECT_TRUE(breaks(deepspeed(ds), "choices"));
  ds = kDeepSpeed;
  ds["communication_data_type"] = "fp8";
  EXPECT_TRUE(breaks(deepspeed(ds), "choices"));
  // gradient_allreduce_op exists only at master, and "sum" is refused with stage 3.
  ds = kDeepSpeed;
  ds["gradient_allreduce_op"] = "mean";
  EXPECT_TRUE(breaks(deepspeed(ds), "key", "master"));
  EXPECT_TRUE(passes(deepspeed(ds, "master")));
  ds["gradient_allreduce_op"] = "sum";
  EXPECT_TRUE(breaks(deepspeed(ds, "master"), "ds-allreduce-op"));
}

TEST(FrameworkCheckDeepSpeed, BatchZeroAndPrecisionRules) {
  json ds = kDeepSpeed;
  ds["train_batch_size"] = 500;
  EXPECT_TRUE(breaks(deepspeed(ds), "ds-batch"));
  ds = kDeepSpeed;
  ds["gradient_accumulation_steps"] = 2;
  EXPECT_TRUE(breaks(deepspeed(ds), "ds-batch", "512"));
  // ZeRO 2 with the pipeline engine (pp 2: dp 64, 2 x 4 x 64 = 512).
  ds = kDeepSpeed;
  ds.erase("tensor_parallel");
  ds["zero_optimization"]["stage"] = 2;
  json pipeline = kDeepSpeedConfig;
  pipeline["tp"] = 1, pipeline["pp"] = 2, pipeline["zero"] = 2;
  EXPECT_TRUE(breaks(deepspeed(ds, "v0.19.5", pipeline), "ds-pipeline"));
  ds["zero_optimization"]["stage"] = 1;
  pipeline["zero"] = 1;
  // The pipeline is the script's PipelineModule: the export says how many stages.
  EXPECT_TRUE(breaks(deepspeed(ds, "v0.19.5", pipeline), "consistency", "cotune.pipeline_stages"));
  ds["cotune"] = {{"pipeline_stages", 2}};
  EXPECT_TRUE(passes(deepspeed(ds, "v0.19.5", pipeline)));
  ds = kDeepSpeed;
  ds["fp16"] = {{"enabled", true}};
  EXPECT_TRUE(breaks(deepspeed(ds), "ds-precision"));
  // One model-parallel dimension at a time.
  json both = kDeepSpeedConfig;
  both["cp"] = 2, both["dp"] = 32;
  EXPECT_TRUE(breaks(deepspeed(kDeepSpeed, "v0.19.5", both), "ds-layout"));
  json consistency = kDeepSpeedConfig;
  consistency["zero"] = 1;
  EXPECT_TRUE(breaks(deepspeed(kDeepSpeed, "v0.19.5", consistency), "consistency", "zero_optimization.stage"));
}

// ---- TorchRec -------------------------------------------------------------------------------------

const std::string kPlan = R"({"plan": {"model.sparse_arch.embedding_bag_collection": {
  "t_cat_0": {"sharding_type": "row_wise", "compute_kernel": "fused_uvm_caching", "ranks": [0, 1, 2, 3],
              "shards": [{"shard_offsets": [0, 0], "shard_sizes": [3, 128], "placement": "rank:0/cuda:0"},
                         {"shard_offsets": [3, 0], "shard_sizes": [3, 128], "placement": "rank:1/cuda:1"},
                         {"shard_offsets": [6, 0], "shard_sizes": [3, 128], "placement": "rank:2/cuda:0"},
                         {"shard_offsets": [9, 0], "shard_sizes": [1, 128], "placement": "rank:3/cuda:1"}]},
  "t_cat_1": {"sharding_type": "table_wise", "compute_kernel": "fused_uvm_caching", "ranks": [2],
              "shards": [{"shard_offsets": [0, 0], "shard_sizes": [1000, 64], "placement": "rank:2/cuda:0"}]},
  "t_cat_2": {"sharding_type": "column_wise", "compute_kernel": "fused_uvm_caching", "ranks": [1, 3],
              "shards": [{"shard_offsets": [0, 0], "shard_sizes": [500, 128], "placement": "rank:1/cuda:1"},
                         {"shard_offsets": [0, 128], "shard_sizes": [500, 128], "placement": "rank:3/cuda:1"}]},
  "t_dense": {"sharding_type": "data_parallel", "compute_kernel": "dense", "ranks": [0, 1, 2, 3]}}},
 "fused_params": {"cache_load_factor": 0.2},
 "world_size": 4, "local_world_size": 2})";

CheckResult torchrec(const std::string& text, const json& config = json()) {
  return check_export(data(), "torchrec", "main", text, config);
}

TEST(FrameworkCheckTorchRec, AcceptsAValidPlan) {
  EXPECT_TRUE(passes(torchrec(kPlan)));
  EXPECT_TRUE(passes(torchrec(kPlan, {{"gpus", 4}, {"offload", true}, {"cache_percent", 20}})));
}

TEST(FrameworkCheckTorchRec, RefusesBrokenPlans) {
  EXPECT_TRUE(breaks(torchrec(with(kPlan, "\"shard_offsets\": [3, 0]", "\"shard_offsets\": [3.0, 0]")), "tr-integer"));
  EXPECT_TRUE(breaks(torchrec(with(kPlan, "\"world_size\": 4", "\"world_size\": 4.0")), "tr-integer"));
  EXPECT_TRUE(breaks(torchrec(with(kPlan, "\"compute_kernel\": \"dense\"", "\"compute_kernel\": \"fused\"")), "tr-kernel",
                     "dense"));
  EXPECT_TRUE(breaks(torchrec(with(kPlan, "\"table_wise\", \"compute_kernel\": \"fused_uvm_caching\"",
                                   "\"table_wise\", \"compute_kernel\": \"dense\"")),
                     "tr-kernel"));
  EXPECT_TRUE(breaks(torchrec(with(kPlan, "\"shard_offsets\": [0, 128]", "\"shard_offsets\": [0, 100]")), "tr-overlap"));
  EXPECT_TRUE(breaks(torchrec(with(kPlan, "\"shard_offsets\": [0, 128]", "\"shard_offsets\": [0, 200]")), "tr-cover"));
  EXPECT_TRUE(breaks(torchrec(with(kPlan, "rank:3/cuda:1\"}]},\n  \"t_cat_1", "rank:3/cuda:3\"}]},\n  \"t_cat_1")),
                     "tr-placement"));
  EXPECT_TRUE(breaks(torchrec(with(kPlan, "\"ranks\": [2]", "\"ranks\": [4]")), "tr-rank"));
  // Row-wise blocks are ceil(10 / 4) = 3 rows: 3, 3, 3, 1 and not 4, 2, 2, 2.
  EXPECT_TRUE(breaks(torchrec(with(with(kPlan, "\"shard_sizes\": [3, 128], \"placement\": \"rank:0",
                                        "\"shard_sizes\": [4, 128], \"placement\": \"rank:0"),
                                   "[3, 0], \"shard_sizes\": [3, 128]", "[4, 0], \"shard_sizes\": [2, 128]")),
                     "tr-row-wise"));
  EXPECT_TRUE(breaks(torchrec(with(kPlan, "\"ranks\": [0, 1, 2, 3]}}}",
                                   "\"ranks\": [0, 1, 2, 3], \"shards\": []}}}")),
                     "tr-structure"));
  EXPECT_TRUE(breaks(torchrec(with(kPlan, "\"compute_kernel\": \"dense\"", "\"compute_kernel\": \"dense\", \"cache_load_factor\": 0.2")),
                     "tr-cache"));
  EXPECT_TRUE(breaks(torchrec(with(kPlan, "\"world_size\": 4", "\"batch_per_gpu\": 512, \"world_size\": 4")),
                     "tr-structure", "batch_per_gpu"));
  // cache_load_factor with no fused_uvm_caching table.
  std::string fused = kPlan;
  for (size_t at; (at = fused.find("fused_uvm_caching")) != std::string::npos;) fused.replace(at, 17, "fused");
  EXPECT_TRUE(breaks(torchrec(fused), "tr-cache"));
  EXPECT_TRUE(breaks(torchrec(kPlan, {{"gpus", 8}}), "consistency", "world_size"));
  EXPECT_TRUE(breaks(torchrec(kPlan, {{"gpus", 4}, {"offload", false}}), "consistency", "offload"));
}

TEST(FrameworkCheck, RefusesUnknownTargets) {
  EXPECT_TRUE(breaks(check_export(data(), "megatron", "core_v0.18.0", kMegatron), "target"));
  EXPECT_TRUE(breaks(check_export(data(), "colossalai", "main", kMegatron), "target"));
}

}  // namespace
