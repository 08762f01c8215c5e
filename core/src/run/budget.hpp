// The budget and stopping rules of a study, fed with each finished trial in the order they ended.
//
// - trials: those counts_against_budget() takes (store_records.hpp: ok, failed, oom, timeout; not
//   cancelled or unavailable, which measured nothing). The report counts with the same rule.
// - wall_time_s: the time of this `cotune run` (a resumed study gets the full limit again).
// - gpu_hours: per trial, GPUs x duration. GPUs: the metric "gpus" when the executor reports it,
//   else the GPUs of the configuration's step trace. Duration: the metric "wall_time_s" when reported,
//   else the time between the trial's start and its end in the store. Trials that ran (any status
//   but unavailable) count.
// - target: a feasible trial whose (first) objective reaches the target value.
// - patience: this many counted trials in a row without improvement (a better feasible objective;
//   with two objectives, a feasible trial that no earlier one dominates).
// - max_unavailable: this many unavailable trials in a row (default 1000): the executor (replay)
//   has no answer for what the searcher proposes. A counted trial ends the streak.
#ifndef COTUNE_RUN_BUDGET_HPP_
#define COTUNE_RUN_BUDGET_HPP_

#include <cotune/core/model/objective.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cotune::core {

class BudgetTracker {
 public:
  explicit BudgetTracker(const StudySpec& spec);

  // One finished trial; `evaluation` for ok trials (nullptr otherwise).
  void record(TrialStatus status, const Evaluation* evaluation, double gpu_hours);

  std::int64_t counted() const { return counted_; }
  double gpu_hours() const { return gpu_hours_; }
  std::optional<double> best() const { return best_; }
  // True once a counted trial met every constraint and reported its objectives.
  bool any_feasible() const { return best_.has_value(); }
  std::int64_t since_improvement() const { return since_improvement_; }
  // True when the last record() improved the best (or joined the Pareto front).
  bool last_improved() const { return last_improved_; }

  // How many more trials may be started with `in_flight` already running (INT64_MAX without a
  // trial budget).
  std::int64_t startable(std::int64_t in_flight) const;
  // Why the study is done proposing ("" while it goes on), given the seconds elapsed in this run.
  std::string done_reason(double elapsed_s) const;
  // True when a hard limit (wall time, GPU-hours) is spent: trials in flight are cancelled.
  bool hard_limit_spent(double elapsed_s) const;
  // Seconds left by the wall-time limit or by the pace so far toward the trial budget (nullopt when
  // neither says).
  std::optional<double> remaining_s(double elapsed_s, std::int64_t done_this_run) const;

 private:
  Budget budget_;
  std::vector<Direction> directions_;
  std::int64_t counted_ = 0;
  double gpu_hours_ = 0;
  std::optional<double> best_;
  bool target_reached_ = false;
  std::int64_t since_improvement_ = 0;
  std::int64_t unavailable_in_a_row_ = 0;
  bool last_improved_ = false;
  std::vector<std::vector<double>> feasible_points_;  // two objectives: every feasible trial so far
};

// GPU-hours of one finished trial (see above); 0 when neither the GPUs nor the duration is known.
double trial_gpu_hours(const std::string& metrics_json, std::optional<double> started_at,
                       std::optional<double> finished_at, double trace_gpus);

}  // namespace cotune::core

#endif  // COTUNE_RUN_BUDGET_HPP_
