// Options of the process executor (documented in docs/executors.md):
//   {"command": ["prog", "--tp", "{tp}"], "parallel": 2, "timeout_s": 600, "kill_grace_s": 5,
//    "result_file": true, "metrics_regex": {"step_time_s": "step time: ([0-9.]+)"},
//    "gpus": ["0", "1"], "gpus_per_trial": 1, "env": {"K": "V"}, "workdir": "/scratch/cotune",
//    "log_tail_lines": 20, "oom_patterns": ["CUDA out of memory"]}
#ifndef COTUNE_EXECUTOR_PROCESS_OPTIONS_HPP_
#define COTUNE_EXECUTOR_PROCESS_OPTIONS_HPP_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <cotune/support/command_template.hpp>
#include <cotune/support/trial_files.hpp>

namespace cotune_process {

// Command templates and trial files: the SDK's support library (cotune/support/).
using namespace cotune::support;  // NOLINT(google-build-using-namespace)

struct ProcessOptions {
  CommandTemplate command;
  int parallel = 1;             // processes running at once
  double timeout_s = 0;         // per trial; 0: none
  double kill_grace_s = 5;      // SIGTERM to the group, then SIGKILL this much later
  bool result_file = true;      // read COTUNE_RESULT_FILE when the job wrote it
  std::vector<MetricRegex> metrics_regex;  // else (or when absent) these over stdout
  std::vector<std::string> gpus;           // devices handed out through CUDA_VISIBLE_DEVICES
  int gpus_per_trial = 1;
  std::map<std::string, std::string> env;  // added to every job's environment
  std::string workdir;          // base directory when the host gives a trial none
  int log_tail_lines = 20;      // stderr lines quoted in a failed trial's error
  std::vector<std::string> oom_patterns;   // a failed job whose stderr has one of these is "oom"

  // Trials that can run at once: parallel, limited by the GPUs when a GPU list is given.
  int capacity() const;
};

// Parses and checks the options; throws cotune::Error(INVALID_ARGUMENT) naming the field.
ProcessOptions parse_process_options(std::string_view json);

}  // namespace cotune_process

#endif  // COTUNE_EXECUTOR_PROCESS_OPTIONS_HPP_
