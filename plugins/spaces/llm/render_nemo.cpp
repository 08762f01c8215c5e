// Megatron-Bridge (NeMo) recipe overrides (docs/exports.md, nemo_recipe_fields.md): a Python
// function that sets the layout cotune chose on the ConfigContainer a recipe returns.
#include <string>
#include <vector>

#include "pipeline.hpp"
#include "render.hpp"

namespace cotune_llm {
namespace {

using render_detail::num;

std::string py_bool(bool b) { return b ? "True" : "False"; }
std::string py_str(const std::string& s) { return "\"" + s + "\""; }

// The mixed-precision preset of the training's GEMM precision (mixed_precision.py).
std::string precision_preset(const Workload& w, const cotune_hardware& hw) {
  switch (w.training.dtype) {
    case COTUNE_DTYPE_FP8:
      switch (fp8_recipe_on(w.training, hw)) {
        case Fp8Recipe::kMxfp8: return "bf16_with_mxfp8_mixed";
        case Fp8Recipe::kBlockwise: return "bf16_with_fp8_subchannel_scaling_mixed";
        default: return "bf16_with_fp8_current_scaling_mixed";
      }
    case COTUNE_DTYPE_FP4: return "bf16_with_nvfp4_mixed";
    default: return "bf16_mixed";
  }
}

std::string modules_list(uint32_t mask) {
  std::string text = recompute_modules_text(mask), out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string one = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    out += (out.empty() ? "" : ", ") + py_str(one);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return "[" + out + "]";
}

// A Megatron-Bridge recipe (at the pinned commit, nemo_recipe_parallelism.csv) that builds each
// preset's model; the overrides then replace its layout.
const char* recipe_of(const std::string& preset) {
  static const std::pair<const char*, const char*> kRecipes[] = {
      {"llama2-7b", "llama2_7b_pretrain_2gpu_h100_bf16_config"},
      {"llama3-8b", "llama3_8b_pretrain_2gpu_h100_bf16_config"},
      {"llama3-70b", "llama3_70b_pretrain_32gpu_h100_bf16_config"},
      {"llama3.1-8b", "llama31_8b_pretrain_2gpu_h100_bf16_config"},
      {"llama3.1-70b", "llama31_70b_pretrain_32gpu_h100_bf16_config"},
      {"llama3.1-405b", "llama31_405b_pretrain_256gpu_h100_bf16_config"},
      {"qwen3-30b-a3b", "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config"},
      {"qwen3-235b-a22b", "qwen3_235b_a22b_pretrain_256gpu_h100_bf16_config"},
      {"deepseek-v3", "deepseek_v3_pretrain_1024gpu_h100_bf16_config"},
      {"gpt-oss-120b", "gpt_oss_120b_pretrain_64gpu_h100_bf16_config"}};
  for (const auto& [name, recipe] : kRecipes)
    if (preset == name) return recipe;
  return nullptr;
}

}  // namespace

std::string render_nemo(const Workload& w, const Config& c, const Target& t, const cotune_hardware& hw) {
  const Model& m = w.model;
  std::vector<std::pair<std::string, std::string>> set;
  auto field = [&set](const std::string& path, const std::string& value) { set.emplace_back(path, value); };

  field("model.tensor_model_parallel_size", num(c.tp));
  field("model.pipeline_model_parallel_size", num(c.pp));
  field("model.virtual_pipeline_model_parallel_size", c.vpp > 1 ? num(c.vpp) : "None");
  field("model.context_parallel_size", num(c.cp));
  field("model.sequence_parallel", py_bool(c.sp && c.tp > 1));
  // Tensor-parallel overlap is a CommOverlapConfig, which Bridge drops without TP and sequence
  // parallelism; set either way there, so that a recipe's own does not stay in force.
  const bool tp_overlap_possible = c.sp && c.tp > 1;
  if (tp_overlap_possible)
    field("comm_overlap", "CommOverlapConfig(tp_comm_overlap=" + py_bool(w.training.tp_comm_overlap) + ")");
  if (m.moe()) {
    field("model.expert_model_parallel_size", num(c.ep));
    field("model.expert_tensor_parallel_size", num(c.etp));
    const bool flex = w.training.moe_dispatcher == MoeDispatcher::kFlex;
    field("model.moe_token_dispatcher_type", py_str(flex ? "flex" : "alltoall"));
    if (flex) field("model.moe_flex_dispatcher_backend", py_str("deepep"));
    // A ModelParallelConfig field of Megatron-Core, which the model config inherits.
    if (w.training.overlap_moe_comm && c.ep > 1) field("model.overlap_moe_expert_parallel_comm", py_bool(true));
  }
  // The pipeline split by the rule the space modelled; the others reset so a recipe's own does not
  // stay in force.
  PipelineSplit split;
  split_layers(m.layers, c.pp, c.vpp, c.first_stage, c.last_stage, &split, m.mtp_layers);
  const bool explicit_split = split.rule == SplitRule::kExplicit;
  field("model.num_layers_in_first_pipeline_stage", explicit_split ? num(split.first_stage) : "None");
  field("model.num_layers_in_last_pipeline_stage", explicit_split ? num(split.last_stage) : "None");
  field("model.account_for_embedding_in_pipeline_split", py_bool(split.rule == SplitRule::kAccountEmbedding));
  field("model.account_for_loss_in_pipeline_split",
        py_bool(split.rule == SplitRule::kAccountEmbedding || split.rule == SplitRule::kAccountLoss));
  field("model.pipeline_model_parallel_layout",
        split.rule == SplitRule::kLayout ? py_str(layout_string(split, m.mtp_layers)) : "None");

  const bool selective = c.recompute == kRecomputeSelective, full = c.recompute == kRecomputeFull;
  field("model.recompute_granularity", selective ? py_str("selective") : full ? py_str("full") : "None");
  field("model.recompute_method", full ? py_str("uniform") : "None");
  field("model.recompute_num_layers", full ? "1" : "None");
  field("model.recompute_modules", selective ? modules_list(c.recompute_modules) : "None");
  field("model.seq_length", num(m.seq_len));
  field("dataset.seq_length", num(m.seq_len));

  field("train.micro_batch_size", num(c.micro_batch));
  field("train.global_batch_size", num(w.training.global_batch));

  // zero 1: the distributed optimizer (optimizer state only); zero 2/3: Megatron-FSDP, which forces
  // the distributed optimizer on (v1).
  const bool fsdp = c.zero >= 2;
  field("ddp.use_distributed_optimizer", py_bool(c.zero >= 1));
  field("optimizer.use_distributed_optimizer", py_bool(c.zero >= 1));
  field("ddp.use_megatron_fsdp", py_bool(fsdp));
  if (fsdp) field("ddp.data_parallel_sharding_strategy", py_str(c.zero == 2 ? "optim_grads" : "optim_grads_params"));
  // Overlapping the gradient reduction needs no distributed optimizer (as --overlap-grad-reduce on
  // Megatron-LM's command line); gathering the parameters does (M26).
  field("ddp.overlap_grad_reduce", py_bool(w.training.overlap_grad_reduce));
  field("ddp.overlap_param_gather", py_bool(w.training.overlap_grad_reduce && c.zero >= 1));
  // The preset's grad_reduce_in_fp32 (True) overrides the ddp config's, so bf16 gradient buffers
  // are set on the preset's object, as Megatron-Bridge's perf recipes do.
  const bool bf16_grads = w.training.grad_reduce == GradReduce::kBf16;
  if (bf16_grads) {
    field("mixed_precision", "get_mixed_precision_config(" + py_str(precision_preset(w, hw)) + ")");
    field("mixed_precision.grad_reduce_in_fp32", py_bool(false));
  } else {
    field("mixed_precision", py_str(precision_preset(w, hw)));
  }

  double nodes = 1, per_node = 1;
  std::string out = "# " + t.label() + ": recipe overrides for " + render_detail::world(c, hw, &nodes, &per_node) + "\n";
  const char* recipe = w.training.lora ? nullptr : recipe_of(m.name);
  out += "# cfg = apply_cotune(" +
         (recipe ? std::string(recipe) : "<your model's " + std::string(w.training.lora ? "_peft_" : "_pretrain_") + " recipe>") +
         "()); the model cotune modelled: " + num(m.layers) + " layers, hidden " + num(m.hidden) + "\n";
  // NVIDIA's perf recipes for other GPUs and precisions derive from the same base (their
  // base_chain in nemo_recipe_parallelism.csv): the base builds the model, the overrides the rest.
  if (recipe)
    out += "# (the base recipe builds the model; apply_cotune below sets the layout, precision and sizes for this "
           "GPU, whatever GPU the recipe's name says)\n";
  if (tp_overlap_possible) out += "from megatron.bridge.training.comm_overlap import CommOverlapConfig\n";
  if (bf16_grads) out += "from megatron.bridge.training.mixed_precision import get_mixed_precision_config\n";
  if (tp_overlap_possible || bf16_grads) out += "\n";
  out += "def apply_cotune(cfg):\n";
  for (const auto& [path, value] : set) out += "    cfg." + path + " = " + value + "\n";
  return out + "    return cfg\n";
}

}  // namespace cotune_llm
