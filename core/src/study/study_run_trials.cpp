// Trials of a study run: turning proposals into recorded trials, submitting them, polling them and
// committing what they measured.
#include <cotune/core/canonical_json.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/log.hpp>
#include <cotune/core/search_context.hpp>
#include <cotune/core/study_setup.hpp>

#include <cmath>
#include <filesystem>
#include <limits>

#include "study/study_run.hpp"

namespace cotune::core {
namespace {

constexpr int kMaxFailedSubmissions = 3;  // in a row: the executor itself is broken, not one trial
// Trials in a row that finished but did not report an objective metric: the jobs do not write it
// (a name the space does not know passes the check before the first trial), and every further
// trial would spend budget on a measurement the study cannot use.
constexpr int kMaxUnreportedObjective = 3;

cotune_str cs(const std::string& s) { return {s.data(), s.size()}; }

double unix_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

TrialStatus trial_status(int32_t status) {
  auto s = trial_status_from_string(status_name(status));
  if (!s) throw std::runtime_error("executor reported an unknown trial status " + std::to_string(status));
  return *s;
}

}  // namespace

std::vector<RunningTrial> StudyRun::propose(size_t n) {
  refit();
  const size_t p = space_->num_params();
  const Direction direction = spec_.objectives.front().direction;
  SearchContext context(*space_, *surrogate_, direction, seen_);
  std::vector<double> out(n * p);
  const size_t got = searcher_->propose(context.get(), n, out.data());
  save_searcher_state();

  std::vector<double> predicted(got, std::numeric_limits<double>::quiet_NaN());
  if (got > 0 && surrogate_->informed()) {
    std::vector<int32_t> valid(got);
    space_->check(out.data(), got, valid.data());
    for (size_t i = 0; i < got; ++i)
      if (valid[i]) surrogate_->predict(out.data() + i * p, 1, &predicted[i], nullptr);
  }

  std::vector<RunningTrial> fresh;
  for (size_t i = 0; i < got; ++i) {
    const double* config = out.data() + i * p;
    std::string key = space_->key(config);
    if (seen_.count(key)) {
      log(COTUNE_LOG_DEBUG, "study", "the searcher proposed a configuration already seen; dropped: " + key);
      continue;
    }
    if (!space_->valid(config)) {
      log(COTUNE_LOG_WARN, "study", "the searcher proposed an invalid configuration; dropped: " + space_->explain(config));
      continue;
    }
    std::string config_json = space_->render(config, COTUNE_RENDER_JSON);
    NewTrial n;
    n.config_key = config_key(nlohmann::json::parse(config_json));
    n.config_json = config_json;
    n.status = TrialStatus::kPending;
    if (std::isfinite(predicted[i])) n.predicted = predicted[i];
    n.executor = executor_->info().name;
    n.fingerprint_json = fingerprint_json_;
    seen_.insert(key);
    std::optional<TrialId> id = store_->add_trial(study_.id, n);
    if (!id) continue;  // the store already has this configuration under another spelling
    RunningTrial r;
    r.trial_id = id->id;
    r.seq = id->seq;
    r.config.assign(config, config + p);
    r.predicted = n.predicted;
    fresh.push_back(std::move(r));
  }
  return fresh;
}

bool StudyRun::launch(RunningTrial& r, const std::string* attach_id) {
  const double* config = r.config.data();
  std::string config_json = space_->render(config, COTUNE_RENDER_JSON);
  std::string launch_args;
  if (launch_format_ != COTUNE_RENDER_JSON && !space_->try_render(config, launch_format_, &launch_args))
    launch_args.clear();
  std::string trial_id = spec_.name + "/" + std::to_string(r.seq);
  std::string workdir = runs_dir_ + "/" + std::to_string(r.seq);
  std::error_code ec;
  std::filesystem::create_directories(workdir, ec);
  if (ec) throw std::runtime_error("cannot create the trial directory " + workdir + ": " + ec.message());

  cotune_trial t = empty_trial();
  t.trial_id = cs(trial_id);
  t.config_json = cs(config_json);
  t.launch_args = cs(launch_args);
  t.workload_json = cs(workload_json_);
  t.workdir = cs(workdir);
  t.params = space_->raw_params();
  t.num_params = space_->num_params();
  t.config = config;
  // lower() is borrowed until the next lower(): take it last, just before the executor reads it.
  if (space_->can_lower()) {
    t.trace = &space_->lower(config);
    r.trace_gpus = t.trace->gpus;
  }

  if (attach_id != nullptr) {
    try {
      r.job = executor_->attach(t, *attach_id);
      r.reattached = true;
      return true;
    } catch (const std::exception& e) {
      log(COTUNE_LOG_WARN, "study",
          "trial " + std::to_string(r.seq) + ": cannot re-attach to job " + *attach_id + " (" + e.what() +
              "); submitting it again");
      if (space_->can_lower()) t.trace = &space_->lower(config);
    }
  }
  try {
    r.job = executor_->submit(t);
    r.start_recorded = false;
  } catch (const PluginError& e) {
    r.job.reset();
    // Refused before it ran: the executor could not launch it (its options, the cluster), which says
    // nothing of the configuration. Unavailable, so that no study learns it as a failed run.
    TrialResult refused;
    refused.status = COTUNE_STATUS_UNAVAILABLE;
    refused.error = std::string("the executor refused the submission: ") + e.what();
    observe({commit(r, refused)});
    if (++failed_submissions_ >= kMaxFailedSubmissions)
      throw std::runtime_error("the executor '" + executor_->info().name + "' refused " +
                               std::to_string(kMaxFailedSubmissions) + " submissions in a row; the last: " + e.what());
    return false;
  }
  failed_submissions_ = 0;
  r.reattached = false;
  return true;
}

void StudyRun::record_starts() {
  for (RunningTrial& r : running_) {
    if (r.start_recorded) continue;
    r.start_recorded = true;
    std::string external_id;
    try {
      external_id = r.job->poll(0).external_id;
    } catch (const PluginError& e) {
      // The next poll round reports the failure; the start is still worth recording.
      log(COTUNE_LOG_WARN, "study", "trial " + std::to_string(r.seq) + ": " + e.what());
    }
    store_->update_trial_started(r.trial_id, external_id);
  }
}

size_t StudyRun::poll_round() {
  record_starts();
  std::vector<Observation> batch;
  size_t ended = 0;
  for (size_t i = 0; i < running_.size();) {
    RunningTrial& r = running_[i];
    TrialResult result;
    try {
      result = r.job->poll(0);
    } catch (const PluginError& e) {
      result.status = COTUNE_STATUS_FAILED;
      result.error = std::string("the executor lost the trial: ") + e.what();
    }
    if (!result.finished()) {
      ++i;
      continue;
    }
    ++ended;
    if (result.status == COTUNE_STATUS_CANCELLED && r.cancel_requested && stopping_) {
      // Stopped on request: never measured, so its record stays in flight and the next run resumes it.
    } else if (result.status == COTUNE_STATUS_CANCELLED && r.reattached && !r.cancel_requested) {
      // A job of the earlier run that was cancelled when it stopped: run it again.
      r.job.reset();
      RunningTrial again = std::move(r);
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      if (!stopping_ && !done_) resubmit_.push_front(std::move(again));
      continue;
    } else {
      batch.push_back(commit(r, result));
    }
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  observe(batch);
  return ended;
}

Observation StudyRun::commit(RunningTrial& r, const TrialResult& result) {
  TrialOutcome o;
  o.status = trial_status(result.status);
  if (!result.metrics_json.empty()) o.metrics_json = result.metrics_json;
  if (!result.error.empty()) o.error = result.error;
  if (!result.log_path.empty()) o.log_path = result.log_path;

  Observation obs;
  obs.seq = r.seq;
  obs.config = r.config;
  obs.status = result.status;
  obs.score = std::numeric_limits<double>::quiet_NaN();
  std::optional<Evaluation> eval;
  std::string unreported;  // an objective metric the trial's metrics lack
  if (o.status == TrialStatus::kOk) {
    nlohmann::json metrics = nlohmann::json::parse(result.metrics_json, nullptr, false);
    if (!metrics.is_object()) {
      o.status = TrialStatus::kFailed;
      obs.status = COTUNE_STATUS_FAILED;
      o.error = "the executor reported metrics that are not a JSON object: " + result.metrics_json.substr(0, 200);
    } else {
      eval = evaluate(spec_.objectives, metrics);
      for (const ObjectiveSpec& objective : spec_.objectives)
        if (!metric_value(metrics, objective.metric)) {
          unreported = objective.metric;
          break;
        }
      unreported_objective_ = unreported.empty() ? 0 : unreported_objective_ + 1;
      if (eval->feasible) {
        o.objective = eval->values.front();
        obs.score = normalised_score(eval->values.front(), spec_.objectives.front().direction);
      } else {
        o.error = "infeasible: " + eval->violation;
        obs.score = -std::numeric_limits<double>::infinity();
      }
      TrainingRowOrigin origin{eval->feasible, r.trial_id, r.seq, eval->feasible ? eval->values.front() : 0};
      add_training(r.config.data(), result.metrics_json, origin);
    }
  }
  store_->finish_trial(r.trial_id, o);
  ++finished_this_run_;
  if (unreported_objective_ >= kMaxUnreportedObjective)
    throw std::runtime_error(std::to_string(kMaxUnreportedObjective) + " trials in a row finished without reporting "
                             "the objective metric '" + unreported + "'; the study stops rather than spend its budget on measurements it cannot use (check what "
                             "the jobs write: their result file, or the executor's metrics_regex)");
  // A trial that left nothing in its directory (the simulator's) leaves no empty directory behind.
  std::error_code ignored;
  std::filesystem::remove(runs_dir_ + "/" + std::to_string(r.seq), ignored);  // only when empty

  std::optional<TrialRecord> stored = store_->trial(r.trial_id);
  double gpu_hours = trial_gpu_hours(result.metrics_json, stored ? stored->started_at : std::nullopt,
                                     stored ? stored->finished_at : std::optional<double>(unix_now()), r.trace_gpus);
  budget_.record(o.status, eval ? &*eval : nullptr, gpu_hours);
  FinishedTrialLine line;
  line.seq = r.seq;
  line.status = std::string(to_string(o.status));
  line.config = config_summary(*space_, r.config.data());
  if (eval && !eval->values.empty()) line.value = eval->values.front();
  line.predicted = r.predicted;
  line.note = o.error.value_or("");
  line.improved = budget_.last_improved();
  if (line.improved) best_config_ = line.config;
  progress_.trial_finished(line, progress_state());
  if (options_.on_trial_committed && stored) options_.on_trial_committed(*stored);
  return obs;
}

}  // namespace cotune::core
