// Selective recomputation as PyTorch-native trainers run it: TorchTitan's per-operator policy
// (activation_checkpoint mode "selective", selective_ac_option "op"), which the torchtitan export
// writes for `"recompute": "selective"`. Each transformer block is checkpointed; inside it the
// policy keeps the outputs of the matrix multiplies it meets first, third, fifth, ... in call
// order, of attention (SDPA) and of the tensor-parallel reduce-scatters, and recomputes everything
// else during backward: every second GEMM (a Llama layer's key, output and w3 projections), every
// elementwise op (norms, rotary embedding, activation, residual adds) and the sequence-parallel
// all-gathers. A MoE block's grouped GEMMs and all-to-alls are not on the keep list: it is rebuilt
// whole. Megatron-LM's selective recomputation (recompute.hpp) rebuilds named modules instead.
#ifndef COTUNE_PLUGINS_SPACES_LLM_PER_OP_RECOMPUTE_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_PER_OP_RECOMPUTE_HPP_

#include "config.hpp"
#include "estimate.hpp"
#include "layer_ops.hpp"
#include "trace_builder.hpp"
#include "workload.hpp"

namespace cotune_llm {

// True when `c` recomputes selectively under a PyTorch-native trainer (training.kernels eager or
// compiled): the per-operator policy above rather than Megatron-LM's modules.
bool per_op_selective(const Workload& w, const Config& c);

// Bytes one layer keeps for backward under the policy, per micro-batch on one GPU: its attention
// block (with the block's input), a dense MLP block, a MoE block.
LayerActivations per_op_kept(const Workload& w, const Config& c);

// The backward's reruns under the policy for `attention` attention blocks, `dense_mlp` dense MLP
// blocks and `moe_mlp` MoE blocks of this GPU.
void per_op_recompute(TraceBuilder& B, const Workload& w, const Config& c, const Dims& d, double attention,
                      double dense_mlp, double moe_mlp);

}  // namespace cotune_llm

#endif
