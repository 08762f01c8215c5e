// TorchTitan's per-operator selective recomputation (see per_op_recompute.hpp).
#include "per_op_recompute.hpp"

#include <cstddef>

namespace cotune_llm {
namespace {

constexpr int32_t BW = COTUNE_PHASE_BACKWARD;
constexpr uint32_t R = COTUNE_OP_RECOMPUTE;

// A forward GEMM of one layer on one GPU: [tokens x k] x [k x n].
struct LayerGemm {
  const char* label;
  double n, k;
};

// The GEMMs of a block in the order a PyTorch-native model calls them: separate query, key and
// value projections (MLA: down then up projections), then the output projection; an MLP's w1, w3
// (gated) and w2. Returns how many were written (at most 5).
size_t attention_gemms(const Model& m, const Dims& d, LayerGemm* out) {
  size_t n = 0;
  if (m.mla.on()) {
    const Mla& a = m.mla;
    if (a.q_lora_rank > 0) {
      out[n++] = {"q_down_recompute", a.q_lora_rank, d.h};
      out[n++] = {"q_up_recompute", d.q_local, a.q_lora_rank};
    } else {
      out[n++] = {"q_proj_recompute", d.q_local, d.h};
    }
    out[n++] = {"kv_down_recompute", a.kv_lora_rank + a.qk_rope_head_dim, d.h};
    out[n++] = {"kv_up_recompute", d.heads_local * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank};
  } else {
    out[n++] = {"q_proj_recompute", d.q_local, d.h};
    out[n++] = {"k_proj_recompute", d.k_local, d.h};
    out[n++] = {"v_proj_recompute", d.v_local, d.h};
  }
  out[n++] = {"attention_proj_recompute", d.h, d.heads_local * m.v_head_dim()};
  return n;
}

size_t dense_mlp_gemms(const Model& m, const Dims& d, LayerGemm* out) {
  size_t n = 0;
  out[n++] = {"mlp_w1_recompute", d.ffn_local, d.h};
  if (m.gated_mlp) out[n++] = {"mlp_w3_recompute", d.ffn_local, d.h};
  out[n++] = {"mlp_w2_recompute", d.h, d.ffn_local};
  return n;
}

// The bytes of the kept (odd-numbered, counting from 1) outputs among `gemms`, the block's
// multiplies numbered from `first`.
double kept_outputs(const LayerGemm* gemms, size_t count, size_t first, double tokens) {
  double bytes = 0;
  for (size_t i = 0; i < count; ++i)
    if ((first + i) % 2 == 0) bytes += tokens * gemms[i].n * kAct;
  return bytes;
}

}  // namespace

bool per_op_selective(const Workload& w, const Config& c) {
  return c.recompute == kRecomputeSelective && w.training.kernels != Kernels::kFused;
}

LayerActivations per_op_kept(const Workload& w, const Config& c) {
  const Model& m = w.model;
  const Dims d = dims_of(w, c);
  LayerGemm gemms[5];
  const size_t attention = attention_gemms(m, d, gemms);
  const double reduce_scatter = c.tp > 1 ? d.Tl * d.h * kAct : 0;  // the block's output, kept
  const double masks = w.training.dropout ? d.Tl * d.h : 0;
  LayerActivations a;
  // The block's input (the checkpoint's), the kept projections, attention's output.
  a.attention = d.Tl * d.h * kAct + kept_outputs(gemms, attention, 0, d.T) + d.T * d.heads_local * m.v_head_dim() * kAct +
                reduce_scatter + masks;
  const size_t mlp = dense_mlp_gemms(m, d, gemms);
  a.dense_mlp = kept_outputs(gemms, mlp, attention, d.T) + reduce_scatter + masks;
  a.moe_mlp = 0;  // rebuilt whole from the block's input
  return a;
}

void per_op_recompute(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, double attention,
                      double dense_mlp, double moe_mlp) {
  const Model& m = w.model;
  const bool drop = w.training.dropout;
  const bool gather = c.sp && c.tp > 1;
  LayerGemm gemms[5];
  const size_t first_mlp = attention_gemms(m, d, gemms);
  if (attention > 0) {
    B.begin_block(BW, attention, R);
    B.memory(BW, "layernorm_recompute", d.Tl * d.h * kAct * 2, attention, R);
    if (gather)
      B.collective(BW, 0, "tp_allgather_recompute", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_TP, d.T * d.h * kAct, 1, c.tp,
                   attention, -1, R);
    for (size_t i = 1; i < first_mlp; i += 2)
      B.gemm(BW, gemms[i].label, d.T, gemms[i].n, gemms[i].k, attention, GemmRole::kForward, R);
    if (m.rotary()) {
      const double rope_width =
          m.mla.on() ? d.heads_local * m.mla.qk_rope_head_dim + m.mla.qk_rope_head_dim : d.q_local + d.k_local;
      B.memory(BW, "rope_recompute", d.T * rope_width * kAct * 2, attention, R, 2);
    }
    if (m.mla.on()) {
      B.memory(BW, "latent_norms_recompute", d.T * (m.mla.q_lora_rank + m.mla.kv_lora_rank) * kAct * 2, attention, R, 2);
    }
    B.memory(BW, "residual_layernorm_recompute", d.Tl * d.h * kAct * (drop ? 6.5 : 5), attention, R, 2);
    B.host(BW, "attention_module_recompute", attention, 6, R);
    B.end_block();
  }
  if (dense_mlp > 0) {
    const size_t count = dense_mlp_gemms(m, d, gemms);
    const double up = m.gated_mlp ? 2 : 1;
    B.begin_block(BW, dense_mlp, R);
    if (gather)
      B.collective(BW, 0, "tp_allgather_recompute", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_TP, d.T * d.h * kAct, 1, c.tp,
                   dense_mlp, -1, R);
    for (size_t i = 0; i < count; ++i)
      if ((first_mlp + i) % 2 == 1) B.gemm(BW, gemms[i].label, d.T, gemms[i].n, gemms[i].k, dense_mlp, GemmRole::kForward, R);
    B.memory(BW, "mlp_activation_recompute", d.T * d.ffn_local * kAct * (up + 1), dense_mlp, R);
    B.memory(BW, "residual_recompute", d.Tl * d.h * kAct * (drop ? 4.5 : 3), dense_mlp, R);
    B.host(BW, "mlp_module_recompute", dense_mlp, 3, R);
    B.end_block();
  }
  moe_mlp_forward(B, w, c, d, BW, moe_mlp, R);
}

}  // namespace cotune_llm
