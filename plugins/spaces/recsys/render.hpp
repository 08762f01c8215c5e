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

// A TorchRec plan: {"world_size", "batch_per_gpu", "pipeline", "qcomms", "plan": {module: {table:
// {"sharding_type", "compute_kernel", "ranks", "sharding_spec": [{"shard_offsets", "shard_sizes",
// "placement"}]}}}}; placement "rank:R/cuda:L" with L the
// local rank in its node. In the shape of torchrec.distributed.types.ParameterSharding.
std::string render_torchrec(const Workload& w, const Config& c, const Plan& plan, double gpus_per_node);

}  // namespace cotune_recsys

#endif
