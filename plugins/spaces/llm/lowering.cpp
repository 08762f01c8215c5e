// The step trace of one configuration (see lowering.hpp): pipeline transfers, embedding, the
// layers of the busiest pipeline rank (layer_ops.hpp), output layer and loss, recomputation, FSDP
// gathers, and the step phase (gradient synchronisation, optimizer, parameter gather).
#include "lowering.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "estimate.hpp"
#include "layer_ops.hpp"
#include "per_op_recompute.hpp"

namespace cotune_llm {
namespace {

constexpr int32_t F = COTUNE_PHASE_FORWARD, BW = COTUNE_PHASE_BACKWARD, S = COTUNE_PHASE_STEP;
// Communication streams: 1 carries tensor/context-parallel overlap and gradient reduction, 2 the
// FSDP weight traffic and the parameter gather, so that neither queues behind the other.
constexpr int32_t kCommStream = 1, kShardStream = 2;

// The layers of each kind on the lowered rank.
struct Counts {
  double attention = 0;  // decoder and MTP layers
  double dense_mlp = 0;
  double moe_mlp = 0;
  double mtp = 0;
  bool embedding = false, output = false;
};

Counts counts_of(const Model& m, const RankLayers& r) {
  Counts n;
  n.attention = r.layers + r.mtp_layers;
  n.moe_mlp = r.moe_layers + (m.moe() ? r.mtp_layers : 0);
  n.dense_mlp = n.attention - n.moe_mlp;
  n.mtp = r.mtp_layers;
  n.embedding = r.embedding;
  n.output = r.output;
  return n;
}

// FSDP (ZeRO-3) gathers each layer's weights ahead of use: the first layer's gather waits, the rest
// are prefetched under compute on their own stream.
void fsdp_gather(TraceBuilder& B, const Config& c, const Shape& s, const Counts& n, int32_t phase) {
  if (c.zero < 3) return;
  const double dense = (n.attention * s.attention_params + n.dense_mlp * s.dense_mlp_params +
                        n.moe_mlp * s.moe_dense_params) / std::max(1.0, n.attention);
  const double grad_stride = c.tp, grad_ranks = c.dp * c.cp;
  B.collective(phase, 0, "fsdp_allgather_first", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP, dense * kWeightBytes,
               grad_stride, grad_ranks, 1);
  B.collective(phase, kShardStream, "fsdp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP, dense * kWeightBytes,
               grad_stride, grad_ranks, n.attention - 1);
  if (n.moe_mlp > 0)
    B.collective(phase, kShardStream, "fsdp_expert_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP,
                 s.expert_params * kWeightBytes, c.etp * c.ep, s.expert_replicas, n.moe_mlp);
}

// ... and reduce-scatters each layer's gradients as soon as they are ready; the last one waits.
void fsdp_reduce(TraceBuilder& B, const Workload& w, const Config& c, const Shape& s, const Counts& n, bool frozen) {
  if (c.zero < 3 || frozen) return;
  const double dense = (n.attention * s.attention_params + n.dense_mlp * s.dense_mlp_params +
                        n.moe_mlp * s.moe_dense_params) / std::max(1.0, n.attention);
  const double grad_stride = c.tp, grad_ranks = c.dp * c.cp;
  B.collective(BW, kShardStream, "fsdp_reducescatter", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_DP,
               dense * grad_bytes(w.training), grad_stride, grad_ranks, n.attention - 1);
  if (n.moe_mlp > 0)
    B.collective(BW, kShardStream, "fsdp_expert_reducescatter", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_DP,
                 s.expert_params * grad_bytes(w.training), c.etp * c.ep, s.expert_replicas, n.moe_mlp);
  B.collective(BW, 0, "fsdp_reducescatter_last", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_DP, dense * grad_bytes(w.training),
               grad_stride, grad_ranks, 1);
}

void forward_layers(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, const Counts& n, int32_t phase,
                    uint32_t flags) {
  attention_forward(B, w, c, d, phase, n.attention, flags);
  dense_mlp_forward(B, w, c, d, phase, n.dense_mlp, flags);
  moe_mlp_forward(B, w, c, d, phase, n.moe_mlp, flags);
}

// The loss's traffic per logit (vocabulary-parallel cross entropy; bytes, then kernels). Megatron-Core
// unfused: the logits cast to fp32 (2 + 4 bytes), their max (4), the max subtracted (8), exp (8), the
// sum (4), the softmax it keeps (8); backward scales it by the loss gradient (8) and hands the output
// layer bf16 (4 + 2). PyTorch's eager cross entropy makes about as many passes. Fused
// (--cross-entropy-loss-fusion, torch.compile): the bf16 logits read for max and sum and again to
// write the gradient in bf16 (2 + 2 + 2), which backward scales (4).
struct LossTraffic {
  double forward_bytes, forward_kernels, backward_bytes, backward_kernels;
};
LossTraffic loss_traffic(const Workload& w) {
  if (w.training.cross_entropy_fusion || w.training.kernels == Kernels::kCompiled) return {6, 2, 4, 1};
  return {38, 7, 14, 3};
}

void output_forward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, const Counts& n) {
  const Model& m = w.model;
  if (n.mtp > 0) {  // each MTP layer joins the decoder's output with the next token's embedding
    B.memory(F, "mtp_norms", d.Tl * d.h * kAct * 4, n.mtp, 0, 3);
    B.gemm(F, "mtp_projection", d.T, d.h / c.tp, 2 * d.h, n.mtp, GemmRole::kForward);
  }
  const double heads = 1 + n.mtp;  // output layers: the model's and one per MTP layer
  B.memory(F, "final_layernorm", d.Tl * d.h * kAct * 2, heads);
  if (c.sp) B.collective(F, 0, "tp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_TP, d.T * d.h * kAct, 1, c.tp, heads);
  // The output layer is Megatron-LM's own column-parallel linear: bf16 even in FP8 training.
  B.gemm_bf16(F, "output_layer", d.T, m.vocab / c.tp, d.h, heads);
  const LossTraffic loss = loss_traffic(w);
  B.memory_as_given(F, "cross_entropy", d.T * m.vocab / c.tp * loss.forward_bytes, heads, loss.forward_kernels);
  // Vocabulary-parallel cross entropy: the logits' max, the sum and the target logit across ranks.
  B.collective(F, 0, "tp_cross_entropy", COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_TP, d.T * 4 * 3, 1, c.tp, heads);
}

void output_backward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, const Counts& n) {
  const Model& m = w.model;
  const double heads = 1 + n.mtp;
  const LossTraffic loss = loss_traffic(w);
  B.memory_as_given(BW, "cross_entropy_grad", d.T * m.vocab / c.tp * loss.backward_bytes, heads, loss.backward_kernels);
  B.gemm_bf16(BW, "output_layer_dgrad", d.T, d.h, m.vocab / c.tp, heads);
  B.gemm_bf16(BW, "output_layer_wgrad", d.h, m.vocab / c.tp, d.T, heads, 0, 1, GemmRole::kWgrad);
  B.collective(BW, 0, c.sp ? "tp_reducescatter" : "tp_allreduce",
               c.sp ? COTUNE_COLL_REDUCE_SCATTER : COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_TP, d.T * d.h * kAct, 1, c.tp,
               heads);
  if (n.mtp > 0) {
    B.gemm(BW, "mtp_projection_dgrad", d.T, 2 * d.h, d.h / c.tp, n.mtp, GemmRole::kDgrad);
    B.gemm(BW, "mtp_projection_wgrad", 2 * d.h, d.h / c.tp, d.T, n.mtp, GemmRole::kWgrad);
  }
}

void recompute(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, const Counts& n) {
  if (c.recompute == kRecomputeFull) {
    forward_layers(B, w, c, d, n, BW, COTUNE_OP_RECOMPUTE);
    return;
  }
  if (c.recompute != kRecomputeSelective) return;
  if (per_op_selective(w, c)) {
    per_op_recompute(B, w, c, d, n.attention, n.dense_mlp, n.moe_mlp);
    return;
  }
  const Model& m = w.model;
  const uint32_t rebuilt = c.recompute_modules;
  const uint32_t R = COTUNE_OP_RECOMPUTE;
  if (rebuilt & kLayernorm) B.memory(BW, "layernorm_recompute", d.Tl * d.h * kAct * 2 * 2, n.attention, R);
  if ((rebuilt & kMlaUpProj) && m.mla.on()) {
    B.begin_block(BW, n.attention, R);
    if (m.mla.q_lora_rank > 0) B.gemm(BW, "q_up_recompute", d.T, d.q_local, m.mla.q_lora_rank, n.attention, GemmRole::kForward, R);
    B.gemm(BW, "kv_up_recompute", d.T, d.heads_local * (m.mla.qk_nope_head_dim + m.mla.v_head_dim), m.mla.kv_lora_rank,
           n.attention, GemmRole::kForward, R);
    B.end_block();
  }
  if (rebuilt & kCoreAttn) {
    const double hd = (m.qk_head_dim() + m.v_head_dim()) / 2;
    if (w.training.attention == Attention::kFlash) {
      // The fused kernel keeps no score matrix: recomputing the core reruns the kernel.
      const double chunks = c.cp > 1 ? c.cp : 1;
      B.attention(BW, d.b, d.heads_local, d.s / chunks, d.s / chunks, hd, n.attention * chunks, R, 2);
    } else {
      const double rows = d.b * d.heads_local * d.s;
      B.gemm_bf16(BW, "attention_scores_recompute", rows, d.s, m.qk_head_dim(), n.attention, R);
      B.memory(BW, "softmax_recompute", rows * d.s * (w.training.dropout ? 9 : 4), n.attention, R);
      B.gemm_bf16(BW, "attention_values_recompute", rows, m.v_head_dim(), d.s, n.attention, R);
    }
  }
  if (rebuilt & kMlp) dense_mlp_forward(B, w, c, d, BW, n.dense_mlp, R);
  if (rebuilt & kMoe) {
    moe_mlp_forward(B, w, c, d, BW, n.moe_mlp, R);
  } else {
    if ((rebuilt & kMoeAct) && n.moe_mlp > 0) {
      const double routed = tokens_per_local_expert(w, c) * m.experts / c.ep;
      B.memory(BW, "expert_activation_recompute", routed * m.expert_ffn_hidden / c.etp * kAct * ((m.gated_mlp ? 2 : 1) + 1),
               n.moe_mlp, R);
    }
    if ((rebuilt & kSharedExperts) && n.moe_mlp > 0 && m.shared_experts > 0) {
      const double up = m.gated_mlp ? 2 : 1, ffn = m.shared_experts * m.shared_expert_ffn_hidden / c.tp;
      B.begin_block(BW, n.moe_mlp, R);
      B.gemm(BW, "shared_up_recompute", d.T, up * ffn, d.h, n.moe_mlp, GemmRole::kForward, R);
      B.memory(BW, "shared_activation_recompute", d.T * ffn * kAct * (up + 1), n.moe_mlp, R);
      B.end_block();
    }
  }
}

// Activations to the next pipeline rank and gradients back, per virtual chunk. Megatron-LM's
// scatter/gather optimisation: each tensor-parallel rank sends 1/tp of the activations across the
// pipeline link and the stage re-gathers them over NVLink (with sp the shard is what it holds).
// The interleaved schedule overlaps the transfers with compute; 1F1B waits for them.
void pipeline_transfer(TraceBuilder& B, const Config& c, const Dims& d, double rank, int32_t phase) {
  if (c.pp <= 1) return;
  const bool forward = phase == F;
  const double from_prev = c.vpp - (rank == 0 ? 1 : 0);
  const double to_next = c.vpp - (rank == c.pp - 1 ? 1 : 0);
  const double receives = forward ? from_prev : to_next, sends = forward ? to_next : from_prev;
  const double bytes = d.T * d.h * kAct / c.tp;
  const double stride = c.tp * c.cp * c.dp;
  const int32_t stream = c.vpp > 1 ? kCommStream : 0;
  B.collective(phase, stream, forward ? "pp_recv_activations" : "pp_recv_gradients", COTUNE_COLL_SEND_RECV,
               COTUNE_GROUP_PP, bytes, stride, 2, receives);
  if (!c.sp)
    B.collective(phase, 0, "pp_gather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_PP, d.T * d.h * kAct, 1, c.tp, receives);
  B.collective(phase, stream, forward ? "pp_send_activations" : "pp_send_gradients", COTUNE_COLL_SEND_RECV,
               COTUNE_GROUP_PP, bytes, stride, 2, sends);
}

// Megatron-LM's gradient buckets: max(40M, 1M x dp) parameters each unless --ddp-bucket-size says
// otherwise (DistributedDataParallelConfig.bucket_size; larger data-parallel groups get larger
// buckets so that each collective stays bandwidth-bound). The last bucket holds the first layers'
// leftover parameters (at most a bucket's worth: a full bucket is the bound taken here) and the
// embedding, which no bucket splits.
double bucket_params(double data_parallel) { return std::max(40e6, 1e6 * data_parallel); }

// The parameters whose gradients backward produces last on this rank, and whose reduction therefore
// cannot overlap it: the input embedding's (the first weights the forward uses are the last the
// backward reaches) and the bucket of the first layers before it. Symmetrically, the overlapped
// parameter gather has no forward to hide under for the same weights: the next step needs them
// first. At most every dense parameter of the rank.
double unhidden_params(const Shape& s, const RankLayers& r, const RankParams& p, double data_parallel) {
  return std::min(p.dense, (r.embedding ? s.embedding_params : 0) + bucket_params(data_parallel));
}

void step_phase(TraceBuilder& B, const Workload& w, const Config& c, const Shape& s, const Counts& n,
                const RankLayers& r) {
  const Model& m = w.model;
  const RankParams p = rank_params(w, s, r);
  const double grad_stride = c.tp;  // data- and context-parallel ranks share the same weights
  const double grad_ranks = s.dense_replicas;
  const double expert_stride = c.etp * c.ep, expert_ranks = s.expert_replicas;
  const bool overlap = w.training.overlap_grad_reduce;
  const int32_t grad_stream = overlap ? kCommStream : 0;
  int32_t synced = -1;
  double optimizer_params = p.dense + p.expert;
  if (w.training.lora) {
    // The adapters' few million parameters: their sync and update cost next to nothing.
    B.host(S, "adapter_update", 1, 4, COTUNE_OP_OPTIMIZER);
    return;
  }
  // With the reduction overlapped, what backward produces last is reduced after it (compute stream).
  const double tail = overlap && grad_ranks > 1 ? unhidden_params(s, r, p, grad_ranks) : 0;
  if (c.zero == 0) {
    synced = B.collective(S, grad_stream, "dp_grad_allreduce", COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_DP,
                          (p.dense - tail) * grad_bytes(w.training), grad_stride, grad_ranks, 1);
    synced = B.collective(S, grad_stream, "dp_expert_grad_allreduce", COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_DP,
                          p.expert * grad_bytes(w.training), expert_stride, expert_ranks, 1, synced);
    if (tail > 0)  // after the overlapped ones, on the compute stream: nothing left to hide under
      synced = B.collective(S, 0, "dp_grad_allreduce_last_bucket", COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_DP,
                            tail * grad_bytes(w.training), grad_stride, grad_ranks, 1, synced);
  } else {
    if (c.zero <= 2) {
      synced = B.collective(S, grad_stream, "dp_grad_reducescatter", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_DP,
                            (p.dense - tail) * grad_bytes(w.training), grad_stride, grad_ranks, 1);
      synced = B.collective(S, grad_stream, "dp_expert_grad_reducescatter", COTUNE_COLL_REDUCE_SCATTER,
                            COTUNE_GROUP_DP, p.expert * grad_bytes(w.training), expert_stride, expert_ranks, 1, synced);
      if (tail > 0)  // after the overlapped ones, on the compute stream: nothing left to hide under
        synced = B.collective(S, 0, "dp_grad_reducescatter_last_bucket", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_DP,
                              tail * grad_bytes(w.training), grad_stride, grad_ranks, 1, synced);
    }
    optimizer_params = p.dense / grad_ranks + p.expert / expert_ranks;
  }
  if (c.pp > 1 && m.tie_embeddings && (r.embedding || r.output))  // first and last stage share the embedding's gradient
    B.collective(S, 0, "embedding_grad_allreduce", COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_PP,
                 s.embedding_params * grad_bytes(w.training), c.tp * c.cp * c.dp * (c.pp - 1), 2, 1);
  // Gradient clipping reads every gradient once; Adam reads fp32 master weights, both moments and
  // the gradient, writes them back and the bf16 copy (multi-tensor kernels, a few per layer).
  B.memory(S, "grad_norm", optimizer_params * grad_bytes(w.training), 1, COTUNE_OP_OPTIMIZER, 2 + n.attention);
  const int32_t opt = B.memory(S, "adam", optimizer_params * 30, 1, COTUNE_OP_OPTIMIZER, 2 + 2 * n.attention);
  B.depend(opt, synced);
  if (c.zero == 1 || c.zero == 2) {
    // The updated shards come back to every rank; overlapped with the next step's forward when the
    // gradient reduction is overlapped too (Megatron-LM's overlap_param_gather).
    const int32_t stream = overlap ? kShardStream : 0;
    B.collective(S, stream, "dp_param_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP,
                 (p.dense - tail) * kWeightBytes, grad_stride, grad_ranks, 1);
    if (tail > 0)
      B.collective(S, 0, "dp_param_allgather_first_bucket", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP,
                   tail * kWeightBytes, grad_stride, grad_ranks, 1);
    B.collective(S, stream, "dp_expert_param_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP,
                 p.expert * kWeightBytes, expert_stride, expert_ranks, 1);
  }
}

}  // namespace

// Eager PyTorch runs about three kernels, moving about three times the bytes, for each elementwise
// kernel Transformer Engine fuses (workload.hpp).
constexpr double kEagerKernels = 3;
void lower_config(const Workload& w, const Config& c, const cotune_hardware& hw, std::vector<cotune_op>& ops,
                  cotune_trace& trace) {
  const Model& m = w.model;
  Shape s;
  const std::string why = shape_of(w, c, &s);
  if (!why.empty()) throw std::invalid_argument(why);
  const double rank = busiest_rank(w, c, s);
  const RankLayers& r = s.ranks[static_cast<size_t>(rank)];
  const Counts n = counts_of(m, r);
  const Dims d = dims_of(w, c);
  // SDPA attention under PyTorch-native kernels. A GPU whose description gives no attention
  // efficiency (the MI300X's) is timed by the host's older rule, a share of its GEMM efficiency,
  // which says nothing of SDPA: no flag there.
  const bool sdpa = w.training.kernels != Kernels::kFused && hw.attention_efficiency > 0;
  TraceBuilder B(ops, hw, w.training.dtype, w.training.lora, w.training.kernels == Kernels::kEager ? kEagerKernels : 1,
                 sdpa);
  B.set_block_scaled(fp8_recipe_on(w.training, hw) != Fp8Recipe::kTensorwise);

  // ---- forward of one micro-batch (all virtual chunks of this rank)
  pipeline_transfer(B, c, d, rank, F);
  if (n.embedding) {
    B.memory(F, "embedding", d.T * d.h * kAct * 2, 1, 0, 2);
    // Learned absolute positions: their rows are looked up and added to the tokens' (read twice,
    // written once), in place of the rotation every layer does otherwise. Megatron-Core then
    // all-reduces the vocabulary-parallel lookup whole and splits it for sequence parallelism
    // afterwards (LanguageModelEmbedding reduce-scatters only without a position embedding).
    const bool learned = !m.rotary();
    if (learned) B.memory(F, "position_embedding", d.T * d.h * kAct * 3, 1, 0, 2);
    const bool scatter = c.sp && !learned;
    B.collective(F, 0, scatter ? "tp_reducescatter" : "tp_allreduce",
                 scatter ? COTUNE_COLL_REDUCE_SCATTER : COTUNE_COLL_ALL_REDUCE, COTUNE_GROUP_TP, d.T * d.h * kAct, 1,
                 c.tp, 1);
  }
  fsdp_gather(B, c, s, n, F);
  forward_layers(B, w, c, d, n, F, 0);
  if (n.output) output_forward(B, w, c, d, n);

  // ---- backward of one micro-batch, with recomputation
  pipeline_transfer(B, c, d, rank, BW);
  if (n.output) output_backward(B, w, c, d, n);
  fsdp_gather(B, c, s, n, BW);
  recompute(B, w, c, d, n);
  moe_mlp_backward(B, w, c, d, n.moe_mlp);
  dense_mlp_backward(B, w, c, d, n.dense_mlp);
  attention_backward(B, w, c, d, n.attention);
  fsdp_reduce(B, w, c, s, n, w.training.lora);
  if (n.embedding) {
    B.memory(BW, "embedding_grad", d.T * d.h * kAct * 3, 1, 0, 2);
    if (!m.rotary()) B.memory(BW, "position_embedding_grad", d.T * d.h * kAct * 2, 1, 0, 2);
  }

  // ---- once per step: gradient synchronisation, optimizer, parameter gather
  step_phase(B, w, c, s, n, r);

  trace = cotune_trace{};
  trace.struct_size = COTUNE_STRUCT_SIZE(cotune_trace, hardware);
  trace.ops = ops.data();
  trace.num_ops = ops.size();
  trace.op_stride = sizeof(cotune_op);
  trace.schedule = c.vpp > 1 ? COTUNE_SCHEDULE_INTERLEAVED : COTUNE_SCHEDULE_1F1B;
  trace.pipeline_stages = static_cast<int32_t>(c.pp);
  trace.virtual_stages = static_cast<int32_t>(c.vpp);
  trace.micro_batches = static_cast<int32_t>(s.micro_batches);
  trace.tokens_per_step = w.training.global_batch * m.seq_len;
  trace.model_flops_per_gpu = model_flops_per_gpu(w, c);
  trace.gpus = c.gpus;
  trace.memory = memory_estimate(w, c, s);
  trace.hardware = hw;
  trace.hardware.nodes = static_cast<int32_t>(std::ceil(c.gpus / hw.gpus_per_node));
}

}  // namespace cotune_llm
