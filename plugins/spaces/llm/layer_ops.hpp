// The ops of one transformer layer's blocks on one GPU, forward and backward, as Megatron-LM with
// Transformer Engine runs them: the attention block (multi-head, grouped-query or multi-latent;
// fused or unfused; context-parallel ring exchange), a dense MLP, and a MoE MLP (router, token
// permutation, expert-parallel all-to-all, grouped expert GEMMs, shared experts).
#ifndef COTUNE_PLUGINS_SPACES_LLM_LAYER_OPS_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_LAYER_OPS_HPP_

#include "config.hpp"
#include "trace_builder.hpp"
#include "workload.hpp"

namespace cotune_llm {

constexpr double kAct = 2;  // bytes per activation element (bf16)

// The sizes of one micro-batch on one GPU.
struct Dims {
  double b = 0;    // sequences of the micro-batch
  double s = 0;    // sequence length
  double T = 0;    // tokens on this GPU (b * s / cp)
  double Tl = 0;   // tokens in the tensor-parallel-replicated regions (T / tp with sp, else T)
  double h = 0;
  double t = 1;    // tensor-parallel degree
  double heads_local = 0;
  double q_local = 0, k_local = 0, v_local = 0;  // query, key and value widths on this GPU
  double ffn_local = 0;
};
Dims dims_of(const Workload& w, const Config& c);

// `count`: how many layers of this GPU run the block; `flags` COTUNE_OP_RECOMPUTE for a forward
// rerun inside backward.
void attention_forward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, int32_t phase,
                       double count, uint32_t flags);
void attention_backward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, double count);
void dense_mlp_forward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, int32_t phase,
                       double count, uint32_t flags);
void dense_mlp_backward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, double count);
void moe_mlp_forward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, int32_t phase, double count,
                     uint32_t flags);
void moe_mlp_backward(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, double count);

}  // namespace cotune_llm

#endif
