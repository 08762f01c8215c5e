// The study loop: fill free slots with proposals, poll what is in flight, stop on the budget, a
// stopping rule or a stop request.
#include <cotune/core/log.hpp>
#include <cotune/core/search_context.hpp>

#include <algorithm>
#include <thread>

#include "study/searcher_state.hpp"
#include "study/study_run.hpp"

namespace cotune::core {
namespace {

constexpr auto kFirstSleep = std::chrono::milliseconds(1);
constexpr auto kLongestSleep = std::chrono::milliseconds(100);
constexpr auto kCancelGrace = std::chrono::seconds(60);  // how long cancelled jobs get to report
constexpr int kMaxEmptyRounds = 3;  // proposal rounds with nothing new before the space counts as exhausted

}  // namespace

double StudyRun::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

ProgressState StudyRun::progress_state() const {
  ProgressState s;
  s.done = budget_.counted();
  s.in_flight = static_cast<std::int64_t>(running_.size() + resubmit_.size());
  s.budget = spec_.budget.trials;
  s.metric = spec_.objectives.front().metric;
  s.best = budget_.best();
  s.best_config = best_config_;
  s.elapsed_s = elapsed_s();
  s.remaining_s = budget_.remaining_s(s.elapsed_s, finished_this_run_);
  return s;
}

void StudyRun::loop() {
  auto sleep = kFirstSleep;
  for (;;) {
    if (options_.heartbeat != nullptr) options_.heartbeat->fetch_add(1);
    handle_stop_requests();
    renew_lease();
    const size_t finished = poll_round();
    const double elapsed = elapsed_s();
    if (!stopping_ && !done_) check_budget(elapsed);
    const size_t before = running_.size();
    if (!stopping_ && !done_) fill_slots();
    if ((stopping_ || done_) && resubmit_.empty() && running_.empty()) break;
    if (cancel_deadline_ && std::chrono::steady_clock::now() > *cancel_deadline_) {
      // Jobs that never confirmed the cancel keep their "running" record (the next run sees them).
      log(COTUNE_LOG_WARN, "study",
          std::to_string(running_.size()) + " cancelled trial(s) did not report back in time; left as running");
      running_.clear();
      break;
    }
    progress_.update(progress_state(), elapsed);
    if (finished > 0 || running_.size() != before) {
      sleep = kFirstSleep;
      continue;
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::duration_cast<std::chrono::milliseconds>(kLongestSleep));
  }
  if (reason_.empty()) reason_ = "no trials left to run";
}

void StudyRun::handle_stop_requests() {
  const int level = options_.stop ? options_.stop->load() : 0;
  if (level <= 0) return;
  if (!stopping_) {
    stopping_ = true;
    reason_ = "stopped on request";
    resubmit_.clear();  // never started in this run; they stay recorded as in flight
    const bool cancel = spec_.on_stop == OnStop::kCancel || level >= 2;
    progress_.note("stopping: " + std::string(cancel ? "cancelling" : "waiting for") + " " +
                   std::to_string(running_.size()) + " trial(s) in flight" +
                   (cancel ? "" : " (interrupt again to cancel them)"));
    if (cancel) cancel_all();
  } else if (level >= 2 && !cancelled_all_) {
    progress_.note("stopping: cancelling " + std::to_string(running_.size()) + " trial(s) in flight");
    cancel_all();
  }
}

void StudyRun::check_budget(double elapsed_s) {
  std::string why = budget_.done_reason(elapsed_s);
  if (why.empty()) return;
  done_ = true;
  reason_ = why;
  if (budget_.hard_limit_spent(elapsed_s) && !running_.empty()) {
    progress_.note(why + ": cancelling " + std::to_string(running_.size()) + " trial(s) in flight");
    cancel_all();
  }
  resubmit_.clear();
}

void StudyRun::cancel_all() {
  cancelled_all_ = true;
  cancel_deadline_ = std::chrono::steady_clock::now() + kCancelGrace;
  for (RunningTrial& r : running_) {
    if (r.cancel_requested) continue;
    r.cancel_requested = true;
    try {
      r.job->cancel();
    } catch (const std::exception& e) {
      log(COTUNE_LOG_WARN, "study", "trial " + std::to_string(r.seq) + ": cannot cancel: " + e.what());
    }
  }
}

void StudyRun::refit(bool every_row) {
  // A refit costs more as the data grows (krr's leave-one-out search, an MLP's epochs), while one more
  // row changes the fit less. So refit at every new row while the data is small, and once it has grown
  // by 1/32 (about 3 %) beyond that: the amortised cost per proposal stays flat as history grows.
  const size_t rows = train_values_.size();
  if (every_row ? rows == fitted_on_
                : fitted_on_ != SIZE_MAX && rows < fitted_on_ + std::max<size_t>(1, fitted_on_ / 32))
    return;
  surrogate_->fit(train_configs_.data(), train_values_.size(), train_values_.data());
  fitted_on_ = train_values_.size();
  std::string state = surrogate_->save_state();
  if (!state.empty()) store_->save_predictor_state(study_.id, std::vector<std::uint8_t>(state.begin(), state.end()));
}

void StudyRun::fill_slots() {
  std::int64_t free = static_cast<std::int64_t>(capacity_) - static_cast<std::int64_t>(running_.size());
  // Trials interrupted in an earlier run come first: they are already recorded and counted.
  while (free > 0 && !resubmit_.empty()) {
    RunningTrial r = std::move(resubmit_.front());
    resubmit_.pop_front();
    if (launch(r, nullptr)) running_.push_back(std::move(r));
    --free;
  }
  free = std::min(free, budget_.startable(static_cast<std::int64_t>(running_.size())));
  if (free <= 0) {
    record_starts();
    return;
  }
  std::vector<RunningTrial> fresh = propose(static_cast<size_t>(free));
  for (RunningTrial& r : fresh)
    if (launch(r, nullptr)) running_.push_back(std::move(r));
  record_starts();
  if (!fresh.empty() || !running_.empty()) {
    empty_rounds_ = 0;
    return;
  }
  if (++empty_rounds_ >= kMaxEmptyRounds) {
    done_ = true;
    reason_ = "the searcher has no unmeasured configuration left to propose";
  }
}

void StudyRun::observe(const std::vector<Observation>& batch) {
  if (batch.empty()) return;
  const size_t p = space_->num_params();
  std::vector<double> configs, scores;
  std::vector<int32_t> statuses;
  for (const Observation& o : batch) {
    configs.insert(configs.end(), o.config.begin(), o.config.begin() + p);
    scores.push_back(o.score);
    statuses.push_back(o.status);
    observed_.insert(o.seq);
  }
  searcher_->observe(configs.data(), batch.size(), scores.data(), statuses.data());
  save_searcher_state();
}

void StudyRun::save_searcher_state() {
  if (!searcher_->can_save()) return;
  SearcherState state{observed_, searcher_->save()};
  store_->save_searcher_state(study_.id, encode_searcher_state(state));
}

}  // namespace cotune::core
