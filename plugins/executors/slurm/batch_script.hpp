// The sbatch script of one trial, or of several trials as one job array (task i runs trial i).
// Each trial's part enters its working directory, exports its environment, runs the command with
// stdout/stderr in the working directory, and records "<exit code> <job id>" in exit_status, so
// that the outcome survives after Slurm has forgotten the job. Every value is single-quoted; the
// values were checked against their domains before (command_template.hpp).
#ifndef COTUNE_EXECUTOR_BATCH_SCRIPT_HPP_
#define COTUNE_EXECUTOR_BATCH_SCRIPT_HPP_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "slurm_options.hpp"

namespace cotune_slurm {

inline constexpr const char* kExitStatusName = "exit_status";

// What one trial runs.
struct TrialCommand {
  std::string workdir;
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
};

// 'text' with embedded single quotes escaped for sh.
std::string shell_quote(std::string_view text);

// The #SBATCH header (without --array and --output), for a job or `sbatch --test-only`.
std::string sbatch_header(const SlurmOptions& options);

// The whole script. `slurm_output` is sbatch's --output pattern (slurm-%j.out or slurm-%A_%a.out).
std::string render_batch_script(const SlurmOptions& options, const std::vector<const TrialCommand*>& trials,
                                const std::string& slurm_output);

}  // namespace cotune_slurm

#endif  // COTUNE_EXECUTOR_BATCH_SCRIPT_HPP_
