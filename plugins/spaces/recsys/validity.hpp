// The constraints of the recsys space, with the reason for each invalid configuration. A
// configuration is valid when it uses whole nodes, its batch divides the global batch, the dense
// part fits, and the planner places every shard within memory.
#ifndef COTUNE_PLUGINS_SPACES_RECSYS_VALIDITY_HPP_
#define COTUNE_PLUGINS_SPACES_RECSYS_VALIDITY_HPP_

#include <cotune/cotune.h>

#include <string>

#include "config.hpp"
#include "planner.hpp"
#include "workload.hpp"

namespace cotune_recsys {

// Plans `c` into `plan`. Returns true when valid; otherwise false with the reason in *why (when not
// NULL). plan.ok is true exactly when this returns true.
bool plan_config(const Workload& w, const Config& c, const cotune_hardware& hw, Plan& plan, std::string* why);

}  // namespace cotune_recsys

#endif
