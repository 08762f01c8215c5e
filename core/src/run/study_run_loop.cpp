// The study loop, top to bottom: fill the free slots (propose -> launch), poll what is in flight,
// commit what finished and hand it to the observers (surrogate, budget, progress, caller), tell the
// searcher; stop on the budget, a stopping rule or a stop request. Setup and resume are in
// study_run_setup.cpp, the recommendation at the end in study_run_recommend.cpp.
#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/abi/log.hpp>
#include <cotune/core/run/search_context.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "run/searcher_state.hpp"
#include "run/study_run.hpp"

namespace cotune::core {
namespace {


constexpr auto kFirstSleep = std::chrono::milliseconds(1);
constexpr auto kLongestSleep = std::chrono::milliseconds(100);
constexpr int kMaxEmptyRounds = 3;  // proposal rounds with nothing new before the space counts as exhausted


constexpr int kMaxFailedSubmissions = 3;  // in a row: the executor itself is broken, not one trial
// Trials in a row that finished but did not report an objective metric: the jobs do not write it
// (a name the space does not know passes the check before the first trial), or the executor cannot
// read it (a metrics_regex that matches nothing: a failed result with the metrics "{}", cotune.h),
// and every further trial would spend budget on a measurement the study cannot use.
constexpr int kMaxUnreportedObjective = 3;
// Trials in a row that failed with one and the same error before any trial of the run was ok: a
// job that cannot start or a launcher that is broken fails every configuration alike, and every
// further trial would spend budget (GPU time on a cluster) on the same failure. Failures that
// depend on the configuration (out of memory, a refused layout) say so with their own numbers.
constexpr int kMaxSameFailure = 3;

cotune_str cs(const std::string& s) { return {s.data(), s.size()}; }

double unix_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// A failure's message as the same-failure rule compares it: a crashed process's pid differs from
// trial to trial ("its process (pid 23267) was killed by SIGSEGV"), the failure does not.
std::string failure_kind(const std::string& error) {
  static const std::regex pid(R"(\bpid \d+)");
  return std::regex_replace(error, pid, "pid");
}

}  // namespace

void StudyRun::loop() {
  auto sleep = kFirstSleep;
  for (;;) {
    if (options_.heartbeat != nullptr) options_.heartbeat->fetch_add(1);
    handle_stop_requests();
    renew_lease();
    const size_t finished = poll_round();
    if (worker_ && !stopping_ && !done_) {
      adopt_orphans();
      sync_others();
    }
    const double elapsed = elapsed_s();
    if (!stopping_ && !done_) check_budget(elapsed);
    const size_t before = running_.size();
    if (!stopping_ && !done_) fill_slots();
    if ((stopping_ || done_) && resubmit_.empty() && running_.empty()) break;
    if (cancel_deadline_ && std::chrono::steady_clock::now() > *cancel_deadline_) {
      // Jobs that never confirmed the cancel keep their "running" record (the next run sees them).
      log(COTUNE_LOG_WARN, "study",
          std::to_string(running_.size()) + " cancelled trial(s) have not reported back; left as running (the next "
                                            "run re-attaches to them or runs them again)");
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

// ---- filling the slots: propose, launch ------------------------------------------------------

void StudyRun::fill_slots() {
  std::int64_t free = static_cast<std::int64_t>(capacity_) - static_cast<std::int64_t>(running_.size());
  // Trials interrupted in an earlier run come first: they are already recorded and counted.
  while (free > 0 && !resubmit_.empty()) {
    RunningTrial r = std::move(resubmit_.front());
    resubmit_.pop_front();
    if (launch(r, nullptr)) running_.push_back(std::move(r));
    --free;
  }
  // A worker counts the others' trials in flight too: while they hold the rest of the budget, a
  // proposal could only be refused by the store, and each costs a refit and a searcher call.
  free = std::min(free, budget_.startable(static_cast<std::int64_t>(running_.size()) + (worker_ ? others_in_flight_ : 0)));
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
  // A worker whose budget is in flight at the others waits for them: their trials may fail to
  // count (and leave budget), or their worker may go (and leave trials to take over).
  // Nor is the space exhausted when the store refused what this worker proposed because the others
  // had just claimed it: they are ahead of the last sync.
  if (worker_ && (budget_full_ || others_in_flight_ > 0 || taken_by_others_)) {
    empty_rounds_ = 0;
    return;
  }
  if (++empty_rounds_ >= kMaxEmptyRounds) {
    done_ = true;
    reason_ = "the searcher has no unmeasured configuration left to propose";
  }
}

std::vector<RunningTrial> StudyRun::propose(size_t n) {
  refit();
  const size_t p = space_->num_params();
  const Direction direction = spec_.objectives.front().direction;
  SearchContext context(*space_, *surrogate_, direction, seen_, constraints_.get(),
                        options_.oom_bound ? oom_bound_.get() : nullptr);
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
  budget_full_ = false;
  taken_by_others_ = false;
  for (size_t i = 0; i < got; ++i) {
    const double* config = out.data() + i * p;
    std::string key = space_->key(config);
    if (seen_.count(key)) {
      // The bundled searchers ask the context which configurations it has seen; one that does not
      // spends proposals (plugins check refuses it). Said once a run, for the searcher's author.
      log(said_seen_proposed_ ? COTUNE_LOG_DEBUG : COTUNE_LOG_WARN, "study",
          "the searcher '" + searcher_->info().name + "' proposed a configuration already measured or proposed; "
          "dropped: " + key + (said_seen_proposed_ ? "" : " (a searcher should leave out what the context's seen() "
          "reports; cotune plugins check refuses one that does not; said once a run)"));
      said_seen_proposed_ = true;
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
    std::optional<TrialId> id;
    if (worker_) {
      // Claimed by this worker, and only while the trial budget is not given out (the others'
      // trials in flight count).
      ClaimedTrial claimed = store_->add_claimed_trial(study_.id, n, lease_, spec_.budget.trials);
      if (claimed.budget_full) {
        seen_.erase(key);
        budget_full_ = true;
        break;
      }
      id = claimed.id;
    } else {
      id = store_->add_trial(study_.id, n);
    }
    if (!id) {  // the store already has this configuration (another spelling, another worker)
      taken_by_others_ = true;
      continue;
    }
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
    try {
      t.trace = &space_->lower(config);
    } catch (const PluginError& e) {
      // The space's own refusal of a configuration its check accepted: this trial cannot run, the
      // others still can.
      TrialResult refused;
      refused.status = COTUNE_STATUS_FAILED;
      refused.error = "the space '" + space_->info().name + "' could not lower this configuration to a step trace: " +
                      e.what();
      log(COTUNE_LOG_WARN, "study", "trial " + std::to_string(r.seq) + " (" + config_json + "): " + refused.error);
      observe({commit(r, refused)});
      return false;
    }
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

// ---- what is in flight: poll, commit, observe ----------------------------------------------------

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
      // Stopped on request: never measured, so its record stays in flight and the next run resumes it,
      // submitting it again (its job is gone: there is nothing to re-attach to).
      store_->forget_trial_job(r.trial_id);
    } else if (result.status == COTUNE_STATUS_CANCELLED && r.reattached && !r.cancel_requested) {
      // A job of the earlier run that was cancelled when it stopped: run it again. (A scancel while
      // no run followed it reads the same: the job never finished its measurement either way.)
      log(COTUNE_LOG_INFO, "study",
          "trial " + std::to_string(r.seq) + ": its job ended cancelled while no run followed it (" +
              (result.error.empty() ? std::string("the earlier run's stop, or a cancel from outside") : result.error) +
              "); it is submitted again");
      r.job.reset();
      RunningTrial again = std::move(r);
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      if (!stopping_ && !done_) resubmit_.push_front(std::move(again));
      continue;
    } else {
      // Out of running_ before it is committed: the progress line its commit prints counts it done,
      // not in flight.
      RunningTrial finished = std::move(r);
      running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
      batch.push_back(commit(finished, result));
      continue;
    }
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  observe(batch);
  return ended;
}

Observation StudyRun::commit(RunningTrial& r, const TrialResult& result) {
  TrialOutcome o;
  if (!result.metrics_json.empty()) o.metrics_json = result.metrics_json;
  if (!result.error.empty()) o.error = result.error;
  if (!result.log_path.empty()) o.log_path = result.log_path;
  Observation obs;
  obs.seq = r.seq;
  obs.config = r.config;
  obs.status = result.status;
  // A status the ABI does not define fails this trial, not the run.
  if (const std::optional<TrialStatus> s = trial_status_from_string(status_name(result.status))) {
    o.status = *s;
  } else {
    o.status = TrialStatus::kFailed;
    obs.status = COTUNE_STATUS_FAILED;
    const std::string why = "the executor '" + executor_->info().name + "' reported an unknown trial status " +
                            std::to_string(result.status) + " (the ABI's are COTUNE_STATUS_OK, FAILED, OOM, TIMEOUT, "
                            "CANCELLED and UNAVAILABLE, cotune.h)";
    o.error = o.error ? why + "; its error: " + *o.error : why;
  }
  obs.score = std::numeric_limits<double>::quiet_NaN();
  std::optional<Evaluation> eval;
  std::string unreported;  // an objective metric the trial's metrics lack
  // Metrics the store cannot hold (it keeps JSON objects) are not stored: an ok trial with them
  // failed, and the text is kept in the error.
  nlohmann::json metrics;
  std::string bad_metrics;
  if (!result.metrics_json.empty()) {
    try {
      metrics = nlohmann::json::parse(result.metrics_json);
      if (!metrics.is_object()) bad_metrics = "are not a JSON object";
    } catch (const nlohmann::json::exception& e) {
      bad_metrics = std::string("are not valid JSON (") + e.what() + ")";
    }
    if (!bad_metrics.empty()) {
      o.metrics_json.reset();
      bad_metrics = "the executor reported metrics that " + bad_metrics + ": " + result.metrics_json.substr(0, 200);
      if (o.status != TrialStatus::kOk) o.error = o.error ? *o.error + "; " + bad_metrics : bad_metrics;
    }
  }
  if (o.status == TrialStatus::kOk) {
    if (!metrics.is_object()) {
      o.status = TrialStatus::kFailed;
      obs.status = COTUNE_STATUS_FAILED;
      o.error = bad_metrics.empty() ? "the executor reported no metrics" : bad_metrics;
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
    }
  } else if (o.status == TrialStatus::kFailed && metrics.is_object()) {
    // The job ran to its end, but what it wrote could not be read as the objective.
    for (const ObjectiveSpec& objective : spec_.objectives)
      if (!metric_value(metrics, objective.metric)) {
        unreported = objective.metric;
        break;
      }
    if (!unreported.empty()) ++unreported_objective_;
  }
  store_->finish_trial(r.trial_id, o);
  ++finished_this_run_;
  if (worker_) accounted_.insert(r.seq);  // sync_others: ours, counted below
  // A stopping rule's reason: the trial is accounted first (stored, counted, its progress line
  // printed), then the study stops.
  std::string stop_reason;
  if (unreported_objective_ >= kMaxUnreportedObjective)
    stop_reason = std::to_string(kMaxUnreportedObjective) + " trials in a row finished without reporting the objective "
                  "metric '" + unreported + "'; the study stops rather than spend its budget on measurements it "
                  "cannot use (check what the trials report: a job's result file or the executor's metrics_regex, a "
                  "replayed table's metric columns and their cells)" +
                  (o.error ? ". The last trial: " + *o.error : std::string());
  if (o.status == TrialStatus::kOk) any_ok_this_run_ = true;
  if (o.status == TrialStatus::kFailed && o.error && !any_ok_this_run_) {
    same_failure_ = failure_kind(*o.error) == failure_kind(last_failure_) ? same_failure_ + 1 : 1;
    last_failure_ = *o.error;
  } else {
    same_failure_ = 0;
  }
  if (!bound_expected_unmet_.empty() && !budget_.any_feasible()) {
    infeasible_in_a_row_ = eval && !eval->feasible ? infeasible_in_a_row_ + 1 : 0;
    if (stop_reason.empty() && infeasible_in_a_row_ >= kMaxSameFailure)
      stop_reason = std::to_string(kMaxSameFailure) + " trials in a row broke " + bound_expected_unmet_ +
                    ", as the performance model expects of every configuration; the study stops rather than spend "
                    "its budget where no answer is likely: check the bound";
  }
  if (stop_reason.empty() && same_failure_ >= kMaxSameFailure)
    stop_reason = std::to_string(kMaxSameFailure) + " trials in a row failed alike, and none of this run succeeded: " +
                  last_failure_ + "; the study stops rather than spend its budget on the same failure";
  // A trial that left nothing in its directory (the simulator's) leaves no empty directory behind.
  std::error_code ignored;
  std::filesystem::remove(runs_dir_ + "/" + std::to_string(r.seq), ignored);  // only when empty

  const std::optional<TrialRecord> stored = store_->trial(r.trial_id);
  const double gpu_hours = trial_gpu_hours(result.metrics_json, stored ? stored->started_at : std::nullopt,
                                           stored ? stored->finished_at : std::optional<double>(unix_now()), r.trace_gpus);
  const FinishedTrial finished{r, o, eval ? &*eval : nullptr, result.metrics_json, gpu_hours, stored ? &*stored : nullptr};
  for (const TrialObserver& observer : observers_) observer(finished);
  if (!stop_reason.empty()) throw std::runtime_error(stop_reason);
  return obs;
}

// What follows a stored trial, in this order (TVM MetaSchedule's measure callbacks).
void StudyRun::install_observers() {
  observers_ = {
      // The surrogate learns every measured ok trial at its next refit.
      [this](const FinishedTrial& f) {
        if (f.evaluation == nullptr) return;
        const TrainingRowOrigin origin{f.evaluation->feasible, f.trial.trial_id, f.trial.seq,
                                       f.evaluation->feasible ? f.evaluation->values.front() : 0};
        add_training(f.trial.config.data(), f.metrics_json, origin);
      },
      // So does the OOM bound, of a trial that ran out of memory.
      [this](const FinishedTrial& f) {
        if (f.outcome.status == TrialStatus::kOom) add_out_of_memory(f.trial.config.data());
      },
      // The budget and the stopping rules count it.
      [this](const FinishedTrial& f) { budget_.record(f.outcome.status, f.evaluation, f.gpu_hours); },
      // The progress line shows it.
      [this](const FinishedTrial& f) {
        FinishedTrialLine line;
        line.seq = f.trial.seq;
        line.status = std::string(to_string(f.outcome.status));
        line.config = config_summary(*space_, f.trial.config.data());
        if (f.evaluation != nullptr && !f.evaluation->values.empty()) line.value = f.evaluation->values.front();
        line.predicted = f.trial.predicted;
        line.note = f.outcome.error.value_or("");
        line.improved = budget_.last_improved();
        if (line.improved) best_config_ = line.config;
        progress_.trial_finished(line, progress_state());
      },
      // The caller hears of it (RunOptions::on_trial_committed).
      [this](const FinishedTrial& f) {
        if (options_.on_trial_committed && f.stored != nullptr) options_.on_trial_committed(*f.stored);
      },
  };
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
  if (!searcher_->can_save() || worker_) return;  // workers do not restore one (restore_searcher)
  SearcherState state{observed_, searcher_->save()};
  store_->save_searcher_state(study_.id, encode_searcher_state(state));
}

// ---- stopping, the predictor's refit, the progress line ----------------------------------------

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
                   (running_.empty() ? ""
                    : cancel         ? " (interrupt again not to wait for them to report back)"
                                     : " (interrupt again to cancel them)"));
    if (cancel) cancel_all(), cancel_level_ = level;
  } else if (level >= 2 && !cancelled_all_) {
    progress_.note("stopping: cancelling " + std::to_string(running_.size()) +
                   " trial(s) in flight (interrupt again not to wait for them to report back)");
    cancel_all();
    cancel_level_ = level;
  } else if (cancelled_all_ && level > cancel_level_ && !running_.empty() && cancel_deadline_) {
    // A cancel that cannot reach its job (an agent or a cluster that does not answer) is waited for
    // up to options_.cancel_grace_s; the user who interrupts again does not want to wait.
    cancel_deadline_ = std::chrono::steady_clock::now();
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
  // From the first cancel: a later one (a Ctrl-C after the budget cancelled) does not extend it.
  if (!cancel_deadline_)
    cancel_deadline_ = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(options_.cancel_grace_s));
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
  // With W workers on the study each one learns every trial, so each waits for W times as many new
  // rows: together they refit about as often as one run alone would, not W times as often.
  const size_t rows = train_values_.size();
  const size_t step = std::max<size_t>(1, fitted_on_ / 32) * (worker_ ? workers_ : 1);
  // A moved OOM bound changes what the searcher sees: the surrogate is fitted again (on the same
  // rows) so that the score version changes with it.
  const std::optional<double> bound_before = oom_bound_->bound();
  const bool bound_moved = options_.oom_bound && oom_bound_->update();
  if (bound_moved) note_oom_bound(bound_before);
  if (!bound_moved && (every_row ? rows == fitted_on_ : fitted_on_ != SIZE_MAX && rows < fitted_on_ + step)) return;
  constraints_->update();
  // A worker takes the fit another worker saved, when it is newer than its own and short of this
  // worker's trials by no more than a lone run's fit falls behind (a round of `parallel` trials, or
  // the 1/32 above): the trials are the same study's, so it is the fit this worker would make,
  // without the cost.
  if (worker_ && !every_row) {
    if (auto blob = store_->load_predictor_state(study_.id)) {
      const std::string_view state(reinterpret_cast<const char*>(blob->data()), blob->size());
      const std::optional<size_t> theirs = surrogate_->state_rows(state);
      const size_t behind = std::max<size_t>({1, capacity_, rows / 32});
      if (theirs && (fitted_on_ == SIZE_MAX || *theirs > fitted_on_) && *theirs + behind >= rows &&
          surrogate_->load_state(state)) {
        log(COTUNE_LOG_DEBUG, "study",
            "took the predictor fitted on " + std::to_string(*theirs) + " trials (this worker has " +
                std::to_string(rows) + ")");
        fitted_on_ = rows;
        return;
      }
    }
  }
  surrogate_->fit(train_configs_.data(), train_values_.size(), train_values_.data());
  fitted_on_ = train_values_.size();
  std::string state = surrogate_->save_state(fitted_on_);
  if (!state.empty()) store_->save_predictor_state(study_.id, std::vector<std::uint8_t>(state.begin(), state.end()));
}

void StudyRun::note_oom_bound(std::optional<double> before) {
  const auto pct = [](double share) { return std::to_string(static_cast<int>(std::lround(share * 100))) + " %"; };
  const std::optional<double> now = oom_bound_->bound();
  if (now && (!before || *now < *before))
    progress_.note("a trial ran out of memory at an estimated " + pct(*now) +
                   " of its GPU's memory: the search skips configurations estimated at that share or more");
  else if (now)
    progress_.note("a trial ran at an estimated share of its GPU's memory that ran out before: the search skips "
                   "configurations from an estimated " + pct(*now) + " on");
  else if (before)
    progress_.note("a trial ran at an estimated share of its GPU's memory that ran out before: the out-of-memory "
                   "bound is lifted");
}

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

}  // namespace cotune::core
