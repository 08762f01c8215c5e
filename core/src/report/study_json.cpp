#include <cotune/core/errors.hpp>
#include <cotune/core/model/objective.hpp>
#include <cotune/core/report/study_json.hpp>
#include <cotune/core/run/study_report.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <vector>

#include "run/lease.hpp"

namespace cotune::core::report {
namespace {

// A stored JSON text as JSON (as a string when it does not parse), or null when absent.
nlohmann::json json_or_null(const std::optional<std::string>& text) {
  if (!text) return nullptr;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  return j.is_discarded() ? nlohmann::json(*text) : j;
}

nlohmann::json counts_json(const std::map<TrialStatus, std::int64_t>& counts) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [status, n] : counts) out[std::string(to_string(status))] = n;
  return out;
}

}  // namespace

std::string objective_metric(const StudyRecord& s) {
  nlohmann::json objectives = nlohmann::json::parse(s.objective_json, nullptr, false);
  if (objectives.is_array() && !objectives.empty() && objectives[0].is_object() && objectives[0].contains("metric") &&
      objectives[0]["metric"].is_string())
    return objectives[0]["metric"].get<std::string>();
  return "objective";
}

bool study_being_run(Store& store, const StudyRecord& study) {
  if (study.status != StudyStatus::kRunning) return false;
  if (const std::optional<StudyLease> lease = store.study_lease(study.id); lease && lease_is_live(*lease)) return true;
  const std::vector<StudyLease> workers = store.study_workers(study.id);
  return std::any_of(workers.begin(), workers.end(), [](const StudyLease& w) { return lease_is_live(w); });
}

std::string study_status_text(const StudyRecord& study, bool being_run) {
  if (study.status == StudyStatus::kRunning && !being_run) return "interrupted";
  return std::string(to_string(study.status));
}

std::string study_status_text(Store& store, const StudyRecord& study) {
  return study_status_text(study, study_being_run(store, study));
}

std::vector<WorkerStatus> worker_statuses(Store& store, std::int64_t study_id, const std::vector<TrialRecord>& trials) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::vector<WorkerStatus> out;
  for (const StudyLease& w : store.study_workers(study_id)) {
    WorkerStatus s{w.host, w.pid, std::max(0.0, now - w.heartbeat), 0};
    for (const TrialRecord& t : trials)
      if (!is_finished(t.status) && t.claim_host == w.host && t.claim_pid == w.pid) ++s.in_flight;
    out.push_back(std::move(s));
  }
  return out;
}

nlohmann::json studies_json(Store& store) {
  nlohmann::json studies = nlohmann::json::array();
  for (const StudySummary& s : store.list_studies())
    studies.push_back({{"name", s.study.name},
                       {"status", study_status_text(store, s.study)},
                       {"trials", s.trial_count},
                       {"trials_by_status", counts_json(s.trials_by_status)},
                       {"metric", objective_metric(s.study)},
                       {"best", s.best_objective ? nlohmann::json(*s.best_objective) : nlohmann::json(nullptr)}});
  return {{"schema_version", kStudyJsonSchemaVersion}, {"store", store.path()}, {"studies", studies}};
}

nlohmann::json study_json(Store& store, const std::string& name, std::int64_t limit) {
  std::optional<StudyRecord> study = store.find_study(name);
  if (!study) throw UserError("store " + store.path() + ": no study named '" + name + "' (cotune show lists them)");
  StudySpec spec = spec_from_store(*study);
  std::vector<TrialRecord> trials = store.trials(study->id);
  const bool being_run = study_being_run(store, *study);
  const size_t shown = limit > 0 ? static_cast<size_t>(limit) : trials.size();
  const size_t skipped = trials.size() > shown ? trials.size() - shown : 0;
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = skipped; i < trials.size(); ++i) {
    const TrialRecord& t = trials[i];
    std::string status(to_string(t.status));
    if (!is_finished(t.status) && !being_run) status = "interrupted";
    rows.push_back({{"seq", t.seq},
                    {"status", status},
                    {"config", json_or_null(t.config_json)},
                    {"metrics", json_or_null(t.metrics_json)},
                    {"objective", t.objective ? nlohmann::json(*t.objective) : nlohmann::json(nullptr)},
                    {"predicted", t.predicted ? nlohmann::json(*t.predicted) : nlohmann::json(nullptr)},
                    {"note", t.error ? nlohmann::json(*t.error) : nlohmann::json(nullptr)},
                    {"worker", t.claim_pid ? nlohmann::json(t.claim_host.value_or("") + ":" + std::to_string(*t.claim_pid))
                                           : nlohmann::json(nullptr)}});
  }
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerStatus& w : worker_statuses(store, study->id, trials))
    workers.push_back({{"host", w.host}, {"pid", w.pid}, {"last_heard_s", w.last_heard_s}, {"in_flight", w.in_flight}});
  nlohmann::json best = nlohmann::json::array();
  for (const RankedTrial& r : best_trials(trials, spec.objectives, kBestTrialsListed)) best.push_back(r.trial.seq);
  // The trial `cotune export` launches by default (the predictor's denoised best), when the study has one.
  nlohmann::json recommended = nullptr;
  for (const TrialRecord& t : trials)
    if (study->recommended_trial_id && t.id == *study->recommended_trial_id) recommended = t.seq;
  nlohmann::json doc = {{"schema_version", kStudyJsonSchemaVersion},
                        {"store", store.path()},
                        {"study",
                         {{"name", study->name},
                          {"status", study_status_text(store, *study)},
                          {"description", spec.description},
                          {"workload_key", study->workload_key},
                          {"space", spec.space.name},
                          {"predictor", spec.predictor.name},
                          {"searcher", spec.searcher.name},
                          {"executor", spec.executor.name},
                          {"parallel", spec.parallel},
                          {"objectives", spec.objectives_json()},
                          {"workers", workers}}},
                        {"trials_total", trials.size()},
                        {"trials", rows},
                        {"best", best},
                        {"recommended", recommended}};
  return doc;
}

}  // namespace cotune::core::report
