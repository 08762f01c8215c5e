// The step trace of one configuration (see lowering.hpp). Shapes follow Megatron-LM: column- and
// row-parallel linear layers, all-reduce (or all-gather / reduce-scatter with sequence
// parallelism) twice per layer and direction, explicit data- and weight-gradient GEMMs.
#include "lowering.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "estimate.hpp"

namespace cotune_llm {

GroupPlacement place_group(double stride, double size, const cotune_hardware& hw) {
  const double gpn = hw.gpus_per_node;
  GroupPlacement p{COTUNE_NET_NODE, size};
  const double span = stride * size;
  if (span <= gpn) return p;
  p.ranks_per_node = stride >= gpn ? 1 : std::min(size, std::floor(gpn / stride));
  const double nodes = std::ceil(span / gpn);
  p.level = (hw.nodes_per_island > 0 && nodes > hw.nodes_per_island) ? COTUNE_NET_ISLAND : COTUNE_NET_CLUSTER;
  return p;
}

namespace {

class Builder {
 public:
  Builder(std::vector<cotune_op>& ops, int32_t dtype) : ops_(ops), dtype_(dtype) { ops_.clear(); }

  int32_t gemm(int32_t phase, const char* label, double m, double n, double k, double count, uint32_t flags = 0) {
    cotune_op& o = next(phase, COTUNE_OP_GEMM, label, count, flags);
    o.m = m, o.n = n, o.k = k;
    o.dtype = dtype_;
    return last();
  }
  int32_t attention(int32_t phase, double b, double heads, double sq, double skv, double d, double count,
                    uint32_t flags = 0) {
    cotune_op& o = next(phase, COTUNE_OP_ATTENTION, flags & COTUNE_OP_RECOMPUTE ? "attention_recompute" : "attention",
                        count, flags | COTUNE_OP_CAUSAL);
    o.batch = b, o.heads = heads, o.seq_q = sq, o.seq_kv = skv, o.head_dim = d;
    o.dtype = dtype_ == COTUNE_DTYPE_FP8 ? COTUNE_DTYPE_BF16 : dtype_;
    return last();
  }
  int32_t memory(int32_t phase, const char* label, double bytes, double count, uint32_t flags = 0) {
    cotune_op& o = next(phase, COTUNE_OP_MEMORY, label, count, flags);
    o.bytes = bytes;
    o.dtype = COTUNE_DTYPE_BF16;
    return last();
  }
  // A collective over `size` ranks placed `stride` apart; across nodes it is hierarchical: the
  // ranks inside a node first, then one rank in ranks_per_node of the data across nodes.
  // Returns the last op emitted (or `depends_on` when the group has a single rank).
  int32_t collective(int32_t phase, int32_t stream, const char* label, int32_t coll, int32_t group, double bytes,
                     double stride, double size, const cotune_hardware& hw, double count, int32_t depends_on = -1,
                     uint32_t flags = 0) {
    if (size <= 1 || bytes <= 0 || count <= 0) return depends_on;
    const GroupPlacement p = place_group(stride, size, hw);
    int32_t dep = depends_on;
    if (p.level != COTUNE_NET_NODE && p.ranks_per_node > 1 && coll != COTUNE_COLL_SEND_RECV) {
      dep = one(phase, stream, label, coll, group, bytes, p.ranks_per_node, COTUNE_NET_NODE, count, dep, flags);
      return one(phase, stream, label, coll, group, bytes / p.ranks_per_node, size / p.ranks_per_node, p.level, count,
                 dep, flags);
    }
    return one(phase, stream, label, coll, group, bytes, coll == COTUNE_COLL_SEND_RECV ? 2 : size, p.level, count,
               dep, flags);
  }
  int32_t last() const { return static_cast<int32_t>(ops_.size()) - 1; }
  void depend(int32_t op, int32_t on) { ops_[op].depends_on = on; }

 private:
  cotune_op& next(int32_t phase, int32_t kind, const char* label, double count, uint32_t flags) {
    // Capacity is reserved at kMaxOps and the trace never needs more, so this never reallocates.
    if (ops_.size() >= kMaxOps) throw std::logic_error("llm space: step trace exceeds kMaxOps");
    ops_.emplace_back();
    cotune_op& o = ops_.back();
    o.struct_size = COTUNE_STRUCT_SIZE(cotune_op, label);
    o.kind = kind;
    o.phase = phase;
    o.stream = COTUNE_STREAM_COMPUTE;
    o.depends_on = -1;
    o.flags = flags;
    o.count = count;
    o.label = cotune_str{label, std::strlen(label)};
    return o;
  }
  int32_t one(int32_t phase, int32_t stream, const char* label, int32_t coll, int32_t group, double bytes, double size,
              int32_t level, double count, int32_t dep, uint32_t flags) {
    cotune_op& o = next(phase, COTUNE_OP_COLLECTIVE, label, count, flags);
    o.stream = stream;
    o.collective = coll;
    o.group = group;
    o.bytes = bytes;
    o.group_size = size;
    o.net_level = level;
    o.depends_on = dep;
    return last();
  }
  std::vector<cotune_op>& ops_;
  int32_t dtype_;
};

constexpr double kAct = 2;  // bytes per activation element (bf16)

struct Dims {
  double b, s, T, Tl, h, t, hd, heads_local, kvd, ffn_local, L, V;
};

// The forward of the transformer layers of this GPU (count = layers on the device).
void forward_layers(Builder& B, const Workload& w, const Config& c, const Dims& d, const cotune_hardware& hw,
                    int32_t phase, uint32_t flags) {
  const Model& m = w.model;
  const double n = d.L;
  const bool drop = w.training.dropout;
  const int32_t tp_out = c.sp ? COTUNE_COLL_REDUCE_SCATTER : COTUNE_COLL_ALL_REDUCE;
  const double act_bytes = d.T * d.h * kAct;

  B.memory(phase, "layernorm", d.Tl * d.h * kAct * 2, n, flags);
  if (c.sp) B.collective(phase, 0, "tp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_TP, act_bytes, 1, c.tp, hw, n, -1, flags);
  if (c.cp > 1)  // K and V of the whole sequence, exchanged while attention runs
    B.collective(phase, 1, "cp_kv_exchange", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_CP,
                 c.micro_batch * m.seq_len * 2 * m.kv_dim() / c.tp * kAct, c.tp, c.cp, hw, n, -1, flags);
  B.gemm(phase, "qkv", d.T, (d.h + 2 * d.kvd) / d.t, d.h, n, flags);
  if (w.training.attention == Attention::kFlash) {
    B.attention(phase, d.b, d.heads_local, d.s / c.cp, d.s, d.hd, n, flags);
  } else {
    const double rows = d.b * d.heads_local * d.s / c.cp;
    // Q, K, V into per-head batches and the context back: copies the fused kernels do not need.
    B.memory(phase, "attention_layout", d.T * (2 * d.h + 2 * d.kvd) / d.t * kAct * 2, n, flags);
    B.gemm(phase, "attention_scores", rows, d.s, d.hd, n, flags);
    B.memory(phase, "softmax", rows * d.s * (drop ? 9 : 4), n, flags);
    B.gemm(phase, "attention_values", rows, d.hd, d.s, n, flags);
  }
  B.gemm(phase, "attention_proj", d.T, d.h, d.h / d.t, n, flags);
  B.collective(phase, 0, c.sp ? "tp_reducescatter" : "tp_allreduce", tp_out, COTUNE_GROUP_TP, act_bytes, 1, c.tp, hw, n,
               -1, flags);
  B.memory(phase, "residual_layernorm", d.Tl * d.h * kAct * (drop ? 6.5 : 5), n, flags);
  if (c.sp) B.collective(phase, 0, "tp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_TP, act_bytes, 1, c.tp, hw, n, -1, flags);
  const double up = m.gated_mlp ? 2 : 1;
  if (!m.moe()) {
    B.gemm(phase, "mlp_up", d.T, up * d.ffn_local, d.h, n, flags);
    B.memory(phase, "mlp_activation", d.T * d.ffn_local * kAct * (up + 1), n, flags);
    B.gemm(phase, "mlp_down", d.T, d.h, d.ffn_local, n, flags);
  } else {
    const double local_experts = m.experts / c.ep;
    const double tokens_per_expert = d.T * m.top_k / local_experts;
    const double ffn = m.expert_ffn_hidden / d.t;
    B.gemm(phase, "router", d.Tl, m.experts, d.h, n, flags);
    const double routed = d.Tl * m.top_k * d.h * kAct;
    B.collective(phase, 0, "ep_dispatch", COTUNE_COLL_ALL_TO_ALL, COTUNE_GROUP_EP, routed, c.tp * c.cp, c.ep, hw, n, -1, flags);
    B.gemm(phase, "expert_up", tokens_per_expert, up * ffn, d.h, n * local_experts, flags);
    B.memory(phase, "expert_activation", d.T * m.top_k * ffn * kAct * (up + 1), n, flags);
    B.gemm(phase, "expert_down", tokens_per_expert, d.h, ffn, n * local_experts, flags);
    B.collective(phase, 0, "ep_combine", COTUNE_COLL_ALL_TO_ALL, COTUNE_GROUP_EP, routed, c.tp * c.cp, c.ep, hw, n, -1, flags);
  }
  B.collective(phase, 0, c.sp ? "tp_reducescatter" : "tp_allreduce", tp_out, COTUNE_GROUP_TP, act_bytes, 1, c.tp, hw, n,
               -1, flags);
  B.memory(phase, "residual", d.Tl * d.h * kAct * (drop ? 4.5 : 3), n, flags);
}

// With sequence parallelism the input of a column-parallel layer is gathered again for its weight
// gradient (Megatron-LM does not keep the gathered copy), overlapped with the data gradient.
int32_t wgrad_input(Builder& B, const Config& c, double act_bytes, const cotune_hardware& hw, double n) {
  if (!c.sp) return -1;
  return B.collective(COTUNE_PHASE_BACKWARD, 1, "tp_allgather_wgrad", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_TP, act_bytes,
                      1, c.tp, hw, n);
}

// The backward of the transformer layers (data- and weight-gradient GEMMs, in reverse order).
void backward_layers(Builder& B, const Workload& w, const Config& c, const Dims& d, const cotune_hardware& hw) {
  const Model& m = w.model;
  const int32_t P = COTUNE_PHASE_BACKWARD;
  const double n = d.L;
  const bool drop = w.training.dropout;
  const double act_bytes = d.T * d.h * kAct;
  const int32_t tp_in = c.sp ? COTUNE_COLL_REDUCE_SCATTER : COTUNE_COLL_ALL_REDUCE;
  const char* tp_in_label = c.sp ? "tp_reducescatter" : "tp_allreduce";
  const double up = m.gated_mlp ? 2 : 1;

  B.memory(P, "residual_grad", d.Tl * d.h * kAct * (drop ? 3.5 : 2), n);
  if (c.sp) B.collective(P, 0, "tp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_TP, act_bytes, 1, c.tp, hw, n);
  if (!m.moe()) {
    B.gemm(P, "mlp_down_dgrad", d.T, d.ffn_local, d.h, n);
    B.gemm(P, "mlp_down_wgrad", d.ffn_local, d.h, d.T, n);
    B.memory(P, "mlp_activation_grad", d.T * d.ffn_local * kAct * (2 * up + 1), n);
    const int32_t gathered = wgrad_input(B, c, act_bytes, hw, n);
    B.gemm(P, "mlp_up_dgrad", d.T, d.h, up * d.ffn_local, n);
    B.depend(B.gemm(P, "mlp_up_wgrad", d.h, up * d.ffn_local, d.T, n), gathered);
  } else {
    const double local_experts = m.experts / c.ep;
    const double tokens_per_expert = d.T * m.top_k / local_experts;
    const double ffn = m.expert_ffn_hidden / d.t;
    const double routed = d.Tl * m.top_k * d.h * kAct;
    B.collective(P, 0, "ep_combine_grad", COTUNE_COLL_ALL_TO_ALL, COTUNE_GROUP_EP, routed, c.tp * c.cp, c.ep, hw, n);
    B.gemm(P, "expert_down_dgrad", tokens_per_expert, ffn, d.h, n * local_experts);
    B.gemm(P, "expert_down_wgrad", ffn, d.h, tokens_per_expert, n * local_experts);
    B.memory(P, "expert_activation_grad", d.T * m.top_k * ffn * kAct * (2 * up + 1), n);
    B.gemm(P, "expert_up_dgrad", tokens_per_expert, d.h, up * ffn, n * local_experts);
    B.gemm(P, "expert_up_wgrad", d.h, up * ffn, tokens_per_expert, n * local_experts);
    B.collective(P, 0, "ep_dispatch_grad", COTUNE_COLL_ALL_TO_ALL, COTUNE_GROUP_EP, routed, c.tp * c.cp, c.ep, hw, n);
    B.gemm(P, "router_dgrad", d.Tl, d.h, m.experts, n);
  }
  B.collective(P, 0, tp_in_label, tp_in, COTUNE_GROUP_TP, act_bytes, 1, c.tp, hw, n);
  B.memory(P, "residual_layernorm_grad", d.Tl * d.h * kAct * (drop ? 7.5 : 6), n);
  if (c.sp) B.collective(P, 0, "tp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_TP, act_bytes, 1, c.tp, hw, n);
  B.gemm(P, "attention_proj_dgrad", d.T, d.h / d.t, d.h, n);
  B.gemm(P, "attention_proj_wgrad", d.h / d.t, d.h, d.T, n);
  if (w.training.attention == Attention::kFlash) {
    B.attention(P, d.b, d.heads_local, d.s / c.cp, d.s, d.hd, n);
  } else {
    const double rows = d.b * d.heads_local * d.s / c.cp;
    B.memory(P, "attention_layout_grad", d.T * (2 * d.h + 2 * d.kvd) / d.t * kAct * 2, n);
    B.gemm(P, "attention_values_dgrad", rows, d.s, d.hd, n);
    B.gemm(P, "attention_values_wgrad", rows, d.hd, d.s, n);
    B.memory(P, "softmax_grad", rows * d.s * (drop ? 11 : 6), n);
    B.gemm(P, "attention_scores_dgrad", rows, d.hd, d.s, n);
    B.gemm(P, "attention_scores_wgrad", rows, d.hd, d.s, n);
  }
  if (c.cp > 1)  // gradients of K and V go back to their owners
    B.collective(P, 1, "cp_kv_grad_exchange", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_CP,
                 c.micro_batch * m.seq_len * 2 * m.kv_dim() / c.tp * kAct, c.tp, c.cp, hw, n);
  const int32_t gathered = wgrad_input(B, c, act_bytes, hw, n);
  B.gemm(P, "qkv_dgrad", d.T, d.h, (d.h + 2 * d.kvd) / d.t, n);
  B.depend(B.gemm(P, "qkv_wgrad", d.h, (d.h + 2 * d.kvd) / d.t, d.T, n), gathered);
  B.collective(P, 0, tp_in_label, tp_in, COTUNE_GROUP_TP, act_bytes, 1, c.tp, hw, n);
  B.memory(P, "layernorm_grad", d.Tl * d.h * kAct * 4, n);
}

}  // namespace

void lower_config(const Workload& w, const Config& c, const cotune_hardware& hw, std::vector<cotune_op>& ops,
                  cotune_trace& trace) {
  const Model& m = w.model;
  const Shape shape = shape_of(w, c);
  Dims d;
  d.b = c.micro_batch;
  d.s = m.seq_len;
  d.T = shape.tokens;
  d.t = c.tp;
  d.Tl = c.sp ? d.T / d.t : d.T;
  d.h = m.hidden;
  d.hd = m.head_dim();
  d.heads_local = m.heads / c.tp;
  d.kvd = m.kv_dim();
  d.ffn_local = m.ffn_hidden / c.tp;
  d.L = shape.layers_per_device;
  d.V = m.vocab;

  Builder B(ops, w.training.dtype);
  const int32_t F = COTUNE_PHASE_FORWARD, BW = COTUNE_PHASE_BACKWARD, S = COTUNE_PHASE_STEP;
  const double act_bytes = d.T * d.h * kAct;
  // Megatron-LM's scatter/gather optimisation: each tensor-parallel rank sends 1/tp of the
  // activations across the pipeline link and the stage re-gathers them over NVLink.
  const double p2p_bytes = d.T * d.h * kAct / d.t;
  const double pp_stride = c.tp * c.cp * c.dp;
  const double grad_stride = c.tp;  // data- and context-parallel ranks share the same weights
  const double grad_ranks = c.dp * c.cp;
  const double layer_params = shape.dense_params_per_gpu_layer + shape.expert_params_per_gpu_layer;

  // ---- forward of one micro-batch (all virtual chunks of the last stage)
  if (c.pp > 1) {
    B.collective(F, 0, "pp_recv_activations", COTUNE_COLL_SEND_RECV, COTUNE_GROUP_PP, p2p_bytes, pp_stride, 2, hw, c.vpp);
    if (!c.sp)
      B.collective(F, 0, "pp_gather_activations", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_PP, act_bytes, 1, c.tp, hw, c.vpp);
  } else {
    B.memory(F, "embedding", d.T * d.h * kAct * 2, 1);
    B.collective(F, 0, c.sp ? "tp_reducescatter" : "tp_allreduce",
                 c.sp ? COTUNE_COLL_REDUCE_SCATTER : COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_TP, act_bytes, 1, c.tp, hw, 1);
  }
  if (c.zero >= 3)  // FSDP gathers each layer's weights ahead of use
    B.collective(F, 1, "fsdp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP, layer_params * kWeightBytes * grad_ranks,
                 grad_stride, grad_ranks, hw, d.L);
  forward_layers(B, w, c, d, hw, F, 0);
  B.memory(F, "final_layernorm", d.Tl * d.h * kAct * 2, 1);
  if (c.sp) B.collective(F, 0, "tp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_TP, act_bytes, 1, c.tp, hw, 1);
  B.gemm(F, "output_layer", d.T, d.V / d.t, d.h, 1);
  B.memory(F, "cross_entropy", d.T * d.V / d.t * 4 * 2, 1);

  // ---- backward of one micro-batch, with recomputation
  B.memory(BW, "cross_entropy_grad", d.T * d.V / d.t * 4 * 2, 1);
  B.gemm(BW, "output_layer_dgrad", d.T, d.h, d.V / d.t, 1);
  B.gemm(BW, "output_layer_wgrad", d.h, d.V / d.t, d.T, 1);
  B.collective(BW, 0, c.sp ? "tp_reducescatter" : "tp_allreduce",
               c.sp ? COTUNE_COLL_REDUCE_SCATTER : COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_TP, act_bytes, 1, c.tp, hw, 1);
  if (c.zero >= 3)
    B.collective(BW, 1, "fsdp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP, layer_params * kWeightBytes * grad_ranks,
                 grad_stride, grad_ranks, hw, d.L);
  if (c.recompute == kRecomputeFull) {
    forward_layers(B, w, c, d, hw, BW, COTUNE_OP_RECOMPUTE);
  } else if (c.recompute == kRecomputeSelective) {
    if (w.training.attention == Attention::kFlash) {
      B.attention(BW, d.b, d.heads_local, d.s / c.cp, d.s, d.hd, d.L, COTUNE_OP_RECOMPUTE);
    } else {
      const double rows = d.b * d.heads_local * d.s / c.cp;
      B.gemm(BW, "attention_scores_recompute", rows, d.s, d.hd, d.L, COTUNE_OP_RECOMPUTE);
      B.memory(BW, "softmax_recompute", rows * d.s * (w.training.dropout ? 9 : 4), d.L, COTUNE_OP_RECOMPUTE);
      B.gemm(BW, "attention_values_recompute", rows, d.hd, d.s, d.L, COTUNE_OP_RECOMPUTE);
    }
  }
  backward_layers(B, w, c, d, hw);
  if (c.zero >= 3)  // each layer's gradients are reduce-scattered as soon as they are ready
    B.collective(BW, 1, "fsdp_reducescatter", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_DP,
                 layer_params * kGradBytes * grad_ranks, grad_stride, grad_ranks, hw, d.L);
  if (c.pp > 1) {
    B.collective(BW, 0, "pp_send_gradients", COTUNE_COLL_SEND_RECV, COTUNE_GROUP_PP, p2p_bytes, pp_stride, 2, hw, c.vpp);
  } else
    B.memory(BW, "embedding_grad", d.T * d.h * kAct * 3, 1);

  // ---- once per step: gradient synchronisation, optimizer, parameter gather
  const double dense_params = d.L * shape.dense_params_per_gpu_layer + shape.embedding_params_per_gpu * (c.pp == 1 && !m.tie_embeddings ? 2 : 1);
  const double expert_params = d.L * shape.expert_params_per_gpu_layer;
  const double expert_ranks = std::max(1.0, grad_ranks / c.ep);
  const int32_t grad_stream = w.training.overlap_grad_reduce ? 1 : 0;
  int32_t synced = -1;
  double optimizer_params = dense_params + expert_params;
  if (c.zero == 0) {
    synced = B.collective(S, grad_stream, "dp_grad_allreduce", COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_DP,
                          dense_params * kGradBytes, grad_stride, grad_ranks, hw, 1);
    const int32_t e = B.collective(S, grad_stream, "dp_expert_grad_allreduce", COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_DP,
                                   expert_params * kGradBytes, grad_stride * c.ep, expert_ranks, hw, 1, synced);
    synced = e;
  } else {
    if (c.zero <= 2) {
      synced = B.collective(S, grad_stream, "dp_grad_reducescatter", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_DP,
                            dense_params * kGradBytes, grad_stride, grad_ranks, hw, 1);
      synced = B.collective(S, grad_stream, "dp_expert_grad_reducescatter", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_DP,
                            expert_params * kGradBytes, grad_stride * c.ep, expert_ranks, hw, 1, synced);
    }
    optimizer_params = dense_params / grad_ranks + expert_params / expert_ranks;
  }
  if (c.pp > 1 && m.tie_embeddings)  // the first and last stages share the embedding's gradient
    B.collective(S, 0, "embedding_grad_allreduce", COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_PP,
                 shape.embedding_params_per_gpu * kGradBytes, pp_stride * (c.pp - 1), 2, hw, 1);
  // Adam reads fp32 master weights, both moments and the gradient, writes them back and the bf16 copy.
  const int32_t opt = B.memory(S, "adam", optimizer_params * 30, 1, COTUNE_OP_OPTIMIZER);
  ops[opt].depends_on = synced;
  if (c.zero == 1 || c.zero == 2) {
    B.collective(S, 0, "dp_param_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP, dense_params * kWeightBytes,
                 grad_stride, grad_ranks, hw, 1);
    B.collective(S, 0, "dp_expert_param_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP,
                 expert_params * kWeightBytes, grad_stride * c.ep, expert_ranks, hw, 1);
  }

  trace = cotune_trace{};
  trace.struct_size = COTUNE_STRUCT_SIZE(cotune_trace, hardware);
  trace.ops = ops.data();
  trace.num_ops = ops.size();
  trace.op_stride = sizeof(cotune_op);
  trace.schedule = c.vpp > 1 ? COTUNE_SCHEDULE_INTERLEAVED : COTUNE_SCHEDULE_1F1B;
  trace.pipeline_stages = static_cast<int32_t>(c.pp);
  trace.virtual_stages = static_cast<int32_t>(c.vpp);
  trace.micro_batches = static_cast<int32_t>(shape.micro_batches);
  trace.tokens_per_step = w.training.global_batch * m.seq_len;
  trace.model_flops_per_gpu = model_flops_per_gpu(w, c);
  trace.gpus = c.gpus;
  trace.memory = memory_estimate(w, c);
  trace.hardware = hw;
  trace.hardware.nodes = static_cast<int32_t>(std::ceil(c.gpus / hw.gpus_per_node));
}

}  // namespace cotune_llm
