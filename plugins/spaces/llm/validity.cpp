// Constraints of the LLM space (see validity.hpp).
#include "validity.hpp"

#include <cmath>
#include <cstdio>

#include "estimate.hpp"

namespace cotune_llm {
namespace {

bool divides(double a, double b) { return a >= 1 && std::fmod(b, a) == 0; }

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", bytes / 1073741824.0);
  return buf;
}

bool fail(std::string* why, const std::string& reason) {
  if (why != nullptr) *why = reason;
  return false;
}

}  // namespace

bool check_config(const Workload& w, const Config& c, const cotune_hardware& hw, std::string* why) {
  const Model& m = w.model;
  const double product = c.tp * c.pp * c.dp * c.cp;
  if (product != c.gpus)
    return why ? fail(why, "tp*pp*dp*cp = " + num(c.tp) + "*" + num(c.pp) + "*" + num(c.dp) + "*" + num(c.cp) + " = " +
                               num(product) + " but gpus = " + num(c.gpus))
               : false;
  if (!divides(c.tp, m.heads))
    return why ? fail(why, "heads (" + num(m.heads) + ") are not divisible by tp (" + num(c.tp) + ")") : false;
  if (!divides(c.tp, m.kv_heads))
    return why ? fail(why, "kv_heads (" + num(m.kv_heads) + ") are not divisible by tp (" + num(c.tp) + ")") : false;
  if (c.vpp > 1 && c.pp == 1) return why ? fail(why, "vpp > 1 (interleaving) needs pp > 1") : false;
  if (c.pp * c.vpp > m.layers + 2)
    return why ? fail(why, "pp*vpp (" + num(c.pp) + "*" + num(c.vpp) + ") exceeds the layers (" + num(m.layers) +
                               ") with the embedding and the loss")
               : false;
  Shape shape;
  {
    const std::string split = shape_of(w, c, &shape);
    if (!split.empty()) return why ? fail(why, split) : false;
  }
  if (!divides(c.dp * c.micro_batch, w.training.global_batch))
    return why ? fail(why, "global_batch (" + num(w.training.global_batch) + ") is not divisible by dp*micro_batch (" +
                               num(c.dp) + "*" + num(c.micro_batch) + ")")
               : false;
  const double micro_batches = w.training.global_batch / (c.dp * c.micro_batch);
  if (c.vpp > 1 && !divides(c.pp, micro_batches))
    return why ? fail(why, "the interleaved schedule needs micro-batches per step (" + num(micro_batches) +
                               ") divisible by pp (" + num(c.pp) + ")")
               : false;
  if (!m.moe() && c.ep != 1) return why ? fail(why, "ep > 1 needs a mixture-of-experts model (experts > 1)") : false;
  if (m.moe() && !divides(c.ep, m.experts))
    return why ? fail(why, "experts (" + num(m.experts) + ") are not divisible by ep (" + num(c.ep) + ")") : false;
  if (m.moe() && !divides(c.ep * c.etp, c.tp * c.cp * c.dp))
    return why ? fail(why, "ep*etp (" + num(c.ep) + "*" + num(c.etp) + ") must divide tp*cp*dp (" +
                               num(c.tp * c.cp * c.dp) +
                               "): the expert grid is carved out of the tensor, context and data ranks (Megatron-LM)")
               : false;
  if (m.moe() && !divides(c.etp, m.expert_ffn_hidden))
    return why ? fail(why, "expert_ffn_hidden (" + num(m.expert_ffn_hidden) + ") is not divisible by etp (" +
                               num(c.etp) + ")")
               : false;
  if (!m.moe() && c.etp != c.tp && c.etp != 1)
    return why ? fail(why, "etp (expert tensor parallelism) needs a mixture-of-experts model") : false;
  if (c.sp && c.tp == 1) return why ? fail(why, "sp (sequence parallelism) needs tp > 1") : false;
  if (c.recompute_modules != kCoreAttn) {
    if (c.recompute != kRecomputeSelective)
      return why ? fail(why, "recompute_modules (" + recompute_modules_text(c.recompute_modules) +
                                 ") applies to selective recomputation only")
                 : false;
    if (w.training.kernels != Kernels::kFused)
      return why ? fail(why, "recompute_modules: a PyTorch-native trainer (training.kernels eager or compiled) "
                             "recomputes selectively per operator (TorchTitan's policy), not by module")
                 : false;
    if ((c.recompute_modules & kMlaUpProj) && !m.mla.on())
      return why ? fail(why, "recompute module mla_up_proj needs multi-latent attention (model.mla)") : false;
    if ((c.recompute_modules & (kMoe | kMoeAct)) && !m.moe())
      return why ? fail(why, "recompute modules moe and moe_act need a mixture-of-experts model") : false;
    if ((c.recompute_modules & kSharedExperts) && m.shared_experts == 0)
      return why ? fail(why, "recompute module shared_experts needs shared experts (model.shared_experts)") : false;
  }
  if (w.training.overlap_moe_comm && c.ep > 1) {  // Megatron-LM's rule M50
    const char* rule = nullptr;
    if (w.training.kernels != Kernels::kFused) rule = "runs in Megatron-LM (training.kernels fused)";
    else if (c.pp > 1 && c.vpp == 1) rule = "needs vpp > 1 with pp > 1 (the interleaved schedule merges the micro-batches)";
    else if (c.recompute == kRecomputeFull) rule = "does not run with full recomputation";
    else if (c.recompute == kRecomputeSelective && (c.recompute_modules & kMoe)) rule = "does not run with the moe recompute module";
    else if (m.mtp_layers > 1) rule = "allows at most one multi-token-prediction layer";
    if (rule != nullptr)
      return why ? fail(why, std::string("overlap_moe_comm (--overlap-moe-expert-parallel-comm) ") + rule) : false;
  }
  if (c.cp > 1 && w.training.attention != Attention::kFlash)
    return why ? fail(why, "cp > 1 needs fused attention (context parallelism runs in Transformer Engine's "
                               "attention kernels)")
               : false;
  if (c.cp > 1 && !divides(2 * c.cp, m.seq_len))
    return why ? fail(why, "seq_len (" + num(m.seq_len) + ") is not divisible by 2*cp (" + num(2 * c.cp) +
                               ", load-balanced causal chunks)")
               : false;
  if (c.sp && !divides(c.tp, c.micro_batch * m.seq_len / c.cp))
    return why ? fail(why, "sequence parallelism needs micro_batch*seq_len/cp divisible by tp") : false;
  if (dtype_peak(hw, w.training.dtype) <= 0)
    return why ? fail(why, std::string("the GPU ") + std::string(hw.gpu_name.data, hw.gpu_name.len) + " has no " +
                               dtype_name(w.training.dtype) + " support")
               : false;
  if (w.training.dtype == COTUNE_DTYPE_FP8 && w.training.fp8_recipe == Fp8Recipe::kMxfp8 && !block_scaled_tensor_cores(hw))
    return why ? fail(why, "fp8_recipe mxfp8 needs tensor cores that scale blocks (Blackwell and later); the " +
                               std::string(hw.gpu_name.data, hw.gpu_name.len) +
                               " has none: use tensorwise or blockwise there")
               : false;
  const cotune_memory mem = memory_estimate(w, c, shape);
  const double total = mem.weights + mem.gradients + mem.optimizer + mem.activations + mem.buffers;
  if (total > hw.hbm_bytes)
    return why ? fail(why, "out of memory: needs " + gib(total) + " GiB per GPU but the " +
                               std::string(hw.gpu_name.data, hw.gpu_name.len) + " has " + gib(hw.hbm_bytes) +
                               " GiB (weights " + gib(mem.weights) + ", gradients " + gib(mem.gradients) +
                               ", optimizer state " + gib(mem.optimizer) + ", activations " + gib(mem.activations) +
                               ", buffers " + gib(mem.buffers) + " GiB)")
               : false;
  return true;
}

}  // namespace cotune_llm
