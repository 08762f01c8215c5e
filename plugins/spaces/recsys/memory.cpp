// Per-GPU memory of the dense part and buffers (see memory.hpp).
#include "memory.hpp"

#include <algorithm>


namespace cotune_recsys {

double dense_weight_bytes(const Workload& w) {
  const int32_t d = w.training.dtype;
  return d == COTUNE_DTYPE_FP32 || d == COTUNE_DTYPE_TF32 ? 4 : 2;
}

double total(const cotune_memory& m) { return m.weights + m.gradients + m.optimizer + m.activations + m.buffers; }

cotune_memory dense_memory(const Workload& w, const Config& c) {
  cotune_memory m{};
  m.struct_size = COTUNE_STRUCT_SIZE(cotune_memory, buffers);
  const double P = dense_params(w);
  const double wb = dense_weight_bytes(w);
  const bool mixed = wb == 2;
  // Adam keeps two fp32 moments; mixed precision adds an fp32 master copy of the weights.
  const double opt = (w.training.dense_optimizer == DenseOptimizer::kAdam ? 8 : 0) + (mixed ? 4 : 0);
  const double shard = c.dense_parallel == DenseParallel::kFsdp ? c.gpus : 1;
  m.weights = P * wb / shard;
  m.gradients = P * wb / shard;
  m.optimizer = P * opt / shard;
  if (c.dense_parallel == DenseParallel::kFsdp) {
    // The layer being computed is gathered whole: the largest one, twice (this and the prefetched next).
    double largest = 0, in = w.dense.features;
    for (double out : w.dense.bottom_mlp) largest = std::max(largest, in * out), in = out;
    in = interaction_width(w);
    for (double out : w.dense.top_mlp) largest = std::max(largest, in * out), in = out;
    m.buffers += 2 * largest * wb;
  }

  const double b = c.batch_per_gpu;
  double widths = w.dense.features + interaction_width(w);
  for (double x : w.dense.bottom_mlp) widths += 2 * x;  // GEMM output and activation output
  for (double x : w.dense.top_mlp) widths += 2 * x;
  double pooled = 0, ids = 0;
  for (const Table& t : w.tables) pooled += t.dim, ids += t.pooling * 8 + 4;
  const double features = static_cast<double>(w.tables.size()) + 1;
  const double interaction = w.dense.interaction == Interaction::kDot ? features * features * 4 : 0;
  m.activations = b * (widths * std::max(wb, 2.0) + pooled * 4 + interaction);
  // Ids of this micro-batch (and of the next one when prefetched), received ids, pooled embeddings
  // received forward and their gradients sent backward.
  const double batches = c.pipeline == Pipeline::kPrefetch ? 2 : 1;
  m.buffers += b * (batches * 2 * ids + 2 * pooled * c.a2a_bytes()) + kWorkspaceBytes;
  return m;
}

}  // namespace cotune_recsys
