// Turns the parameter values a client sent ({"tp": 8, "recompute": "selective", "overlap": true})
// into a configuration of the agent's own space, refusing anything outside a parameter's domain.
#ifndef COTUNE_AGENT_CONFIG_VALUES_HPP_
#define COTUNE_AGENT_CONFIG_VALUES_HPP_

#include <cotune/core/abi/components.hpp>

#include <nlohmann/json.hpp>

#include <vector>

namespace cotune::core::agent {

// One value per parameter of `params`, in order. Every parameter must be given, and nothing else.
// Throws std::invalid_argument naming the parameter and what was expected.
std::vector<double> config_from_values(const std::vector<Param>& params, const nlohmann::json& values);

}  // namespace cotune::core::agent

#endif  // COTUNE_AGENT_CONFIG_VALUES_HPP_
