// Runs the Slurm client programs (sbatch, squeue, sacct, scancel, sinfo) and captures their output.
// Each call is counted, so that the polling load on the controller can be measured.
#ifndef COTUNE_EXECUTOR_SLURM_CLI_HPP_
#define COTUNE_EXECUTOR_SLURM_CLI_HPP_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cotune_slurm {

struct CommandOutput {
  int exit_code = 0;  // -1 when killed by a signal or the timeout
  std::string out, err;
  bool ok() const { return exit_code == 0; }
};

class SlurmCli {
 public:
  // `bin_dir`: where the programs are ("" for PATH). `timeout_s` bounds every call.
  SlurmCli(std::string bin_dir, double timeout_s);

  // The path of a program, or "" when it cannot be found.
  std::string find(const std::string& program) const;

  // Runs `program args...` (stdin from /dev/null), waiting at most the timeout. Throws cotune::Error(UNAVAILABLE) when the
  // program cannot be started.
  CommandOutput run(const std::string& program, const std::vector<std::string>& args) const;

  // How many times each program was run.
  const std::map<std::string, int64_t>& calls() const { return calls_; }

 private:
  std::string bin_dir_;
  double timeout_s_;
  mutable std::map<std::string, int64_t> calls_;
};

}  // namespace cotune_slurm

#endif  // COTUNE_EXECUTOR_SLURM_CLI_HPP_
