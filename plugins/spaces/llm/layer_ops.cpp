// One layer's blocks as trace ops (see layer_ops.hpp). Shapes follow Megatron-LM: column- and
// row-parallel linear layers, all-reduce (or all-gather / reduce-scatter with sequence
// parallelism) around each block, explicit data- and weight-gradient GEMMs. `kernels` counts the
// framework operations each op stands for (Transformer Engine fuses norms into the GEMM that
// follows them, rotary embedding into one kernel each for queries and keys, ...); host() adds the
// module glue that launches no kernel of its own.
#include "layer_ops.hpp"

#include <algorithm>

#include "estimate.hpp"

namespace cotune_llm {
namespace {

constexpr int32_t F = COTUNE_PHASE_FORWARD, BW = COTUNE_PHASE_BACKWARD;

int32_t tp_out(const Config& c) { return c.sp ? COTUNE_COLL_REDUCE_SCATTER : COTUNE_COLL_ALL_REDUCE; }
const char* tp_out_label(const Config& c) { return c.sp ? "tp_reducescatter" : "tp_allreduce"; }

// Tensor-parallel communication overlap (training.tp_comm_overlap: Transformer Engine's
// userbuffers behind Megatron-LM's --tp-comm-overlap), with sequence parallelism only:
//  - the all-gather in front of a GEMM (column-parallel forward, row-parallel data gradient) passes
//    its chunks around the ring while the GEMM computes the chunks already there: a layer takes the
//    longer of the two;
//  - the reduce-scatter behind a forward GEMM (row-parallel) is pipelined with it: each of the GEMM's
//    kPipelineSplits splits is reduced while the next computes, and the last split's is waited for;
//  - the data gradient's reduce-scatter (column-parallel backward) runs under the weight-gradient GEMM.
// Overlapped transfers run on a stream of their own; the op that consumes one waits for it.
constexpr int32_t kTpCommStream = 4;
constexpr double kPipelineSplits = 4;  // Transformer Engine's num_splits for a pipelined GEMM + RS

bool tp_overlapped(const Workload& w, const Config& c) { return w.training.tp_comm_overlap && c.sp && c.tp > 1; }

// The op emitted last if it belongs to `phase` (what an overlapped transfer starts after), else -1.
int32_t last_of(TraceBuilder& B, int32_t phase) {
  const int32_t i = B.last();
  return i >= 0 && B.op(i).phase == phase ? i : -1;
}

// Sequence parallelism gathers a block's input over the tensor-parallel ranks. Returns the
// overlapped all-gather that the GEMM's consumer waits for (B.wait_next after the GEMM), or -1.
int32_t tp_gather(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, int32_t phase, double count,
                  uint32_t flags = 0) {
  if (!c.sp) return -1;
  const bool overlap = tp_overlapped(w, c);
  const int32_t op = B.collective(phase, overlap ? kTpCommStream : 0, "tp_allgather", COTUNE_COLL_ALL_GATHER,
                                  COTUNE_GROUP_TP, d.T * d.h * kAct, 1, c.tp, count, overlap ? last_of(B, phase) : -1,
                                  flags);
  return overlap ? op : -1;
}

// The output of a row-parallel forward GEMM (`gemm`, the op just emitted) reduced over the ranks.
void tp_combine(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, int32_t phase, double count,
                uint32_t flags, int32_t gemm) {
  const double bytes = d.T * d.h * kAct;
  if (!tp_overlapped(w, c) || gemm < 1 || B.op(gemm - 1).phase != phase) {
    B.collective(phase, 0, tp_out_label(c), tp_out(c), COTUNE_GROUP_TP, bytes, 1, c.tp, count, -1, flags);
    return;
  }
  const double hidden = (kPipelineSplits - 1) / kPipelineSplits;
  const int32_t pipelined = B.collective(phase, kTpCommStream, tp_out_label(c), tp_out(c), COTUNE_GROUP_TP,
                                         bytes * hidden, 1, c.tp, count, gemm - 1, flags);
  B.collective(phase, 0, tp_out_label(c), tp_out(c), COTUNE_GROUP_TP, bytes * (1 - hidden), 1, c.tp, count, pipelined,
               flags);
}

// The input gradient of a column-parallel layer, whose data gradient is `dgrad`, reduced over the
// ranks after its weight gradient has been emitted.
void tp_combine_grad(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, double count, int32_t dgrad) {
  const bool overlap = tp_overlapped(w, c) && dgrad >= 0;
  const int32_t op = B.collective(BW, overlap ? kTpCommStream : 0, tp_out_label(c), tp_out(c), COTUNE_GROUP_TP,
                                  d.T * d.h * kAct, 1, c.tp, count, overlap ? dgrad : -1);
  if (overlap) B.wait_next(op);
}

// With sequence parallelism the input of a column-parallel layer is gathered again for its weight
// gradient (Megatron-LM does not keep the gathered copy), overlapped with the data gradient.
int32_t wgrad_input(TraceBuilder& B, const Config& c, const Dims& d, double count) {
  if (!c.sp) return -1;
  return B.collective(BW, 1, "tp_allgather_wgrad", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_TP, d.T * d.h * kAct, 1, c.tp,
                      count);
}

// The attention op's head dimension: the mean of the query/key and value widths, so that its
// 4 b h sq skv d FLOPs are the scores' 2 b h sq skv d_qk plus the values' 2 b h sq skv d_v.
double op_head_dim(const Model& m) { return (m.qk_head_dim() + m.v_head_dim()) / 2; }

// Rotary embedding: queries and keys read and written once (MLA: their rotary part only).
double rope_bytes(const Model& m, const Dims& d) {
  const double width = m.mla.on() ? d.heads_local * m.mla.qk_rope_head_dim + m.mla.qk_rope_head_dim : d.q_local + d.k_local;
  return d.T * width * kAct * 2;
}

// Keys and values of one context-parallel chunk, as the ring passes them on.
double cp_chunk_bytes(const Config& c, const Dims& d) { return c.micro_batch * (d.s / c.cp) * (d.k_local + d.v_local) * kAct; }

}  // namespace

Dims dims_of(const Workload& w, const Config& c) {
  const Model& m = w.model;
  Dims d;
  d.b = c.micro_batch;
  d.s = m.seq_len;
  d.T = c.micro_batch * m.seq_len / c.cp;
  d.t = c.tp;
  d.Tl = c.sp ? d.T / c.tp : d.T;
  d.h = m.hidden;
  d.heads_local = m.heads / c.tp;
  d.q_local = d.heads_local * m.qk_head_dim();
  if (m.mla.on()) {
    d.k_local = d.heads_local * m.qk_head_dim();
    d.v_local = d.heads_local * m.v_head_dim();
  } else {
    d.k_local = d.v_local = m.kv_dim() / c.tp;
  }
  d.ffn_local = m.ffn_hidden / c.tp;
  return d;
}

void attention_forward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, int32_t phase, double n,
                       uint32_t flags) {
  if (n <= 0) return;
  const Model& m = w.model;
  const bool drop = w.training.dropout;
  const auto fwd = GemmRole::kForward;
  B.begin_block(phase, n, flags);
  B.memory(phase, "layernorm", d.Tl * d.h * kAct * 2, n, flags);
  const int32_t gathered = tp_gather(B, w, c, d, phase, n, flags);
  int32_t qkv = -1;
  if (m.mla.on()) {
    const Mla& a = m.mla;
    // The down projections run whole on every tensor-parallel rank; the up projections are split.
    if (a.q_lora_rank > 0) {
      B.gemm(phase, "q_down", d.T, a.q_lora_rank, d.h, n, fwd, flags);
      B.wait_next(gathered);
      B.memory(phase, "q_norm", d.T * a.q_lora_rank * kAct * 2, n, flags);
      B.gemm(phase, "q_up", d.T, d.q_local, a.q_lora_rank, n, fwd, flags);
    } else {
      B.gemm(phase, "q_proj", d.T, d.q_local, d.h, n, fwd, flags);
      B.wait_next(gathered);
    }
    B.gemm(phase, "kv_down", d.T, a.kv_lora_rank + a.qk_rope_head_dim, d.h, n, fwd, flags);
    B.memory(phase, "kv_norm", d.T * a.kv_lora_rank * kAct * 2, n, flags);
    qkv = B.gemm(phase, "kv_up", d.T, d.heads_local * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank, n, fwd, flags);
  } else {
    qkv = B.gemm(phase, "qkv", d.T, d.q_local + d.k_local + d.v_local, d.h, n, fwd, flags);
    B.wait_next(gathered);
  }
  if (m.rotary()) B.memory(phase, "rope", rope_bytes(m, d), n, flags, 2);
  int32_t ring = -1;
  if (w.training.attention == Attention::kFlash) {
    if (c.cp > 1) {
      // Ring attention: cp steps, each on one chunk of keys and values while the next chunk
      // travels to the neighbour (Transformer Engine's p2p context parallelism).
      ring = B.collective(phase, 1, "cp_kv_ring", COTUNE_COLL_SEND_RECV, COTUNE_GROUP_CP, cp_chunk_bytes(c, d), c.tp,
                          c.cp, n * (c.cp - 1), qkv, flags);
      B.attention(phase, d.b, d.heads_local, d.s / c.cp, d.s / c.cp, op_head_dim(m), n * c.cp, flags, 3);
    } else {
      B.attention(phase, d.b, d.heads_local, d.s, d.s, op_head_dim(m), n, flags, 2);
    }
  } else {
    const double rows = d.b * d.heads_local * d.s;
    // Q, K, V into per-head batches and the context back: copies the fused kernels do not need.
    B.memory(phase, "attention_layout", d.T * (d.q_local + d.k_local + d.v_local + d.heads_local * m.v_head_dim()) *
                                            kAct * 2, n, flags, 4);
    B.gemm_bf16(phase, "attention_scores", rows, d.s, m.qk_head_dim(), n, flags);
    B.memory(phase, "softmax", rows * d.s * (drop ? 9 : 4), n, flags, drop ? 2 : 1);
    B.gemm_bf16(phase, "attention_values", rows, m.v_head_dim(), d.s, n, flags);
  }
  const int32_t proj = B.gemm(phase, "attention_proj", d.T, d.h, d.heads_local * m.v_head_dim(), n, fwd, flags);
  if (ring >= 0) B.depend(proj, ring);
  tp_combine(B, w, c, d, phase, n, flags, proj);
  B.memory(phase, "residual_layernorm", d.Tl * d.h * kAct * (drop ? 6.5 : 5), n, flags, 2);
  B.host(phase, "attention_module", n, 6, flags);
  B.end_block();
}

void attention_backward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, double n) {
  if (n <= 0) return;
  const Model& m = w.model;
  const bool drop = w.training.dropout;
  const auto dg = GemmRole::kDgrad, wg = GemmRole::kWgrad;
  B.begin_block(BW, n);
  B.memory(BW, "residual_layernorm_grad", d.Tl * d.h * kAct * (drop ? 7.5 : 6), n, 0, 2);
  const int32_t grad_gathered = tp_gather(B, w, c, d, BW, n);
  const double ctx = d.heads_local * m.v_head_dim();
  const int32_t proj = B.gemm(BW, "attention_proj_dgrad", d.T, ctx, d.h, n, dg);
  B.wait_next(grad_gathered);
  B.gemm(BW, "attention_proj_wgrad", ctx, d.h, d.T, n, wg);
  int32_t ring = -1;
  if (w.training.attention == Attention::kFlash) {
    if (c.cp > 1) {
      // Keys and values travel the ring again, and their gradients back to their owners.
      ring = B.collective(BW, 1, "cp_kv_ring_grad", COTUNE_COLL_SEND_RECV, COTUNE_GROUP_CP, 2 * cp_chunk_bytes(c, d),
                          c.tp, c.cp, n * (c.cp - 1), proj);
      B.attention(BW, d.b, d.heads_local, d.s / c.cp, d.s / c.cp, op_head_dim(m), n * c.cp, 0, 4);
    } else {
      B.attention(BW, d.b, d.heads_local, d.s, d.s, op_head_dim(m), n, 0, 3);
    }
  } else {
    const double rows = d.b * d.heads_local * d.s;
    B.memory(BW, "attention_layout_grad", d.T * (d.q_local + d.k_local + d.v_local + ctx) * kAct * 2, n, 0, 4);
    B.gemm_bf16(BW, "attention_values_dgrad", rows, d.s, m.v_head_dim(), n);
    B.gemm_bf16(BW, "attention_values_wgrad", rows, m.v_head_dim(), d.s, n);
    B.memory(BW, "softmax_grad", rows * d.s * (drop ? 11 : 6), n, 0, drop ? 2 : 1);
    B.gemm_bf16(BW, "attention_scores_dgrad", rows, m.qk_head_dim(), d.s, n);
    B.gemm_bf16(BW, "attention_scores_wgrad", rows, m.qk_head_dim(), d.s, n);
  }
  if (m.rotary()) {
    const int32_t rope = B.memory(BW, "rope_grad", rope_bytes(m, d), n, 0, 2);
    if (ring >= 0) B.depend(rope, ring);
  }
  const int32_t gathered = wgrad_input(B, c, d, n);
  int32_t dgrad = -1;  // the last data gradient: its reduce-scatter runs under the weight gradients
  if (m.mla.on()) {
    const Mla& a = m.mla;
    const double kv_up = d.heads_local * (a.qk_nope_head_dim + a.v_head_dim);
    B.gemm(BW, "kv_up_dgrad", d.T, a.kv_lora_rank, kv_up, n, dg);
    B.gemm(BW, "kv_up_wgrad", a.kv_lora_rank, kv_up, d.T, n, wg);
    B.memory(BW, "kv_norm_grad", d.T * a.kv_lora_rank * kAct * 3, n);
    B.gemm(BW, "kv_down_dgrad", d.T, d.h, a.kv_lora_rank + a.qk_rope_head_dim, n, dg);
    B.depend(B.gemm(BW, "kv_down_wgrad", d.h, a.kv_lora_rank + a.qk_rope_head_dim, d.T, n, wg), gathered);
    if (a.q_lora_rank > 0) {
      B.gemm(BW, "q_up_dgrad", d.T, a.q_lora_rank, d.q_local, n, dg);
      B.gemm(BW, "q_up_wgrad", a.q_lora_rank, d.q_local, d.T, n, wg);
      B.memory(BW, "q_norm_grad", d.T * a.q_lora_rank * kAct * 3, n);
      dgrad = B.gemm(BW, "q_down_dgrad", d.T, d.h, a.q_lora_rank, n, dg);
      B.gemm(BW, "q_down_wgrad", d.h, a.q_lora_rank, d.T, n, wg);
    } else {
      dgrad = B.gemm(BW, "q_proj_dgrad", d.T, d.h, d.q_local, n, dg);
      B.gemm(BW, "q_proj_wgrad", d.h, d.q_local, d.T, n, wg);
    }
  } else {
    const double qkv = d.q_local + d.k_local + d.v_local;
    dgrad = B.gemm(BW, "qkv_dgrad", d.T, d.h, qkv, n, dg);
    B.depend(B.gemm(BW, "qkv_wgrad", d.h, qkv, d.T, n, wg), gathered);
  }
  tp_combine_grad(B, w, c, d, n, dgrad);
  B.memory(BW, "layernorm_grad", d.Tl * d.h * kAct * 4, n);
  B.host(BW, "attention_module_grad", n, 6);
  B.end_block();
}

void dense_mlp_forward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, int32_t phase, double n,
                       uint32_t flags) {
  if (n <= 0) return;
  const Model& m = w.model;
  const double up = m.gated_mlp ? 2 : 1;
  B.begin_block(phase, n, flags);
  const int32_t gathered = tp_gather(B, w, c, d, phase, n, flags);
  B.gemm(phase, "mlp_up", d.T, up * d.ffn_local, d.h, n, GemmRole::kForward, flags);
  B.wait_next(gathered);
  B.memory(phase, "mlp_activation", d.T * d.ffn_local * kAct * (up + 1), n, flags);
  const int32_t down = B.gemm(phase, "mlp_down", d.T, d.h, d.ffn_local, n, GemmRole::kForward, flags);
  tp_combine(B, w, c, d, phase, n, flags, down);
  B.memory(phase, "residual", d.Tl * d.h * kAct * (w.training.dropout ? 4.5 : 3), n, flags);
  B.host(phase, "mlp_module", n, 3, flags);
  B.end_block();
}

void dense_mlp_backward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, double n) {
  if (n <= 0) return;
  const Model& m = w.model;
  const double up = m.gated_mlp ? 2 : 1;
  B.begin_block(BW, n);
  B.memory(BW, "residual_grad", d.Tl * d.h * kAct * (w.training.dropout ? 3.5 : 2), n);
  const int32_t grad_gathered = tp_gather(B, w, c, d, BW, n);
  B.gemm(BW, "mlp_down_dgrad", d.T, d.ffn_local, d.h, n, GemmRole::kDgrad);
  B.wait_next(grad_gathered);
  B.gemm(BW, "mlp_down_wgrad", d.ffn_local, d.h, d.T, n, GemmRole::kWgrad);
  B.memory(BW, "mlp_activation_grad", d.T * d.ffn_local * kAct * (2 * up + 1), n);
  const int32_t gathered = wgrad_input(B, c, d, n);
  const int32_t dgrad = B.gemm(BW, "mlp_up_dgrad", d.T, d.h, up * d.ffn_local, n, GemmRole::kDgrad);
  B.depend(B.gemm(BW, "mlp_up_wgrad", d.h, up * d.ffn_local, d.T, n, GemmRole::kWgrad), gathered);
  tp_combine_grad(B, w, c, d, n, dgrad);
  B.host(BW, "mlp_module_grad", n, 3);
  B.end_block();
}

namespace {

// The sizes of a MoE layer's routed part on one GPU.
struct MoeDims {
  double tokens_in = 0;  // tokens this GPU routes
  double routed = 0;     // their copies (top_k each, padded to the capacity): what the all-to-all moves
  double local = 0;      // experts on this GPU
  double per_expert = 0; // tokens each of them computes (with the expert-tensor-parallel group's)
  double on_gpu = 0;     // token copies computed here
  double ffn = 0;        // expert width on this GPU
  double up = 1;
};

MoeDims moe_dims(const Workload& w, const Config& c) {
  const Model& m = w.model;
  MoeDims e;
  e.tokens_in = moe_tokens_in(w, c);
  e.routed = e.tokens_in * m.top_k * (m.capacity_factor > 0 ? m.capacity_factor : 1.0);
  e.local = m.experts / c.ep;
  e.per_expert = tokens_per_local_expert(w, c);
  e.on_gpu = e.per_expert * e.local;
  e.ffn = m.expert_ffn_hidden / c.etp;
  e.up = m.gated_mlp ? 2 : 1;
  return e;
}

void shared_experts_forward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, int32_t phase, double n,
                            uint32_t flags) {
  const Model& m = w.model;
  if (m.shared_experts <= 0) return;
  const double up = m.gated_mlp ? 2 : 1;
  const double ffn = m.shared_experts * m.shared_expert_ffn_hidden / c.tp;
  const int32_t gathered = tp_gather(B, w, c, d, phase, n, flags);
  B.gemm(phase, "shared_up", d.T, up * ffn, d.h, n, GemmRole::kForward, flags);
  B.wait_next(gathered);
  B.memory(phase, "shared_activation", d.T * ffn * kAct * (up + 1), n, flags);
  const int32_t down = B.gemm(phase, "shared_down", d.T, d.h, ffn, n, GemmRole::kForward, flags);
  tp_combine(B, w, c, d, phase, n, flags, down);
}

void shared_experts_backward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, double n) {
  const Model& m = w.model;
  if (m.shared_experts <= 0) return;
  const double up = m.gated_mlp ? 2 : 1;
  const double ffn = m.shared_experts * m.shared_expert_ffn_hidden / c.tp;
  const int32_t grad_gathered = tp_gather(B, w, c, d, BW, n);
  B.gemm(BW, "shared_down_dgrad", d.T, ffn, d.h, n, GemmRole::kDgrad);
  B.wait_next(grad_gathered);
  B.gemm(BW, "shared_down_wgrad", ffn, d.h, d.T, n, GemmRole::kWgrad);
  B.memory(BW, "shared_activation_grad", d.T * ffn * kAct * (2 * up + 1), n);
  const int32_t dgrad = B.gemm(BW, "shared_up_dgrad", d.T, d.h, up * ffn, n, GemmRole::kDgrad);
  B.gemm(BW, "shared_up_wgrad", d.h, up * ffn, d.T, n, GemmRole::kWgrad);
  tp_combine_grad(B, w, c, d, n, dgrad);
}

// The routed experts of one GPU run as one grouped GEMM per matrix (TransformerEngine's grouped
// GEMM, Megatron-LM's --moe-grouped-gemm): a kernel family of its own, timed apart from dense GEMMs.
constexpr uint32_t kGrouped = COTUNE_OP_GROUPED;

// The stream of overlapped expert-parallel all-to-alls: beside the compute stream and the streams of
// pipeline, gradient and parameter traffic.
constexpr int32_t kExpertCommStream = 3;

// The chance that none of k distinct experts drawn evenly from `pool` is one of `held` of them:
// C(pool - held, k) / C(pool, k).
double miss_all(double pool, double held, double k) {
  double miss = 1;
  for (int i = 0; i < static_cast<int>(k) && miss > 0; ++i) miss *= std::max(0.0, pool - held - i) / (pool - i);
  return miss;
}

// The chance that a token's experts include one of a given part's, the experts spread evenly over
// `parts` parts (GPUs, NVLink domains) in order. Balanced routing (what the auxiliary loss aims at and
// what benchmarks force): top_k distinct experts drawn evenly from all, 1 - C(E - E/parts, k) / C(E, k).
// Group-limited routing picks group_top_k of the expert_groups groups, each by the score of its best
// top_k / group_top_k experts, and the token's top_k experts among theirs: each chosen group gives
// it about top_k / group_top_k of them, at least one. A part that holds whole groups is hit when one
// of them is chosen; a part within a group, when its group is chosen and one of the group's share
// of experts is the part's. Parts that cut groups otherwise are timed as without groups.
double part_hit(const Model& m, double parts) {
  if (parts <= 1) return 1;
  const double E = m.experts, k = m.top_k, G = m.expert_groups, chosen = m.group_top_k;
  if (G <= 1) return 1 - miss_all(E, E / parts, k);
  if (std::fmod(G, parts) == 0) return 1 - miss_all(G, G / parts, chosen);  // none of its groups chosen
  if (std::fmod(parts, G) == 0) {
    const double per_group = E / G, share = std::max(1.0, std::floor(k / chosen));
    return chosen / G * (1 - miss_all(per_group, E / parts, share));
  }
  return 1 - miss_all(E, E / parts, k);
}

// The expert-parallel all-to-all: ranks of one expert-parallel group sit etp apart (Megatron-LM's
// expert grid: etp, ep, expert-data-parallel). Overlapped (training.overlap_moe_comm), the
// all-to-alls of one micro-batch run while another micro-batch computes: on a stream of their own,
// waited for only when they take longer than the compute of the phase.
void ep_all_to_all(TraceBuilder& B, const Workload& w, const Config& c, const MoeDims& e, const Dims& d, int32_t phase,
                   const char* label, double n, uint32_t flags) {
  const int32_t stream = w.training.overlap_moe_comm ? kExpertCommStream : 0;
  if (w.training.moe_dispatcher == MoeDispatcher::kAllToAll) {
    B.collective(phase, stream, label, COTUNE_COLL_ALL_TO_ALL, COTUNE_GROUP_EP, e.routed * d.h * kAct, c.etp, c.ep, n,
                 -1, flags);
    return;
  }
  // The flex dispatchers send a token once to each GPU that holds one of its experts, and across
  // nodes once to each node, whose receiving GPU forwards it over NVLink (the combine returns the
  // same bytes, reduced where the experts ran).
  const Model& m = w.model;
  if (c.ep <= 1) return;
  const GroupPlacement p = place_group(c.etp, c.ep, B.hardware());
  const double rpd = p.ranks_per_domain, domains = c.ep / rpd;
  const double token = d.h * kAct;
  const double gpus_hit = c.ep * part_hit(m, c.ep);
  const double wire_intra = e.tokens_in * token * gpus_hit * (rpd - 1) / rpd;
  const double wire_inter = e.tokens_in * token * (domains - 1) * part_hit(m, domains);
  B.all_to_all(phase, stream, label, COTUNE_GROUP_EP, wire_intra, wire_inter, c.etp, c.ep, n, flags);
}

}  // namespace

void moe_mlp_forward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, int32_t phase, double n,
                     uint32_t flags) {
  if (n <= 0) return;
  const Model& m = w.model;
  const MoeDims e = moe_dims(w, c);
  const auto fwd = GemmRole::kForward;
  B.begin_block(phase, n, flags);
  B.gemm_bf16(phase, "router", e.tokens_in, m.experts, d.h, n, flags);
  B.memory(phase, "router_topk", e.tokens_in * m.experts * 4 * 4, n, flags, 6);  // softmax, top-k, aux loss
  B.memory(phase, "permute", e.routed * d.h * kAct * 2, n, flags, 3);
  ep_all_to_all(B, w, c, e, d, phase, "ep_dispatch", n, flags);
  if (c.etp > 1)
    B.collective(phase, 0, "etp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_EP, e.on_gpu * d.h * kAct, 1, c.etp, n,
                 -1, flags);
  const bool sort = e.local > 1 && c.ep > 1;  // tokens arrive by source rank; experts want them by expert
  if (sort) B.memory(phase, "sort_chunks", e.on_gpu * d.h * kAct * 2, n, flags, 2);
  B.gemm(phase, "expert_up", e.per_expert, e.up * e.ffn, d.h, n * e.local, fwd, flags | kGrouped, 1 / e.local);
  B.memory(phase, "expert_activation", e.on_gpu * e.ffn * kAct * (e.up + 1), n, flags);
  B.gemm(phase, "expert_down", e.per_expert, d.h, e.ffn, n * e.local, fwd, flags | kGrouped, 1 / e.local);
  if (c.etp > 1)
    B.collective(phase, 0, "etp_reducescatter", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_EP, e.on_gpu * d.h * kAct, 1,
                 c.etp, n, -1, flags);
  if (sort) B.memory(phase, "unsort_chunks", e.on_gpu * d.h * kAct * 2, n, flags, 2);
  ep_all_to_all(B, w, c, e, d, phase, "ep_combine", n, flags);
  B.memory(phase, "unpermute", e.routed * d.h * kAct * 2 + e.tokens_in * d.h * kAct, n, flags, 3);
  shared_experts_forward(B, w, c, d, phase, n, flags);
  B.memory(phase, "residual", d.Tl * d.h * kAct * (w.training.dropout ? 4.5 : 3), n, flags);
  B.host(phase, "moe_module", n, 10, flags);
  B.end_block();
}

void moe_mlp_backward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, double n) {
  if (n <= 0) return;
  const Model& m = w.model;
  const MoeDims e = moe_dims(w, c);
  const auto dg = GemmRole::kDgrad, wg = GemmRole::kWgrad;
  B.begin_block(BW, n);
  B.memory(BW, "residual_grad", d.Tl * d.h * kAct * (w.training.dropout ? 3.5 : 2), n);
  shared_experts_backward(B, w, c, d, n);
  B.memory(BW, "unpermute_grad", e.routed * d.h * kAct * 2 + e.tokens_in * d.h * kAct, n, 0, 3);
  ep_all_to_all(B, w, c, e, d, BW, "ep_combine_grad", n, 0);
  if (c.etp > 1)
    B.collective(BW, 0, "etp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_EP, e.on_gpu * d.h * kAct, 1, c.etp, n);
  const bool sort = e.local > 1 && c.ep > 1;
  if (sort) B.memory(BW, "sort_chunks_grad", e.on_gpu * d.h * kAct * 2, n, 0, 2);
  B.gemm(BW, "expert_down_dgrad", e.per_expert, e.ffn, d.h, n * e.local, dg, kGrouped, 1 / e.local);
  B.gemm(BW, "expert_down_wgrad", e.ffn, d.h, e.per_expert, n * e.local, wg, kGrouped, 1 / e.local);
  B.memory(BW, "expert_activation_grad", e.on_gpu * e.ffn * kAct * (2 * e.up + 1), n);
  B.gemm(BW, "expert_up_dgrad", e.per_expert, d.h, e.up * e.ffn, n * e.local, dg, kGrouped, 1 / e.local);
  B.gemm(BW, "expert_up_wgrad", d.h, e.up * e.ffn, e.per_expert, n * e.local, wg, kGrouped, 1 / e.local);
  if (c.etp > 1)
    B.collective(BW, 0, "etp_reducescatter", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_EP, e.on_gpu * d.h * kAct, 1,
                 c.etp, n);
  if (sort) B.memory(BW, "unsort_chunks_grad", e.on_gpu * d.h * kAct * 2, n, 0, 2);
  ep_all_to_all(B, w, c, e, d, BW, "ep_dispatch_grad", n, 0);
  B.memory(BW, "permute_grad", e.routed * d.h * kAct * 2, n, 0, 3);
  B.memory(BW, "router_grad", e.tokens_in * m.experts * 4 * 4, n, 0, 4);
  B.gemm_bf16(BW, "router_dgrad", e.tokens_in, d.h, m.experts, n);
  B.gemm_bf16(BW, "router_wgrad", d.h, m.experts, e.tokens_in, n, 0, 1, GemmRole::kWgrad);
  B.host(BW, "moe_module_grad", n, 10);
  B.end_block();
}

}  // namespace cotune_llm
