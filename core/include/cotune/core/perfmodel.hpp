// The analytic performance model: times a step trace on a hardware description (MAD-Max style).
// Exposed to plugins through cotune_host.simulate_trace and cotune_host.resolve_hardware.
#ifndef COTUNE_CORE_PERFMODEL_HPP_
#define COTUNE_CORE_PERFMODEL_HPP_

#include <cotune/cotune.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cotune::core::perf {

// Names of the GPUs in the built-in catalogue (core/data/gpus.json), e.g. "h100-sxm".
std::vector<std::string> catalogue_gpu_names();

// Resolves a cluster object ({"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8, "network": {...},
// "gpu_spec": {...}, "price_per_gpu_hour": 2.5}) into `out` (whose struct_size the caller set).
// Throws UserError naming the field (JSON pointer below `where`) and what was expected.
void resolve_hardware(const nlohmann::json& cluster, cotune_hardware* out,
                      const std::string& where = "/cluster");

// Times one step of `trace`. Reads only the fields each struct_size covers. Throws UserError on a
// malformed trace (no ops stride, negative sizes).
void simulate(const cotune_trace& trace, cotune_sim_result* out);

}  // namespace cotune::core::perf

#endif  // COTUNE_CORE_PERFMODEL_HPP_
