// Renders a configuration as JSON (parameter name -> value) and as a TorchRec sharding plan.
#ifndef COTUNE_PLUGINS_SPACES_RECSYS_RENDER_HPP_
#define COTUNE_PLUGINS_SPACES_RECSYS_RENDER_HPP_

#include <string>

#include "config.hpp"
#include "planner.hpp"
#include "workload.hpp"

namespace cotune_recsys {

// {"large_table_sharding": "row_wise", "large_table_rows": 1000000, ...}
std::string render_json(const double* v);

// A TorchRec sharding plan (docs/exports.md, torchrec section):
//   {"plan": {"model.sparse_arch.embedding_bag_collection": {table: {"sharding_type", "compute_kernel",
//     "ranks", "shards": [{"shard_offsets", "shard_sizes", "placement"}]}}},
//    "fused_params": {...}, "world_size", "local_world_size", "cotune": {...}}
// "plan" is ShardingPlan._serialize's form: only those four keys per table, no "shards" for
// data_parallel tables, integer offsets/sizes/ranks, placement "rank:R/cuda:(R mod local_world_size)",
// shard geometry by TorchRec's rules (row_wise ceil blocks, column_wise base-dim blocks) on the
// planner's ranks. "fused_params" is for the sharder (cache_load_factor only when a table uses
// fused_uvm_caching). "cotune" holds our run settings (batch_per_gpu, pipeline, dense_parallel,
// qcomms) and the tables' EmbeddingBagConfig fields (num_embeddings, embedding_dim, data_type).
// local_world_size is min(gpus, gpus_per_node).
std::string render_torchrec(const Workload& w, const Config& c, const Plan& plan, double gpus_per_node);

}  // namespace cotune_recsys

#endif
