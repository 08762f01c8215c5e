// The two sources of `cotune calibrate` (cli/calibrate.cpp): measured runs of a team's jobs, and
// microbenchmarks on the local GPU. Both give the constants of the calibration file
// (core/include/cotune/core/perfmodel/calibration.hpp, docs/calibration.md).
#ifndef COTUNE_CLI_CALIBRATE_HPP_
#define COTUNE_CLI_CALIBRATE_HPP_

#include <cotune/core/abi/table_schema.hpp>
#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/registry.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cotune::cli {

struct CalibrationRuns {
  std::map<std::string, std::vector<core::perf::CalibrationRun>> by_gpu;  // the runs, grouped by GPU type
  // Each run's configuration as the space renders it (JSON), in the order of by_gpu's runs: what
  // --rows names a run by beside its line.
  std::map<std::string, std::vector<std::string>> configurations;
  std::vector<core::RejectedRow> skipped;  // rows that cannot be runs, left out of the fit and named
  std::vector<std::string> warnings;  // columns ignored (text that is neither a schema column nor a metric)
};

// Reads RUNS.csv as `cotune import` reads a file (core/history/table_runs.hpp: the space's table
// schema, `mapping` from --map, a format column, a status column) with a measured step time or
// tokens per second (step_time_s, step_time_ms, iteration_time_s, tokens_per_s_per_gpu, ...) into
// runs grouped by GPU type. Header problems are UserErrors; a row that cannot be a run (a bad cell,
// a layout the space refuses, a status other than ok, no measurement) is skipped with its reason.
CalibrationRuns read_calibration_runs(const core::Registry& registry, const core::TableSchema& schema,
                                      const std::string& path,
                                      const std::vector<std::pair<std::string, std::string>>& mapping);

// Measures the local GPU through the cuda executor and fits the constants of catalogue GPU `base`;
// fills `out` with {"constants": {...}, "measurements": {...}}. Returns the exit status (1: no
// usable GPU or a failed measurement).
int calibrate_on_gpu(const std::string& base, const std::string& executor_options, nlohmann::json* out);

}  // namespace cotune::cli

#endif  // COTUNE_CLI_CALIBRATE_HPP_
