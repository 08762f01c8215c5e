// Slurm job states and what they mean for a trial.
#ifndef COTUNE_EXECUTOR_SLURM_STATE_HPP_
#define COTUNE_EXECUTOR_SLURM_STATE_HPP_

#include <map>
#include <string>
#include <string_view>

namespace cotune_slurm {

enum class SlurmOutcome {
  kPending,    // PENDING, REQUEUED, CONFIGURING, SUSPENDED, ...
  kRunning,    // RUNNING, COMPLETING, SIGNALING, STAGE_OUT, ...
  kCompleted,  // COMPLETED: metrics from the result file
  kFailed,     // FAILED, BOOT_FAIL, DEADLINE, SPECIAL_EXIT, ...
  kOom,        // OUT_OF_MEMORY
  kTimeout,    // TIMEOUT
  kRequeue,    // NODE_FAIL, PREEMPTED: submitted again while attempts remain
  kCancelled,  // CANCELLED (sacct says "CANCELLED by 0")
};

SlurmOutcome classify_state(std::string_view state);

// One job's line from squeue or sacct.
struct SlurmJobInfo {
  std::string state;   // "COMPLETED"
  int exit_code = 0;   // the job script's exit code
  int signal = 0;      // the signal that ended it, 0 when none
  std::string reason;  // squeue's reason ("Resources", "NonZeroExitCode")
};

// Parses `squeue -h -r -O JobArrayID:64|,State:32|,exit_code:16|,Reason:64|` output: id -> info.
std::map<std::string, SlurmJobInfo> parse_squeue(std::string_view text);

// Parses `sacct -n -P -X -o JobID,State,ExitCode` output (ExitCode "code:signal").
std::map<std::string, SlurmJobInfo> parse_sacct(std::string_view text);

}  // namespace cotune_slurm

#endif  // COTUNE_EXECUTOR_SLURM_STATE_HPP_
