// Canonical JSON and content hashes: one spelling per value, so that equal configurations, workloads
// and study files get equal keys whatever their key order, whitespace or number spelling.
#ifndef COTUNE_CORE_STUDYFILE_CANONICAL_JSON_HPP_
#define COTUNE_CORE_STUDYFILE_CANONICAL_JSON_HPP_

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace cotune::core {

// Compact JSON with object keys sorted, no whitespace, and every float that holds an integral value
// within +-2^53 written as an integer (2.0 -> 2), so that a value read back from a CSV or typed by
// hand as 2.0 matches the 2 a space produced. Other floats keep the shortest round-trip spelling.
std::string canonical_json(const nlohmann::json& value);

// Lower-case hex SHA-256 of bytes.
std::string sha256_hex(std::string_view bytes);

// The key under which a configuration is stored and deduplicated: its canonical JSON.
std::string config_key(const nlohmann::json& config);

// The key that says "the same workload": the SHA-256 of the canonical workload JSON (without a
// cluster.calibration: it changes the model, not the runs) and the space name. History is shared
// between studies (and imported logs) with equal workload keys.
std::string workload_key(const nlohmann::json& workload, std::string_view space_name);

}  // namespace cotune::core

#endif  // COTUNE_CORE_STUDYFILE_CANONICAL_JSON_HPP_
