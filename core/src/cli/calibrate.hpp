// The two sources of `cotune calibrate` (cli/calibrate.cpp): measured runs of a team's jobs, and
// microbenchmarks on the local GPU. Both give the constants of the calibration file
// (core/include/cotune/core/perfmodel/calibration.hpp, docs/calibration.md).
#ifndef COTUNE_CLI_CALIBRATE_HPP_
#define COTUNE_CLI_CALIBRATE_HPP_

#include <cotune/core/abi/table_schema.hpp>
#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/registry.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace cotune::cli {

// A row of RUNS.csv the space cannot simulate (its workload or layout refused): left out of the
// fit and named, as `simulate --batch` marks such a row invalid and goes on.
struct SkippedRun {
  size_t line = 0;
  std::string reason;
};

struct CalibrationRuns {
  std::map<std::string, std::vector<core::perf::CalibrationRun>> by_gpu;  // the runs, grouped by GPU type
  std::vector<SkippedRun> skipped;
};

// Reads RUNS.csv (the columns of the space's table schema, as `simulate --batch` reads them, plus a
// measured step_time_s, step_time_ms, tokens_per_s or tokens_per_s_per_gpu) into runs grouped by
// GPU type. Throws UserError naming the row and column of a bad cell; a row the space cannot
// simulate is skipped with its reason.
CalibrationRuns read_calibration_runs(const core::Registry& registry, const core::TableSchema& schema,
                                      const std::string& path);

// Measures the local GPU through the cuda executor and fits the constants of catalogue GPU `base`;
// fills `out` with {"constants": {...}, "measurements": {...}}. Returns the exit status (1: no
// usable GPU or a failed measurement).
int calibrate_on_gpu(const std::string& base, const std::string& executor_options, nlohmann::json* out);

}  // namespace cotune::cli

#endif  // COTUNE_CLI_CALIBRATE_HPP_
