#include "run/environment.hpp"

#include "run/lease.hpp"

namespace cotune::core {

nlohmann::json environment_fingerprint(const std::string& study_hash,
                                       const std::vector<std::pair<std::string, const ComponentInfo*>>& parts) {
  nlohmann::json plugins = nlohmann::json::object();
  for (const auto& [role, info] : parts)
    plugins[role] = {{"id", info->id}, {"version", info->version}, {"file", info->file}};
  return {{"host", lease_host_name()},
          {"cotune", COTUNE_VERSION},
          {"abi", std::to_string(COTUNE_ABI_MAJOR) + "." + std::to_string(COTUNE_ABI_MINOR)},
          {"study_hash", study_hash},
          {"plugins", plugins}};
}

}  // namespace cotune::core
