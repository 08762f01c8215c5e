// Model presets: "criteo-terabyte" (the 26 tables of the public MLPerf DLRM setup on Criteo
// Terabyte) and "ads-500" (a synthetic ads-like model of 500 generated tables, > 1 TB in fp32).
#ifndef COTUNE_PLUGINS_SPACES_RECSYS_PRESETS_HPP_
#define COTUNE_PLUGINS_SPACES_RECSYS_PRESETS_HPP_

#include <nlohmann/json.hpp>

#include <string>

namespace cotune_recsys {

// The model object of a preset; fields given next to "preset" in the workload replace its own.
// Throws std::invalid_argument naming `at` and the known presets when the name is unknown.
nlohmann::json preset_model(const std::string& name, const std::string& at);

}  // namespace cotune_recsys

#endif
