// A seeded generator of embedding tables ("table_generator" in the workload), so that a model of
// several hundred tables is one line of a study file. The same spec gives the same tables on every
// platform: the random numbers come from std::mt19937_64 and are shaped here, not by std::
// distributions (whose output differs between standard libraries).
#ifndef COTUNE_PLUGINS_SPACES_RECSYS_GENERATOR_HPP_
#define COTUNE_PLUGINS_SPACES_RECSYS_GENERATOR_HPP_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "workload.hpp"

namespace cotune_recsys {

// spec: {"count": 500, "seed": 7, "rows": D, "dim": D, "pooling": D, "skew": D, "prefix": "t"} where each
// D is a number, {"choices": [..]}, {"uniform": [lo, hi]} or {"log_uniform": [lo, hi]}.
// Rows and dims are rounded to integers. `at` is the JSON pointer of spec for error messages.
std::vector<Table> generate_tables(const nlohmann::json& spec, const std::string& at);

}  // namespace cotune_recsys

#endif
