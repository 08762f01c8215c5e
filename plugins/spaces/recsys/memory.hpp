// The per-GPU memory of everything but the embedding shards: the dense part (weights, gradients,
// optimizer state, sharded with FSDP), activations, and communication buffers and workspace.
// What is left of HBM is the planner's budget for embeddings.
#ifndef COTUNE_PLUGINS_SPACES_RECSYS_MEMORY_HPP_
#define COTUNE_PLUGINS_SPACES_RECSYS_MEMORY_HPP_

#include <cotune/cotune.h>

#include "config.hpp"
#include "workload.hpp"

namespace cotune_recsys {

// CUDA context, cuBLAS and NCCL workspaces and allocator reserve per GPU.
constexpr double kWorkspaceBytes = 1073741824.0;

// Bytes per dense weight in the training dtype (fp32/tf32: 4, bf16/fp16: 2).
double dense_weight_bytes(const Workload& w);

// The dense part and buffers per GPU (embeddings left at zero: the plan adds them).
cotune_memory dense_memory(const Workload& w, const Config& c);

double total(const cotune_memory& m);

}  // namespace cotune_recsys

#endif
