// The environment fingerprint stored with a study and each of its trials: what produced the
// numbers (host, cotune version, the plugins by id and version, the study file's hash), so that
// results from different setups are not mixed up unknowingly.
#ifndef COTUNE_RUN_ENVIRONMENT_HPP_
#define COTUNE_RUN_ENVIRONMENT_HPP_

#include <cotune/core/abi/components.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace cotune::core {

// {"host": ..., "cotune": ..., "abi": "1.0", "study_hash": ..., "plugins": {"space": {"id":
// ..., "version": ..., "file": ...}, ...}}
nlohmann::json environment_fingerprint(const std::string& study_hash,
                                       const std::vector<std::pair<std::string, const ComponentInfo*>>& parts);

}  // namespace cotune::core

#endif  // COTUNE_RUN_ENVIRONMENT_HPP_
