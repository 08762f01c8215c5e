// The records of the study store (store.hpp): studies, trials and imported history, as plain structs.
// Times are UTC unix seconds as doubles (sub-millisecond precision), everywhere in the store.
#ifndef COTUNE_CORE_STORE_STORE_RECORDS_HPP_
#define COTUNE_CORE_STORE_STORE_RECORDS_HPP_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cotune::core {

enum class StudyStatus { kRunning, kStopped, kFinished };
enum class TrialStatus { kPending, kRunning, kOk, kFailed, kOom, kTimeout, kCancelled, kUnavailable };
enum class Direction { kMaximize, kMinimize };

std::string_view to_string(StudyStatus s);
std::string_view to_string(TrialStatus s);
std::string_view to_string(Direction d);
// nullopt for a word that names no status.
std::optional<StudyStatus> study_status_from_string(std::string_view s);
std::optional<TrialStatus> trial_status_from_string(std::string_view s);
std::optional<Direction> direction_from_string(std::string_view s);
// True for the statuses a trial ends in (all but pending and running).
bool is_finished(TrialStatus s);
// The budget's rule: ok, failed, oom and timeout trials ran and count against a trial budget;
// cancelled and unavailable ones measured nothing and do not.
bool counts_against_budget(TrialStatus s);

// What a caller gives to create a study.
struct NewStudy {
  std::string name;
  std::string study_json;        // the study file as given
  std::string study_hash;        // its content hash: reopening a study checks it
  std::string legacy_hash;       // the hash a store of an earlier version may hold for it (or empty)
  std::string workload_key;      // canonical hash of workload + space (canonical_json.hpp)
  std::string space;             // space name
  std::string objective_json;    // the objective(s) as JSON
  Direction direction = Direction::kMaximize;  // of the (first) objective: what "best" means
  std::string environment_json = "{}";        // host, cotune version, plugin versions, study hash
};

struct StudyRecord {
  std::int64_t id = 0;
  std::string name;
  std::string study_json;
  std::string study_hash;
  std::string workload_key;
  std::string space;
  std::string objective_json;
  Direction direction = Direction::kMaximize;
  std::string environment_json;
  StudyStatus status = StudyStatus::kRunning;
  double created_at = 0;
  double updated_at = 0;
  // The trial the predictor's denoised estimate ranks best among the measured ones, as of the end of
  // the last run (single-objective studies); none before a run ended with a feasible trial.
  std::optional<std::int64_t> recommended_trial_id;
};

// The run working on a study: where it runs and when it last said it still does.
struct StudyLease {
  std::string host;
  std::int64_t pid = 0;
  double heartbeat = 0;  // seconds since the epoch
};

// A study with its trial counts, for listings.
struct StudySummary {
  StudyRecord study;
  std::map<TrialStatus, std::int64_t> trials_by_status;  // statuses with no trial are absent
  std::int64_t trial_count = 0;
  std::optional<double> best_objective;  // over ok trials, in the study's direction
};

// What a caller gives to record a trial before it is submitted.
struct NewTrial {
  std::string config_key;   // canonical configuration key (canonical_json.hpp: config_key)
  std::string config_json;
  TrialStatus status = TrialStatus::kPending;  // pending or running
  std::optional<double> predicted;            // predictor's value at proposal time
  std::string executor;
  std::optional<std::string> fingerprint_json;  // environment of this trial
};

// How a trial ended.
struct TrialOutcome {
  TrialStatus status = TrialStatus::kOk;  // one of the finished statuses
  std::optional<std::string> metrics_json;
  std::optional<double> objective;
  std::optional<std::string> error;
  std::optional<std::string> log_path;
};

struct TrialRecord {
  std::int64_t id = 0;
  std::int64_t study_id = 0;
  std::int64_t seq = 0;  // 1, 2, 3, ... within the study
  std::string config_key;
  std::string config_json;
  TrialStatus status = TrialStatus::kPending;
  std::optional<std::string> metrics_json;
  std::optional<double> objective;
  std::optional<double> predicted;
  std::string executor;
  std::optional<std::string> external_id;  // executor's job id (Slurm job id, agent trial id, ...)
  std::int64_t attempts = 0;               // times it was started (a requeue counts again)
  std::optional<std::string> error;
  std::optional<std::string> log_path;
  double created_at = 0;
  std::optional<double> started_at;
  std::optional<double> finished_at;
  std::optional<std::string> fingerprint_json;
  // The worker (`cotune run --worker`) that claimed it, host and pid; none for a plain run's trial.
  std::optional<std::string> claim_host;
  std::optional<std::int64_t> claim_pid;
};

// The id and the per-study sequence number of a newly added trial.
struct TrialId {
  std::int64_t id = 0;
  std::int64_t seq = 0;
};

// What Store::add_claimed_trial did: `id` when it recorded the trial; none when the configuration
// is there already or, with `budget_full`, when the trial budget is taken by other trials.
struct ClaimedTrial {
  std::optional<TrialId> id;
  bool budget_full = false;
};

// One run of an earlier job: imported from a log, or exported from the trials of a study.
struct HistoryRow {
  std::int64_t id = 0;  // 0 for rows not (yet) in the history table
  std::string workload_key;
  std::string space;
  std::string config_key;
  std::string config_json;
  TrialStatus status = TrialStatus::kOk;  // a finished status: failed and oom runs teach feasibility
  std::string metrics_json = "{}";
  std::string source;          // file name the row came from ("study:<name>" for exported trials)
  std::int64_t row_number = 0;  // row in that file (the trial's seq for exported trials)
  double imported_at = 0;       // set by the store on import; for exported trials: when it finished
};

struct ImportCounts {
  std::int64_t inserted = 0;
  std::int64_t duplicates = 0;  // rows of the same source and row number already imported
};

// Whether imported history rows get the time of the import (a new import) or keep theirs (a copy
// of another store's history).
enum class ImportTime { kNow, kKeep };

// A study with all that a copy to another store takes: its record, its trials (ordered by seq) and
// its saved searcher and predictor state. Ids are those of the store it was read from.
struct StudyDump {
  StudyRecord study;
  std::vector<TrialRecord> trials;
  std::optional<std::vector<std::uint8_t>> searcher_state;
  std::optional<std::vector<std::uint8_t>> predictor_state;
};

// What restoring a dump did: created the study, or added trials to the one already there.
struct StudyRestoreCounts {
  bool created = false;
  std::int64_t trials_added = 0;
  std::int64_t trials_updated = 0;  // in flight here, finished in the source: its result taken
  bool status_updated = false;      // running here, stopped or finished in the source
};

}  // namespace cotune::core

#endif  // COTUNE_CORE_STORE_STORE_RECORDS_HPP_
