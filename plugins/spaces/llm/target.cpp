// Launch targets and their rules (see target.hpp).
#include "target.hpp"

#include <cotune/cotune.hpp>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <vector>

#include "pipeline.hpp"

namespace cotune_llm {
namespace {

struct FrameworkInfo {
  Framework framework;
  const char* word;   // in "word@version"
  const char* label;  // in messages
  std::vector<FrameworkVersion> versions;  // newest first
};

const std::vector<FrameworkInfo>& frameworks() {
  static const std::vector<FrameworkInfo> list = {
      {Framework::kMegatron,
       "megatron",
       "Megatron-LM",
       {{"main", "d98e8a64ddf34856e74b24714e3bedb2f5a39553"}, {"core_v0.19.0", "5be9626709af2722333bf54797c954c09edeada3"}}},
      {Framework::kTorchtitan,
       "torchtitan",
       "TorchTitan",
       {{"main", "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a"},
        {"v0.2.2", "73a0e6979dd10b6b1904098eb3c8f62c18ab87ce"},
        {"v0.1.0", "f7084fc78567f865d0c411f2c7b9bbbef6b155ac"}}},
      {Framework::kNemo, "nemo", "Megatron-Bridge", {{"main", "067f987df03b8355b03192d88d70f1709fedf51a"}}},
      {Framework::kDeepspeed,
       "deepspeed",
       "DeepSpeed",
       {{"master", "edaa7221267243c7be7fb49c5d5f5c4fb97b4641"}, {"v0.19.5", "cf44300453eb0af79ed84ed8f1cb49d57478bd76"}}},
  };
  return list;
}

const FrameworkInfo& info(Framework f) {
  for (const FrameworkInfo& i : frameworks())
    if (i.framework == f) return i;
  return frameworks().front();
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

bool divides(double a, double b) { return a >= 1 && std::fmod(b, a) == 0; }

[[noreturn]] void unknown_target(std::string_view text) {
  std::string known;
  for (const FrameworkInfo& f : frameworks()) {
    known += known.empty() ? "" : "; ";
    known += f.word;
    known += " (";
    for (size_t i = 0; i < f.versions.size(); ++i) known += std::string(i ? ", " : "") + f.versions[i].name;
    known += ")";
  }
  const std::string word = lower(text.substr(0, text.find('@')));
  const std::string what = word == "torchrec" ? "TorchRec plans are the recsys space's; the llm space launches with "
                                              : "the llm space knows ";
  throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT,
                      "unknown launch target '" + std::string(text) + "' (" + what + known +
                          "; a version may also be HEAD or a commit prefix of 7+ characters; json needs no target)");
}

// Writes "<label>: <rule>" into *why and returns false.
bool refuse(const Target& t, std::string* why, const std::string& rule) {
  if (why != nullptr) *why = t.label() + " refuses it: " + rule;
  return false;
}

bool megatron_core_allows(const Workload& w, const Config& c, const Target& t, std::string* why) {
  // Every Megatron-FSDP recipe in Megatron-Bridge runs pp 1 (nemo_recipe_parallelism.csv); Megatron-FSDP
  // shards whole model chunks, and its v2 rejects multiple chunks outright.
  if (c.zero >= 2 && c.pp > 1)
    return why ? refuse(t, why, "zero " + num(c.zero) + " is Megatron-FSDP, which runs without pipeline parallelism (pp " +
                                    num(c.pp) + ")")
               : false;
  if (t.framework == Framework::kNemo && w.training.dtype == COTUNE_DTYPE_FP16)
    return why ? refuse(t, why, "fp16: Megatron-Bridge's mixed-precision presets are bf16-based") : false;
  return true;
}

bool torchtitan_allows(const Workload& w, const Config& c, const Target& t, std::string* why) {
  const Model& m = w.model;
  // cotune shards weights over dp x cp ranks, as TorchTitan's FSDP does (dp_shard x cp; at main with
  // spmd_backend partial_dtensor, which the export sets: torchtitan_rules.md section 2).
  const bool head = !t.is(Framework::kTorchtitan, "v0.1.0") && !t.is(Framework::kTorchtitan, "v0.2.2");
  if (c.zero == 1 && c.dp * c.cp > 1)
    return why ? refuse(t, why, "zero 1: TorchTitan has no optimizer-only sharding (zero 2 is FSDP without resharding, "
                                "zero 3 FSDP, zero 0 DDP)")
               : false;
  if (c.zero == 0 && c.dp > 1 && (c.tp > 1 || c.pp > 1 || c.cp > 1 || c.ep > 1))
    return why ? refuse(t, why, "zero 0 is DDP, which TorchTitan does not combine with other parallelism "
                                "(\"DDP has not supported > 1D parallelism\")")
               : false;
  if (c.zero == 0 && c.cp > 1 && !head)
    return why ? refuse(t, why, "zero 0 with cp > 1: TorchTitan shards the weights over dp_shard x cp, so context-parallel "
                                "ranks never keep whole weights (use zero 2 or 3)")
               : false;
  if (w.training.dtype == COTUNE_DTYPE_FP4) return why ? refuse(t, why, "TorchTitan has no FP4 training") : false;
  if (w.training.dtype == COTUNE_DTYPE_FP16)
    return why ? refuse(t, why, "fp16: mixed_precision_param is bfloat16 or float32") : false;
  if (c.first_stage > 0 || c.last_stage > 0)
    return why ? refuse(t, why, "first_stage_layers/last_stage_layers: TorchTitan splits the pipeline by its own rule")
               : false;
  if (c.recompute == kRecomputeSelective && c.recompute_modules != kCoreAttn)
    return why ? refuse(t, why, "recompute_modules: TorchTitan's selective checkpointing is per operator, not per module")
               : false;
  if (w.training.attention != Attention::kFlash)
    return why ? refuse(t, why, "attention unfused: TorchTitan runs attention through SDPA or flex attention") : false;
  if (c.vpp > 1 && c.pp == 1) return why ? refuse(t, why, "vpp > 1 needs pp > 1") : false;
  if (c.pp > 1 && torchtitan_layers_per_stage(m.layers, c.pp, c.vpp, t) < 0)
    return why ? refuse(t, why, "no pipeline_parallel_layers_per_stage gives " + num(c.pp * c.vpp) + " stages of " +
                                    num(m.layers) + " layers with the embedding and output counted as layers")
               : false;
  const bool v010 = t.is(Framework::kTorchtitan, "v0.1.0"), v022 = t.is(Framework::kTorchtitan, "v0.2.2");
  if (c.tp > 1 && !c.sp)
    return why ? refuse(t, why, "sp false with tp > 1: TorchTitan applies sequence parallelism with TP") : false;
  if (v010 && c.ep > 1) return why ? refuse(t, why, "ep > 1: TorchTitan v0.1.0 has no expert parallelism") : false;
  if (m.moe() && c.ep > 1) {
    if (v022 && c.etp != 1 && c.etp != c.tp)
      return why ? refuse(t, why, "etp must be 1 or tp with ep > 1 (parallel_dims.py)") : false;
    if (!v022 && c.etp != 1)
      return why ? refuse(t, why, "etp must be 1: TorchTitan main shards experts over ep and FSDP only") : false;
    if (v022 && w.training.moe_dispatcher == MoeDispatcher::kFlex && c.etp != 1)
      return why ? refuse(t, why, "etp must be 1 with the deepep backend (moe_dispatcher flex; llama4 parallelize.py)")
                 : false;
    if (!divides(c.ep, c.dp * c.cp * c.tp))
      return why ? refuse(t, why, "ep (" + num(c.ep) + ") must divide dp*cp*tp (" + num(c.dp * c.cp * c.tp) + ")")
                 : false;
  }
  if (v022 && !divides(2 * c.tp * c.cp, m.seq_len))
    return why ? refuse(t, why, "seq_len (" + num(m.seq_len) + ") must be divisible by 2*tp*cp (" +
                                    num(2 * c.tp * c.cp) + ")")
               : false;
  if (!v010 && !v022) {
    const double tokens = c.micro_batch * m.seq_len;
    const double unit = (c.sp && c.tp > 1 ? c.tp : 1) * (c.cp > 1 ? 2 * c.cp : 1);
    if (!divides(unit, tokens))
      return why ? refuse(t, why, "num_tokens_per_microbatch_per_dp_rank (" + num(tokens) + ") must be divisible by " +
                                      num(unit) + " (tp with sequence parallelism, times 2*cp)")
                 : false;
  }
  if (w.training.lora) return why ? refuse(t, why, "peft lora: TorchTitan trains every weight") : false;
  return true;
}

bool deepspeed_allows(const Workload& w, const Config& c, const Target& t, std::string* why) {
  const Model& m = w.model;
  if (c.ep > 1) return why ? refuse(t, why, "ep > 1: a ds_config cannot express expert parallelism") : false;
  if (w.training.dtype == COTUNE_DTYPE_FP8 || w.training.dtype == COTUNE_DTYPE_FP4)
    return why ? refuse(t, why, std::string(dtype_name(w.training.dtype)) + ": a ds_config has no FP8/FP4 training")
               : false;
  if ((c.tp > 1) + (c.cp > 1) + (c.pp > 1) > 1)
    return why ? refuse(t, why, "a ds_config expresses one model-parallel dimension at a time (AutoTP, Ulysses or "
                                "the pipeline engine); tp " + num(c.tp) + ", cp " + num(c.cp) + ", pp " + num(c.pp))
               : false;
  if (c.pp > 1 && c.zero >= 2)
    return why ? refuse(t, why, "zero " + num(c.zero) + " with pp > 1: \"ZeRO-2 and ZeRO-3 are incompatible with "
                                "pipeline parallelism\" (pipe/engine.py)")
               : false;
  if (c.vpp > 1) return why ? refuse(t, why, "vpp > 1: the pipeline engine has no interleaved schedule") : false;
  if (c.first_stage > 0 || c.last_stage > 0)
    return why ? refuse(t, why, "first_stage_layers/last_stage_layers: PipelineModule partitions in code") : false;
  if (c.cp > 1 && !divides(c.cp, m.heads))
    return why ? refuse(t, why, "cp (Ulysses, " + num(c.cp) + ") must divide the attention heads (" + num(m.heads) + ")")
               : false;
  if (c.sp && c.tp > 1)
    return why ? refuse(t, why, "sp: AutoTP has no sequence parallelism") : false;
  return true;
}

}  // namespace

const FrameworkVersion& Target::pinned() const { return info(framework).versions[static_cast<size_t>(version)]; }

std::string Target::label() const {
  const FrameworkInfo& f = info(framework);
  return std::string(f.label) + " " + pinned().name + " (" + std::string(pinned().commit).substr(0, 8) + ")";
}

bool Target::is(Framework f, const char* version_name) const {
  return framework == f && std::string(pinned().name) == version_name;
}

Target newest(Framework f) { return Target{f, 0}; }

Target parse_target(std::string_view text) {
  const size_t at = text.find('@');
  const std::string word = lower(text.substr(0, at));
  const std::string version = at == std::string_view::npos ? "" : lower(text.substr(at + 1));
  for (const FrameworkInfo& f : frameworks()) {
    if (word != f.word) continue;
    if (version.empty() || version == "head") return Target{f.framework, 0};
    for (size_t i = 0; i < f.versions.size(); ++i) {
      const std::string commit = f.versions[i].commit;
      if (version == lower(f.versions[i].name) || (version.size() >= 7 && commit.compare(0, version.size(), version) == 0))
        return Target{f.framework, static_cast<int>(i)};
    }
  }
  unknown_target(text);
}

Workload workload_for(const Workload& w, const Target& t) {
  Workload out = w;
  const bool native = t.framework == Framework::kTorchtitan || t.framework == Framework::kDeepspeed;
  if (native && out.training.kernels == Kernels::kFused) out.training.kernels = Kernels::kEager;
  return out;
}

std::string workload_refusal(const Workload& w, const Target& t) {
  if (t.framework == Framework::kMegatron && w.training.lora)
    return t.label() + " cannot run it: peft lora (pretrain_gpt.py trains every weight; target nemo for LoRA)";
  if (t.framework == Framework::kTorchtitan && w.training.lora)
    return t.label() + " cannot run it: peft lora (TorchTitan trains every weight)";
  if ((t.framework == Framework::kTorchtitan || t.framework == Framework::kDeepspeed) && w.training.overlap_moe_comm)
    return t.label() + " cannot run it: overlap_moe_comm (Megatron-LM's --overlap-moe-expert-parallel-comm)";
  if (t.framework == Framework::kDeepspeed && w.training.tp_comm_overlap)
    return t.label() + " cannot run it: tp_comm_overlap (DeepSpeed has no tensor-parallel overlap: set "
                       "training.tp_comm_overlap false, or target megatron, nemo or torchtitan)";
  if (t.framework == Framework::kTorchtitan && w.training.tp_comm_overlap && w.training.kernels != Kernels::kCompiled)
    return t.label() + " cannot run it: tp_comm_overlap without compiled kernels (TorchTitan's async tensor "
                       "parallelism needs torch.compile: training.kernels compiled)";
  if ((t.framework == Framework::kTorchtitan || t.framework == Framework::kDeepspeed) && w.training.cross_entropy_fusion &&
      w.training.kernels != Kernels::kCompiled)
    return t.label() + " cannot run it: cross_entropy_fusion (Megatron-LM's --cross-entropy-loss-fusion; PyTorch fuses "
                       "the loss only under torch.compile: training.kernels compiled)";
  if (t.framework == Framework::kTorchtitan && w.training.dtype == COTUNE_DTYPE_FP8 &&
      w.training.fp8_recipe == Fp8Recipe::kBlockwise)
    return t.label() + " cannot run it: fp8_recipe blockwise (torchao's float8 converter scales per tensor or per row; "
                       "use tensorwise or mxfp8, or target megatron or nemo)";
  // TorchTitan's HEAD chooses float8 in Python and offers rowwise scaling only (torchtitan_rules.md
  // section 5): no recipe a workload names can be asked of it.
  if (t.framework == Framework::kTorchtitan && !t.is(Framework::kTorchtitan, "v0.1.0") &&
      !t.is(Framework::kTorchtitan, "v0.2.2") && w.training.dtype == COTUNE_DTYPE_FP8 &&
      w.training.fp8_recipe != Fp8Recipe::kAuto)
    return t.label() + " cannot run it: fp8_recipe " + fp8_recipe_name(w.training.fp8_recipe) +
           " (its float8 converter scales per row only, and has no MX path: target torchtitan@v0.2.2 for tensorwise "
           "or mxfp8, or leave fp8_recipe auto)";
  if (t.framework == Framework::kTorchtitan && w.training.grad_reduce == GradReduce::kBf16)
    return t.label() + " cannot run it: grad_reduce bf16 (TorchTitan's training.mixed_precision_reduce is float32 only)";
  if (w.training.moe_dispatcher == MoeDispatcher::kFlex && w.model.moe()) {
    if (t.framework == Framework::kDeepspeed)
      return t.label() + " cannot run it: moe_dispatcher flex (DeepEP or HybridEP: Megatron-LM, NeMo, TorchTitan)";
    if (t.framework == Framework::kTorchtitan && !t.is(Framework::kTorchtitan, "v0.2.2"))
      return t.label() + " cannot run it: moe_dispatcher flex" +
             (t.is(Framework::kTorchtitan, "v0.1.0") ? std::string(" (v0.1.0 has no expert parallelism)")
                                                      : std::string(" (the dispatcher is set in the model's Python "
                                                                    "config, not in the job config; target "
                                                                    "torchtitan@v0.2.2 for expert_parallel_comm_backend)"));
  }
  return "";
}

bool target_allows(const Workload& w, const Config& c, const Target& t, std::string* why) {
  switch (t.framework) {
    case Framework::kMegatron:
    case Framework::kNemo: return megatron_core_allows(w, c, t, why);
    case Framework::kTorchtitan: return torchtitan_allows(w, c, t, why);
    case Framework::kDeepspeed: return deepspeed_allows(w, c, t, why);
  }
  return true;
}

double torchtitan_layers_per_stage(double layers, double pp, double vpp, const Target& t) {
  if (pp <= 1) return 0;
  if (vpp <= 2) return 0;  // the default: one stage per rank (1F1B) or two (interleaved)
  const double effective = layers + 2;  // the embedding and the output count as one layer each
  const double stages = pp * vpp;
  if (t.is(Framework::kTorchtitan, "v0.1.0")) {
    // An exact fit: (layers + 2) divides by pp, and each rank's share by the layers per stage.
    if (std::fmod(effective, pp) != 0) return -1;
    const double per_rank = effective / pp;
    return std::fmod(per_rank, vpp) == 0 ? per_rank / vpp : -1;
  }
  // v0.2.2 and main: stages = ceil(effective / L), and each end stage keeps at least its weight.
  for (int l = 1; l <= static_cast<int>(effective); ++l)
    if (std::ceil(effective / l) == stages && 1 <= std::floor(effective / stages)) return l;
  return -1;
}

}  // namespace cotune_llm
