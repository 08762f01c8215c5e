// The files a job shares with the executor, in the trial's working directory: the trial file it
// reads (COTUNE_TRIAL_FILE), the result file it writes (COTUNE_RESULT_FILE), its stdout and stderr.
#ifndef COTUNE_SUPPORT_TRIAL_FILES_HPP_
#define COTUNE_SUPPORT_TRIAL_FILES_HPP_

#include <cotune/cotune.h>

#include <boost/regex.hpp>

#include <string>
#include <utility>
#include <vector>

#include <cotune/support/command_template.hpp>

namespace cotune::support {

inline constexpr const char* kTrialFileName = "trial.json";
inline constexpr const char* kResultFileName = "result.json";
inline constexpr const char* kStdoutName = "stdout.log";
inline constexpr const char* kStderrName = "stderr.log";

// Creates `dir` (and parents); throws cotune::Error naming it when that fails.
void make_directories(const std::string& dir);

// Writes {"trial_id", "params": {name: text}, "config": <config_json>, "launch_args", "workload"}.
void write_trial_file(const std::string& path, const cotune_trial& trial, const FormattedParams& params);

// A metric extractor: a name and a regular expression whose first group is the number. Boost.Regex
// (perl syntax) matches without recursion and gives up past its complexity limit, so no line a job
// prints can overflow the stack (std::regex recursed once per character).
struct MetricRegex {
  std::string name, pattern;
  boost::regex re;
};

// What is read of a job's output, whatever it prints: lines beyond kMaxLineBytes are cut there, a
// result file beyond kMaxResultBytes or nested deeper than kMaxJsonDepth is refused.
inline constexpr size_t kMaxLineBytes = size_t{64} * 1024;
inline constexpr size_t kMaxResultBytes = size_t{1} << 20;
inline constexpr int kMaxJsonDepth = 64;

// Compiles a metric's pattern; throws std::invalid_argument with the reason when it is not valid or
// has no capture group.
boost::regex compile_metric_regex(const std::string& pattern);

// What a job measured, or why nothing usable was found.
struct Metrics {
  bool ok = false;
  std::string json;   // a JSON object of numbers when ok
  std::string error;  // otherwise
};

// Reads a result file: a regular file of at most kMaxResultBytes holding a JSON object whose values
// are all finite numbers.
Metrics read_result_file(const std::string& path);

// Applies each regex to each line of the file (lines cut at kMaxLineBytes); the last match of each
// wins. Every metric must match.
Metrics metrics_from_regex(const std::string& path, const std::vector<MetricRegex>& regexes);

// The deepest nesting of arrays and objects in JSON text, counted without parsing (strings skipped).
int json_depth(const std::string& text);

// The last `lines` lines of a file (at most `max_bytes` from its end); "" when it cannot be read.
std::string tail_lines(const std::string& path, int lines, size_t max_bytes = size_t{64} * 1024);

bool file_exists(const std::string& path);  // a regular file

// Anything at `path` (a FIFO or folder too: read_result_file then says what it is).
bool path_exists(const std::string& path);

}  // namespace cotune::support

#endif  // COTUNE_SUPPORT_TRIAL_FILES_HPP_
