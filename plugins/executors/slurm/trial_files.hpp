// The files a job shares with the executor, in the trial's working directory: the trial file it
// reads (COTUNE_TRIAL_FILE), the result file it writes (COTUNE_RESULT_FILE), its stdout and stderr.
#ifndef COTUNE_EXECUTOR_TRIAL_FILES_HPP_
#define COTUNE_EXECUTOR_TRIAL_FILES_HPP_

#include <cotune/cotune.h>

#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "command_template.hpp"

namespace cotune_exec {

inline constexpr const char* kTrialFileName = "trial.json";
inline constexpr const char* kResultFileName = "result.json";
inline constexpr const char* kStdoutName = "stdout.log";
inline constexpr const char* kStderrName = "stderr.log";

// Creates `dir` (and parents); throws cotune::Error naming it when that fails.
void make_directories(const std::string& dir);

// Writes {"trial_id", "params": {name: text}, "config": <config_json>, "launch_args", "workload"}.
void write_trial_file(const std::string& path, const cotune_trial& trial, const FormattedParams& params);

// A metric extractor: a name and a regular expression whose first group is the number.
struct MetricRegex {
  std::string name, pattern;
  std::regex re;
};

// What a job measured, or why nothing usable was found.
struct Metrics {
  bool ok = false;
  std::string json;   // a JSON object of numbers when ok
  std::string error;  // otherwise
};

// Reads a result file: a JSON object whose values are all finite numbers.
Metrics read_result_file(const std::string& path);

// Applies each regex to each line of the file; the last match of each wins. Every metric must match.
Metrics metrics_from_regex(const std::string& path, const std::vector<MetricRegex>& regexes);

// The last `lines` lines of a file (at most `max_bytes` from its end); "" when it cannot be read.
std::string tail_lines(const std::string& path, int lines, size_t max_bytes = size_t{64} * 1024);

bool file_exists(const std::string& path);

}  // namespace cotune_exec

#endif  // COTUNE_EXECUTOR_TRIAL_FILES_HPP_
