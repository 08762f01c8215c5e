// Options of the Slurm executor (documented in docs/executors.md):
//   {"command": ["prog", "--tp", "{tp}"], "partition": "gpu", "account": "proj", "qos": "normal",
//    "nodes": 1, "gpus_per_node": 8, "cpus_per_task": 8, "mem": "64G", "time_limit": "00:30:00",
//    "sbatch_options": ["--constraint=h100"], "setup": ["module load cuda"], "env": {"K": "V"},
//    "parallel": 16, "array": true, "max_attempts": 3, "poll_min_s": 1, "poll_max_s": 30,
//    "cancel_on_destroy": true, "result_file": true, "metrics_regex": {...}, "log_dir": "...",
//    "workdir": "...", "slurm_bin": "", "job_name": "cotune", "command_timeout_s": 60,
//    "log_tail_lines": 20, "check_on_create": true}
#ifndef COTUNE_EXECUTOR_SLURM_OPTIONS_HPP_
#define COTUNE_EXECUTOR_SLURM_OPTIONS_HPP_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <cotune/support/command_template.hpp>
#include <cotune/support/trial_files.hpp>

namespace cotune_slurm {

// Command templates and trial files: the SDK's support library (cotune/support/).
using namespace cotune::support;  // NOLINT(google-build-using-namespace)

struct SlurmOptions {
  CommandTemplate command;
  std::string partition, account, qos, mem, time_limit, job_name = "cotune";
  int nodes = 1, gpus_per_node = 0, cpus_per_task = 0;
  std::vector<std::string> sbatch_options;  // extra "#SBATCH" lines, each "--name[=value]"
  std::vector<std::string> setup;           // shell lines run before the command in the job script
  std::map<std::string, std::string> env;
  int parallel = 64;         // trials in flight
  bool array = true;         // trials submitted back to back (before the next poll) go as one array
  int max_attempts = 3;      // NODE_FAIL / PREEMPTED resubmissions stop here
  double poll_min_s = 1, poll_max_s = 30;  // adaptive interval between squeue calls
  bool cancel_on_destroy = true;  // scancel jobs still held (not released) when the executor goes
  bool result_file = true;
  std::vector<MetricRegex> metrics_regex;
  std::string log_dir, workdir, slurm_bin;
  double command_timeout_s = 60;
  int log_tail_lines = 20;
  bool check_on_create = true;  // sbatch --test-only of the options at create
};

// Parses and checks the options; throws cotune::Error(INVALID_ARGUMENT) naming the field.
SlurmOptions parse_slurm_options(std::string_view json);

}  // namespace cotune_slurm

#endif  // COTUNE_EXECUTOR_SLURM_OPTIONS_HPP_
