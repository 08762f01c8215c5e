// Memory and FLOP formulas of the LLM space (see estimate.hpp and docs/workloads.md).
#include "estimate.hpp"

#include <algorithm>

#include "per_op_recompute.hpp"

namespace cotune_llm {
namespace {

bool low_precision(const Workload& w) {
  return w.training.dtype == COTUNE_DTYPE_FP8 || w.training.dtype == COTUNE_DTYPE_FP4;
}

// Per-token forward FLOPs of the parts a pipeline rank may hold (relative work, not per GPU).
struct LayerFlops {
  double attention = 0, dense_mlp = 0, moe_mlp = 0, output = 0;
};

LayerFlops layer_flops(const Model& m) {
  LayerFlops f;
  f.attention = 2 * m.attention_params() + 2 * (m.seq_len / 2) * m.heads * (m.qk_head_dim() + m.v_head_dim());
  f.dense_mlp = 2 * m.dense_mlp_params();
  f.moe_mlp = m.top_k * 2 * m.routed_expert_params() + 2 * m.shared_mlp_params() + 2 * m.hidden * m.experts;
  f.output = 2 * m.hidden * m.vocab;
  return f;
}

}  // namespace

double moe_tokens_in(const Workload& w, const Config& c) {
  const double tokens = c.micro_batch * w.model.seq_len / c.cp;
  // Megatron-LM runs MoE with tensor parallelism only with sequence parallelism: each
  // tensor-parallel rank routes its own share of the sequence.
  return c.tp > 1 ? tokens / c.tp : tokens;
}

double tokens_per_local_expert(const Workload& w, const Config& c) {
  const Model& m = w.model;
  const double capacity = m.capacity_factor > 0 ? m.capacity_factor : 1.0;
  return moe_tokens_in(w, c) * m.top_k * c.ep / m.experts * c.etp * capacity;
}

std::string shape_of(const Workload& w, const Config& c, Shape* out) {
  const Model& m = w.model;
  Shape s;
  s.micro_batches = w.training.global_batch / (c.dp * c.micro_batch);
  s.tokens = c.micro_batch * m.seq_len / c.cp;
  const std::string why = split_layers(m.layers, c.pp, c.vpp, c.first_stage, c.last_stage, &s.split, m.mtp_layers);
  if (!why.empty()) return why;
  // MLA's down projections are not split over tensor-parallel ranks (Megatron-LM keeps them whole).
  double replicated = 0;
  if (m.mla.on())
    replicated = m.hidden * (m.mla.q_lora_rank + m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) + m.mla.q_lora_rank +
                 m.mla.kv_lora_rank;
  s.attention_params = (m.attention_params() - replicated) / c.tp + replicated + 2 * m.hidden;
  s.dense_mlp_params = m.dense_mlp_params() / c.tp;
  if (m.moe()) {
    s.moe_dense_params = m.shared_mlp_params() / c.tp + m.hidden * m.experts;
    s.expert_params = m.experts / c.ep * m.routed_expert_params() / c.etp;
  }
  s.embedding_params = m.embedding_params() / c.tp;
  s.mtp_extra_params = 2 * m.hidden * m.hidden / c.tp + 2 * m.hidden;
  s.dense_replicas = c.dp * c.cp;
  s.expert_replicas = std::max(1.0, c.tp * c.cp * c.dp / (c.ep * c.etp));
  ranks_of(m, s.split, c.pp, &s.ranks);
  *out = std::move(s);
  return "";
}

RankParams rank_params(const Workload& w, const Shape& s, const RankLayers& r) {
  const Model& m = w.model;
  RankParams p;
  const double layers = r.layers + r.mtp_layers;
  const double moe_layers = r.moe_layers + (m.moe() ? r.mtp_layers : 0);
  p.dense = layers * s.attention_params + (layers - moe_layers) * s.dense_mlp_params + moe_layers * s.moe_dense_params +
            r.mtp_layers * s.mtp_extra_params;
  p.expert = moe_layers * s.expert_params;
  if (r.embedding) p.dense += s.embedding_params;
  // The output layer; with tied embeddings on one rank it is the embedding itself.
  if (r.output && !(r.embedding && m.tie_embeddings)) p.dense += s.embedding_params;
  return p;
}

double busiest_rank(const Workload& w, const Config& c, const Shape& s) {
  const Model& m = w.model;
  const LayerFlops f = layer_flops(m);
  double best = -1, best_rank = c.pp - 1;
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    const double rank = static_cast<double>(i);
    const RankLayers& r = s.ranks[i];
    const double mlp_moe = r.moe_layers + (m.moe() ? r.mtp_layers : 0);
    const double layers = r.layers + r.mtp_layers;
    double work = layers * f.attention + (layers - mlp_moe) * f.dense_mlp + mlp_moe * f.moe_mlp;
    if (r.output) work += f.output * (1 + r.mtp_layers);
    if (work >= best) best = work, best_rank = rank;  // ties go to the later rank (it holds the output)
  }
  return best_rank;
}

LayerActivations layer_activations(const Workload& w, const Config& c) {
  if (per_op_selective(w, c)) return per_op_kept(w, c);
  const Model& m = w.model;
  const double T = c.micro_batch * m.seq_len / c.cp;
  const double h = m.hidden;
  const double t = c.tp;
  const double drop = w.training.dropout ? 1 : 0;
  const double gemm_in = low_precision(w) ? 1 : 2;  // Transformer Engine keeps FP8 copies of GEMM inputs
  const bool unfused = w.training.attention == Attention::kUnfused;
  const double sp_div = c.sp ? t : 1;
  // What selective recomputation rebuilds instead of keeping (recompute.hpp).
  const uint32_t rebuilt = c.recompute == kRecomputeSelective ? c.recompute_modules : 0;
  const double norm_out = (rebuilt & kLayernorm) ? 0 : gemm_in;  // a norm's output is the next GEMM's input

  LayerActivations a;
  // Attention: the norm's input, its output (the QKV GEMM's input) and the dropout mask are
  // replicated across tensor-parallel ranks unless sequence parallel (Korthikanti et al.: with MHA
  // 13 sbh together with the split part); Q, K, V and the projection's input are split.
  double replicated = T * h * (2 + norm_out + drop);
  // Without MLA, keys and values have the same width (the KV heads times the head dimension).
  double kv = m.kv_dim();
  double v = kv;
  if (m.mla.on()) {
    // The latents of queries and of keys/values, and their normalised copies (the up GEMMs' inputs).
    const double latents = m.mla.q_lora_rank + m.mla.kv_lora_rank + m.mla.qk_rope_head_dim;
    replicated += T * latents * (2 + norm_out);
    kv = m.heads * m.qk_head_dim();
    v = m.heads * m.v_head_dim();
  }
  const double qkv = (m.mla.on() && (rebuilt & kMlaUpProj)) ? 0 : 2 * m.q_dim() + 2 * kv + 2 * v;
  const double split = T * (qkv + gemm_in * m.heads * m.v_head_dim());
  a.attention = replicated / sp_div + split / t;
  // The attention score matrix of unfused attention (softmax output, dropout mask and output),
  // which recomputing the attention core rebuilds instead of keeping.
  if (unfused && !(rebuilt & kCoreAttn)) a.attention += T * m.heads * m.seq_len * (drop ? 5 : 2) / t;

  // A dense MLP: its norm's input and output (the first GEMM's input) and the mask (replicated),
  // the activation's input and the second GEMM's input (split).
  const double up = m.gated_mlp ? 2 : 1;
  a.dense_mlp = T * h * (2 + norm_out + drop) / sp_div;
  if (!(rebuilt & kMlp)) a.dense_mlp += T * m.ffn_hidden * (2 * up + gemm_in) / t;

  if (m.moe()) {
    // A MoE MLP: the norm's input and output and the mask, the router's probabilities, then for
    // every routed copy of a token the permuted input (kept for the first GEMM), the activation's
    // input, its output (the second GEMM's input) and the experts' output (for the combine's
    // gradient of the routing weights), on this GPU's experts.
    const double routed = tokens_per_local_expert(w, c) * m.experts / c.ep;
    const double ffn = m.expert_ffn_hidden / c.etp;
    a.moe_mlp = T * h * (2 + norm_out + drop) / sp_div;
    if (!(rebuilt & kMoe)) {
      a.moe_mlp += moe_tokens_in(w, c) * m.experts * 4;
      a.moe_mlp += routed * (gemm_in * h + ffn * 2 * up + ((rebuilt & kMoeAct) ? 0 : gemm_in * ffn) + 2 * h);
    }
    if (m.shared_experts > 0 && !(rebuilt & kSharedExperts))
      a.moe_mlp += T * m.shared_experts * m.shared_expert_ffn_hidden * (2 * up + gemm_in) / t;
  }

  if (c.recompute == kRecomputeFull) {
    // Each layer keeps its input only; one layer is rebuilt in full during backward (counted by
    // the caller). Attention carries the input; the MLPs nothing.
    a.attention = 2 * T * h / sp_div;
    a.dense_mlp = 0;
    a.moe_mlp = 0;
  }
  return a;
}

namespace {

double total(const cotune_memory& m) { return m.weights + m.gradients + m.optimizer + m.activations + m.buffers; }

// Micro-batches (in units of the whole rank's layers) whose activations rank `rank` holds at once:
// 1F1B warms up pp - rank of them; the interleaved schedule 2 (pp - rank - 1) + (vpp - 1) pp + 1
// chunks (Megatron-LM's warm-up count), a chunk being 1/vpp of the rank.
double in_flight(const Config& c, double micro_batches, double rank) {
  if (c.pp == 1) return 1;
  if (c.vpp == 1) return std::min(micro_batches, c.pp - rank);
  const double chunks = std::min(micro_batches * c.vpp, 2 * (c.pp - rank - 1) + (c.vpp - 1) * c.pp + 1);
  return chunks / c.vpp;
}

cotune_memory rank_memory(const Workload& w, const Config& c, const Shape& s, const LayerActivations& act,
                          const LayerActivations& full, double rank) {
  const Model& m = w.model;
  const RankLayers& r = s.ranks[static_cast<size_t>(rank)];
  const RankParams p = rank_params(w, s, r);
  auto sharded = [&](double per_param, bool shard) {
    return per_param * (shard ? p.dense / s.dense_replicas + p.expert / s.expert_replicas : p.dense + p.expert);
  };
  cotune_memory mem{};
  mem.struct_size = COTUNE_STRUCT_SIZE(cotune_memory, buffers);
  // ZeRO-1 (Megatron-LM's distributed optimizer) shards the optimizer state, ZeRO-2 (DeepSpeed)
  // the gradients too, ZeRO-3 / FSDP the weights as well.
  mem.weights = sharded(kWeightBytes, c.zero >= 3);
  // LoRA trains adapters of a few million parameters: no gradient buffer or optimizer state for the
  // frozen base worth counting.
  mem.gradients = w.training.lora ? 0 : sharded(grad_bytes(w.training), c.zero >= 2);
  mem.optimizer = w.training.lora ? 0 : sharded(kOptimizerBytes, c.zero >= 1);

  const double layers = r.layers + r.mtp_layers;
  const double moe_layers = r.moe_layers + (m.moe() ? r.mtp_layers : 0);
  const double per_micro_batch =
      layers * act.attention + (layers - moe_layers) * act.dense_mlp + moe_layers * act.moe_mlp;
  double a = per_micro_batch * in_flight(c, s.micro_batches, rank);
  if (c.recompute == kRecomputeFull)  // one layer rebuilt during backward
    a += full.attention + (moe_layers > 0 ? full.moe_mlp : full.dense_mlp);
  // The logits (bf16) and the softmax the vocabulary-parallel cross entropy keeps for backward (fp32).
  if (r.output) a += s.tokens * m.vocab / c.tp * 6 * (1 + r.mtp_layers);
  mem.activations = a;

  double buffers = kWorkspaceBytes;
  if (c.zero >= 3)  // the gathered weights of the layer being computed and the one prefetched
    buffers += 2 * kWeightBytes *
               (s.attention_params + std::max(s.dense_mlp_params, m.moe() ? s.moe_dense_params + s.expert_params : 0.0));
  // FP8 copies of the weights (one byte each), sharded as the weights are: FSDP gathers a layer's
  // copy with it (into the buffers above) and keeps only its shard between uses.
  if (low_precision(w)) buffers += sharded(1, c.zero >= 3);
  mem.buffers = buffers;
  return mem;
}

}  // namespace

cotune_memory memory_estimate(const Workload& w, const Config& c, const Shape& s) {
  const LayerActivations act = layer_activations(w, c);
  Config no_recompute = c;
  no_recompute.recompute = kRecomputeNone;
  const LayerActivations full = layer_activations(w, no_recompute);
  cotune_memory worst{};
  for (size_t i = 0; i < s.ranks.size(); ++i) {
    const cotune_memory mem = rank_memory(w, c, s, act, full, static_cast<double>(i));
    if (i == 0 || total(mem) > total(worst)) worst = mem;
  }
  return worst;
}

double model_flops_per_gpu(const Workload& w, const Config& c) {
  const double tokens = w.training.global_batch * w.model.seq_len;
  return 3 * tokens * w.model.forward_flops_per_token() / c.gpus;
}

}  // namespace cotune_llm
