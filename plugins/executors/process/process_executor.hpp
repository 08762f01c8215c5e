// The process executor: runs each trial as a local process from an argv template, at most
// `parallel` at a time (queued beyond that), each in its own process group with a timeout, GPUs
// handed out through CUDA_VISIBLE_DEVICES, metrics read from a result file or stdout.
#ifndef COTUNE_EXECUTOR_PROCESS_EXECUTOR_HPP_
#define COTUNE_EXECUTOR_PROCESS_EXECUTOR_HPP_

#include <cotune/cotune.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "child_process.hpp"
#include "process_options.hpp"

namespace cotune_process {

class ProcessExecutor {
  using Clock = std::chrono::steady_clock;

  // A trial's process, owned by the executor so that it is reaped even after the host released it.
  struct Run {
    enum class Phase { kQueued, kRunning, kDone } phase = Phase::kQueued;
    SpawnRequest request;
    std::string workdir;
    std::unique_ptr<ChildProcess> child;
    std::vector<std::string> gpus;
    Clock::time_point started, term_sent;
    bool term_pending = false;  // SIGTERM sent, SIGKILL follows after kill_grace_s
    bool timed_out = false, cancelled = false, released = false;
    cotune::JobResult result;
  };

 public:
  // The handle the host holds; it shares the run so that destroy and release may come in any order.
  struct Job {
    std::shared_ptr<Run> run;
    ~Job() {
      if (run) run->released = true;
    }
  };

  explicit ProcessExecutor(std::string_view options_json);
  ~ProcessExecutor();  // kills and reaps every process still running

  int32_t capacity() const { return options_.capacity(); }
  std::unique_ptr<Job> submit(const cotune_trial& trial);
  // A trial of an earlier host (its external id is "PID@START"): the process is not this one's
  // child, so it cannot be waited for; if it still runs, its group is stopped. Always throws
  // COTUNE_ERR_UNAVAILABLE, so that the host submits the trial again -- never beside the old one.
  std::unique_ptr<Job> attach(const cotune_trial& trial, std::string_view external_id);
  const cotune::JobResult& poll(Job& job, int32_t timeout_ms);
  void cancel(Job& job);
  // Every placeholder of the command names a parameter of the study's space (or a reserved one).
  void check_study(const cotune_trial& study) const {
    options_.command.check_placeholders(study.params, study.num_params);
  }

 private:
  std::string trial_workdir(const cotune_trial& trial, const std::string& trial_id);
  // Reaps, enforces timeouts, starts queued runs, drops finished runs the host released.
  void advance();
  void start(Run& run);
  void finish(Run& run);
  // Sleeps until a child exits or `until`, whichever comes first.
  void wait_for_event(Clock::time_point until);
  Clock::time_point next_kill_deadline() const;

  ProcessOptions options_;
  std::vector<std::shared_ptr<Run>> runs_;  // in submission order
  std::vector<std::string> free_gpus_;
  std::string fallback_dir_;  // created on demand when neither the trial nor the options give one
  int running_ = 0;
};

}  // namespace cotune_process

#endif  // COTUNE_EXECUTOR_PROCESS_EXECUTOR_HPP_
