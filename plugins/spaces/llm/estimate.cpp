// Memory and FLOP formulas of the LLM space (see estimate.hpp and docs/workloads.md).
#include "estimate.hpp"

#include <algorithm>

namespace cotune_llm {

Shape shape_of(const Workload& w, const Config& c) {
  const Model& m = w.model;
  Shape s;
  s.micro_batches = w.training.global_batch / (c.dp * c.micro_batch);
  s.tokens = c.micro_batch * m.seq_len / c.cp;
  s.layers_per_device = m.layers / c.pp;
  const double dense_mlp = m.moe() ? m.hidden * m.experts : m.mlp_params();
  s.dense_params_per_gpu_layer = (m.attention_params() + dense_mlp) / c.tp + 2 * m.hidden;
  s.expert_params_per_gpu_layer =
      m.moe() ? m.experts / c.ep * m.mlp_matrices() * m.hidden * m.expert_ffn_hidden / c.tp : 0;
  s.embedding_params_per_gpu = m.vocab * m.hidden / c.tp;
  return s;
}

double layer_activation_bytes(const Workload& w, const Config& c, bool with_scores) {
  const Model& m = w.model;
  const double T = c.micro_batch * m.seq_len / c.cp;
  const double h = m.hidden;
  const double t = c.tp;
  const double drop = w.training.dropout ? 1 : 0;
  // Replicated across tensor-parallel ranks unless sequence parallel: the two norm inputs, the
  // inputs of the QKV and first MLP GEMMs, the two dropout masks (Korthikanti et al.: 10 sbh).
  const double replicated = T * h * (8 + 2 * drop);
  // Split across tensor-parallel ranks: Q, K, V, the projection input and the MLP activations.
  const double mlp = (m.gated_mlp ? 6 : 4) * (m.moe() ? m.top_k * m.expert_ffn_hidden : m.ffn_hidden);
  const double split = T * (4 * h + 4 * m.kv_dim() + mlp);
  double bytes = (c.sp ? replicated / t : replicated) + split / t;
  // The attention score matrix of unfused attention: softmax output, dropout mask and output.
  if (with_scores) bytes += T * m.heads * m.seq_len * (drop ? 5 : 2) / t;
  return bytes;
}

namespace {

cotune_memory stage_memory(const Workload& w, const Config& c, const Shape& s, bool first) {
  const Model& m = w.model;
  const bool last = !first || c.pp == 1;
  const bool has_embedding = first || c.pp == 1;
  double dense = s.layers_per_device * s.dense_params_per_gpu_layer;
  const double expert = s.layers_per_device * s.expert_params_per_gpu_layer;
  if (has_embedding) dense += s.embedding_params_per_gpu;
  if (last && !(has_embedding && m.tie_embeddings)) dense += s.embedding_params_per_gpu;

  // ZeRO shards over the data-parallel (and context-parallel) ranks holding the same weights;
  // experts over the ranks holding the same experts.
  const double dense_shard = c.dp * c.cp;
  const double expert_shard = std::max(1.0, c.dp * c.cp / c.ep);
  auto sharded = [&](double per_param, bool shard) {
    return per_param * (shard ? dense / dense_shard + expert / expert_shard : dense + expert);
  };
  cotune_memory mem{};
  mem.struct_size = COTUNE_STRUCT_SIZE(cotune_memory, buffers);
  mem.weights = sharded(kWeightBytes, c.zero >= 3);
  mem.gradients = sharded(kGradBytes, c.zero >= 2);
  mem.optimizer = sharded(kOptimizerBytes, c.zero >= 1);

  const bool flash = w.training.attention == Attention::kFlash;
  const double full_layer = layer_activation_bytes(w, c, !flash);
  double per_layer = full_layer;
  if (c.recompute == kRecomputeSelective) per_layer = layer_activation_bytes(w, c, false);
  if (c.recompute == kRecomputeFull) per_layer = 2 * s.tokens * m.hidden / (c.sp ? c.tp : 1);
  // Micro-batches in flight on this stage: the first 1F1B stage holds pp of them, interleaving
  // multiplies that by 1 + (pp - 1) / (pp vpp) (Korthikanti et al.); the last stage holds one.
  double in_flight = 1;
  if (first && c.pp > 1) {
    in_flight = std::min(s.micro_batches, c.pp);
    if (c.vpp > 1) in_flight *= 1 + (c.pp - 1) / (c.pp * c.vpp);
  }
  double act = s.layers_per_device * per_layer * in_flight;
  if (c.recompute == kRecomputeFull) act += full_layer;  // one layer rebuilt during backward
  if (last) act += s.tokens * m.vocab / c.tp * 4 * 2;   // fp32 logits and their gradient
  mem.activations = act;

  double buffers = kWorkspaceBytes;
  if (c.zero >= 3)  // the gathered weights of the layer being computed and the one prefetched
    buffers += 2 * kWeightBytes * (s.dense_params_per_gpu_layer + s.expert_params_per_gpu_layer);
  mem.buffers = buffers;
  return mem;
}

double total(const cotune_memory& m) { return m.weights + m.gradients + m.optimizer + m.activations + m.buffers; }

}  // namespace

cotune_memory memory_estimate(const Workload& w, const Config& c) {
  const Shape s = shape_of(w, c);
  const cotune_memory first = stage_memory(w, c, s, true);
  if (c.pp == 1) return first;
  const cotune_memory last = stage_memory(w, c, s, false);
  return total(first) >= total(last) ? first : last;
}

double model_flops_per_gpu(const Workload& w, const Config& c) {
  const double tokens = w.training.global_batch * w.model.seq_len;
  return 3 * tokens * w.model.forward_flops_per_token() / c.gpus;
}

}  // namespace cotune_llm
