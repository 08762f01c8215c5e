// Options of the replay executor (documented in docs/executors.md):
//   {"file": "runs.csv", "metrics": {"tokens_per_s": "measured tokens/s"},
//    "status_column": "status", "reason_column": "reason", "where": {"cluster": "a"},
//    "defaults": {"vpp": 1}, "columns": {"tp": "tensor_model_parallel_size"}, "unstated": ["dp"],
//    "capacity": 64, "restrict_search": true}
#ifndef COTUNE_EXECUTOR_REPLAY_OPTIONS_HPP_
#define COTUNE_EXECUTOR_REPLAY_OPTIONS_HPP_

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cotune_replay {

struct ReplayOptions {
  std::string file;  // the CSV of runs; a relative path resolves against the current directory
  // metric name -> column; empty: every column named like a metric the spaces report
  std::vector<std::pair<std::string, std::string>> metrics;
  std::optional<std::string> status_column;  // unset: "status" when the table has it
  std::optional<std::string> reason_column;  // unset: "reason" or else "error" when the table has it
  std::vector<std::pair<std::string, nlohmann::json>> where;     // column -> value (or values) a row must hold
  std::vector<std::pair<std::string, nlohmann::json>> defaults;  // parameter -> value of absent/empty cells
  // parameter or workload field -> the table's column that holds it (the table's own name for it)
  std::vector<std::pair<std::string, std::string>> columns;
  // Parameters the table does not state: rows match on the others, and the space completes them
  // (the llm space's dp: the GPUs left after tp, pp and cp).
  std::vector<std::string> unstated;
  int32_t capacity = 64;
  // The study searches only the table's configurations (candidates()); false: the whole space, and
  // what the table lacks comes back unavailable.
  bool restrict_search = true;
};

// The metric columns looked for when "metrics" is not given.
const std::vector<std::string>& default_metric_columns();

// Parses and checks the options; throws cotune::Error(INVALID_ARGUMENT) naming the field.
ReplayOptions parse_replay_options(std::string_view json);

}  // namespace cotune_replay

#endif  // COTUNE_EXECUTOR_REPLAY_OPTIONS_HPP_
