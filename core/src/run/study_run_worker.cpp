// Worker mode (`cotune run --worker`): several processes, on one host or many, share a study. Each
// proposes and runs its own trials (claimed in the store), learns from what the others finish, and
// takes over the trials in flight of a worker that is gone.
#include <cotune/core/abi/log.hpp>
#include <cotune/core/run/search_context.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <algorithm>
#include <limits>

#include "run/study_run.hpp"

namespace cotune::core {
namespace {

// How often a worker looks for trials of workers that are gone (a dead pid on this host is seen at
// once; another host's worker after its heartbeat is stale).
constexpr auto kOrphansEvery = std::chrono::seconds(1);

}  // namespace

void StudyRun::sync_others() {
  std::vector<TrialRecord> rows = store_->trials_from_seq(study_.id, sync_from_seq_);
  const size_t p = space_->num_params();
  std::optional<std::int64_t> first_in_flight;
  std::int64_t last_seq = sync_from_seq_ - 1;
  std::int64_t in_flight = 0;
  std::vector<Observation> batch;
  for (TrialRecord& t : rows) {
    last_seq = t.seq;
    const bool finished = is_finished(t.status);
    if (!finished) {
      if (!first_in_flight) first_in_flight = t.seq;
      ++in_flight;
    }
    if (accounted_.count(t.seq)) continue;
    std::vector<double> config;
    try {
      config = space_->parse(t.config_json);
    } catch (const std::exception& e) {
      log(COTUNE_LOG_WARN, "study",
          "trial " + std::to_string(t.seq) + " of another worker: the space cannot read its configuration (" + e.what() +
              "); ignored");
      if (finished) accounted_.insert(t.seq);
      continue;
    }
    seen_.insert(space_->key(config.data()));
    if (!finished) continue;
    accounted_.insert(t.seq);
    // As restore() does for the trials of an earlier run: the surrogate, the budget, the searcher.
    const std::string metrics = t.metrics_json.value_or("{}");
    if (t.status == TrialStatus::kOk && t.metrics_json) {
      const TrainingRowOrigin origin{t.objective.has_value(), t.id, t.seq, t.objective.value_or(0)};
      add_training(config.data(), metrics, origin);
    }
    if (t.status == TrialStatus::kOom) add_out_of_memory(config.data());
    const double trace_gpus = metric_value(metrics, "gpus") ? 0 : trace_gpus_of(config.data());
    std::optional<Evaluation> eval;
    if (t.status == TrialStatus::kOk) eval = evaluate(spec_.objectives, nlohmann::json::parse(metrics, nullptr, false));
    budget_.record(t.status, eval ? &*eval : nullptr, trial_gpu_hours(metrics, t.started_at, t.finished_at, trace_gpus));
    if (budget_.last_improved()) best_config_ = config_summary(*space_, config.data());
    if (observed_.count(t.seq) || t.status == TrialStatus::kCancelled) continue;
    Observation o;
    o.seq = t.seq;
    o.config.assign(config.begin(), config.begin() + static_cast<std::ptrdiff_t>(p));
    o.status = status_from_name(to_string(t.status));
    o.score = std::numeric_limits<double>::quiet_NaN();
    if (t.status == TrialStatus::kOk)
      o.score = t.objective ? normalised_score(*t.objective, spec_.objectives.front().direction)
                            : -std::numeric_limits<double>::infinity();
    batch.push_back(std::move(o));
  }
  observe(batch);
  others_in_flight_ = std::max<std::int64_t>(
      0, in_flight - static_cast<std::int64_t>(running_.size()) - static_cast<std::int64_t>(resubmit_.size()));
  sync_from_seq_ = first_in_flight.value_or(last_seq + 1);
  accounted_.erase(accounted_.begin(), accounted_.lower_bound(sync_from_seq_));
}

void StudyRun::adopt_orphans(bool now) {
  const auto at = std::chrono::steady_clock::now();
  if (!now && at - orphans_checked_ < kOrphansEvery) return;
  orphans_checked_ = at;
  workers_ = std::max<size_t>(1, store_->study_workers(study_.id).size());
  std::vector<TrialRecord> orphans =
      store_->claim_orphans(study_.id, lease_, [&](const StudyLease& w) { return holds(w); });
  for (TrialRecord& t : orphans) {
    // Ours already (a claim made before a restart of this very pid is not possible; be safe).
    const auto ours = [&](const RunningTrial& r) { return r.trial_id == t.id; };
    if (std::any_of(running_.begin(), running_.end(), ours) || std::any_of(resubmit_.begin(), resubmit_.end(), ours))
      continue;
    std::vector<double> config;
    try {
      config = space_->parse(t.config_json);
    } catch (const std::exception& e) {
      log(COTUNE_LOG_WARN, "study",
          "trial " + std::to_string(t.seq) + ": the space cannot read its configuration (" + e.what() + "); not resumed");
      continue;
    }
    seen_.insert(space_->key(config.data()));
    progress_.note("taking over trial " + std::to_string(t.seq) + " of a worker that is gone");
    adopt(t, std::move(config));
  }
}

}  // namespace cotune::core
