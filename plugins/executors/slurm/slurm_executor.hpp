// The Slurm executor: submits trials with sbatch (trials submitted back to back go as one job
// array), follows every job in flight with one squeue call per polling round at an adaptive
// interval, maps Slurm's states to trial statuses, resubmits after node failure or preemption,
// cancels with scancel, and re-attaches to jobs by id after a restart.
#ifndef COTUNE_EXECUTOR_SLURM_EXECUTOR_HPP_
#define COTUNE_EXECUTOR_SLURM_EXECUTOR_HPP_

#include <cotune/cotune.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "batch_script.hpp"
#include "slurm_cli.hpp"
#include "slurm_options.hpp"
#include "slurm_state.hpp"

namespace cotune_slurm {

class SlurmExecutor {
  using Clock = std::chrono::steady_clock;

  struct Track {
    enum class Phase { kBuffered, kSubmitted, kDone } phase = Phase::kBuffered;
    std::string trial_id, log_dir;
    TrialCommand command;
    std::string slurm_log;  // sbatch's --output file of the current attempt
    bool cancel_requested = false, released = false;
    cotune::JobResult result;  // external_id: "JOBID" or "JOBID_TASK"
  };

 public:
  struct Job {
    std::shared_ptr<Track> track;
    ~Job() {
      if (track) track->released = true;
    }
  };

  explicit SlurmExecutor(std::string_view options_json);
  ~SlurmExecutor();

  int32_t capacity() const { return options_.parallel; }
  std::unique_ptr<Job> submit(const cotune_trial& trial);
  const cotune::JobResult& poll(Job& job, int32_t timeout_ms);
  void cancel(Job& job);
  std::unique_ptr<Job> attach(const cotune_trial& trial, std::string_view external_id);
  // Every placeholder of the command names a parameter of the study's space (or a reserved one).
  void check_study(const cotune_trial& study) const {
    options_.command.check_placeholders(study.params, study.num_params);
  }

 private:
  std::shared_ptr<Track> prepare(const cotune_trial& trial);
  void flush();  // submits buffered trials (one job, or one array)
  void submit_batch(const std::vector<Track*>& batch);
  void refresh();  // one squeue for all jobs in flight; sacct and exit files for the rest
  void settle(Track& t, const SlurmJobInfo& info);
  // A job squeue no longer lists: its exit status file, else cancelled (when its array's record
  // says the task was cancelled before it started), else failed.
  void settle_from_exit_file(Track& t, bool cancelled_before_start);
  void complete(Track& t);  // COMPLETED: read the metrics
  std::string log_tail(const Track& t) const;
  void forget_released();

  SlurmOptions options_;
  SlurmCli cli_;
  std::vector<std::shared_ptr<Track>> tracks_;
  std::vector<std::shared_ptr<Track>> buffer_;
  Clock::time_point next_refresh_{};
  double interval_s_;
  bool sacct_works_ = true;
  int batches_ = 0;
};

}  // namespace cotune_slurm

#endif  // COTUNE_EXECUTOR_SLURM_EXECUTOR_HPP_
