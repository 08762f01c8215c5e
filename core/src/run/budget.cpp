#include "run/budget.hpp"

#include <algorithm>
#include <limits>
#include <sstream>

namespace cotune::core {
namespace {

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

BudgetTracker::BudgetTracker(const StudySpec& spec) : budget_(spec.budget) {
  for (const ObjectiveSpec& o : spec.objectives) directions_.push_back(o.direction);
}

void BudgetTracker::record(TrialStatus status, const Evaluation* evaluation, double gpu_hours) {
  last_improved_ = false;
  if (status != TrialStatus::kUnavailable) gpu_hours_ += gpu_hours;
  if (status == TrialStatus::kUnavailable) ++unavailable_in_a_row_;
  if (!counts_against_budget(status)) return;
  unavailable_in_a_row_ = 0;
  ++counted_;
  if (evaluation != nullptr && evaluation->feasible) {
    const std::vector<double>& v = evaluation->values;
    if (directions_.size() > 1) {
      bool dominated = false;
      for (const auto& p : feasible_points_) {
        dominated = !better(v[0], p[0], directions_[0]) && !better(v[1], p[1], directions_[1]) &&
                    (better(p[0], v[0], directions_[0]) || better(p[1], v[1], directions_[1]) || p == v);
        if (dominated) break;
      }
      feasible_points_.push_back(v);
      last_improved_ = !dominated;
    } else {
      last_improved_ = !best_ || better(v[0], *best_, directions_[0]);
    }
    if (!best_ || better(v[0], *best_, directions_[0])) best_ = v[0];
    if (budget_.target && !better(*budget_.target, v[0], directions_[0])) target_reached_ = true;
  }
  since_improvement_ = last_improved_ ? 0 : since_improvement_ + 1;
}

std::int64_t BudgetTracker::startable(std::int64_t in_flight) const {
  if (!budget_.trials) return std::numeric_limits<std::int64_t>::max();
  return std::max<std::int64_t>(0, *budget_.trials - counted_ - in_flight);
}

std::string BudgetTracker::done_reason(double elapsed_s) const {
  if (target_reached_) return "the target " + number(*budget_.target) + " was reached";
  if (budget_.trials && counted_ >= *budget_.trials)
    return "the trial budget (" + std::to_string(*budget_.trials) + ") is spent";
  if (budget_.patience && since_improvement_ >= *budget_.patience)
    return std::to_string(*budget_.patience) + " trials in a row brought no improvement";
  const std::int64_t max_unavailable = budget_.max_unavailable.value_or(Budget::kDefaultMaxUnavailable);
  if (unavailable_in_a_row_ >= max_unavailable)
    return std::to_string(unavailable_in_a_row_) +
           " trials in a row were unavailable (the executor has no answer for what the searcher proposes; "
           "budget max_unavailable is " + std::to_string(max_unavailable) + ")";
  if (budget_.wall_time_s && elapsed_s >= *budget_.wall_time_s)
    return "the wall-time budget (" + number(*budget_.wall_time_s) + " s) is spent";
  if (budget_.gpu_hours && gpu_hours_ >= *budget_.gpu_hours)
    return "the GPU-hour budget (" + number(*budget_.gpu_hours) + ") is spent";
  return "";
}

bool BudgetTracker::hard_limit_spent(double elapsed_s) const {
  return (budget_.wall_time_s && elapsed_s >= *budget_.wall_time_s) ||
         (budget_.gpu_hours && gpu_hours_ >= *budget_.gpu_hours);
}

std::optional<double> BudgetTracker::remaining_s(double elapsed_s, std::int64_t done_this_run) const {
  std::optional<double> left;
  if (budget_.wall_time_s) left = std::max(0.0, *budget_.wall_time_s - elapsed_s);
  if (budget_.trials && done_this_run > 0) {
    double pace = elapsed_s / static_cast<double>(done_this_run);
    double by_trials = pace * static_cast<double>(std::max<std::int64_t>(0, *budget_.trials - counted_));
    left = left ? std::min(*left, by_trials) : by_trials;
  }
  return left;
}

double trial_gpu_hours(const std::string& metrics_json, std::optional<double> started_at,
                       std::optional<double> finished_at, double trace_gpus) {
  double gpus = metric_value(metrics_json, "gpus").value_or(trace_gpus);
  std::optional<double> seconds = metric_value(metrics_json, "wall_time_s");
  if (!seconds && started_at && finished_at) seconds = std::max(0.0, *finished_at - *started_at);
  if (!seconds || !(gpus > 0)) return 0;
  return gpus * *seconds / 3600.0;
}

}  // namespace cotune::core
