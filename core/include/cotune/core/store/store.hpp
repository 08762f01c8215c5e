// The study store: the studies, their trials and the imported history of earlier jobs, in one of two
// databases, chosen by the location given to the constructor (store_location.hpp):
//  - an SQLite file (default cotune.db in the working directory), embedded, the default;
//  - a PostgreSQL database (postgresql://user@host:port/dbname), shared by a team's hosts. Its
//    password comes from the URL, PGPASSFILE (~/.pgpass) or the PG* environment, as libpq finds it,
//    and is never part of path() or of a message.
// Both hold the same schema and give the same guarantees; the notes below say how.
//
// Durability: on SQLite, a WAL journal with synchronous=FULL by default, so a trial is on disk the
// moment the call that records it returns -- it survives kill -9 of cotune and a power cut or kernel
// crash alike. (NORMAL would only survive the former and saves an fsync per commit, which a trial
// that takes minutes of GPU time does not need.) Every write is one BEGIN IMMEDIATE transaction. On
// PostgreSQL, a write is one SERIALIZABLE transaction, durable when COMMIT returns (the server's
// synchronous_commit decides; Options::sync is SQLite's only).
//
// Concurrency: several processes (on PostgreSQL: on several hosts) may read and write one store at
// once. A writer waits for another instead of failing with "database is locked": SQLite's busy
// wait, PostgreSQL's lock wait (lock_timeout), and a transaction that loses a race (SQLITE_BUSY, a
// serialization failure or a deadlock) is run again after a short backoff. Only a lock held past
// Options::busy_timeout_s surfaces, as a StoreError that says so. A Store object may be shared
// between threads (calls are serialised).
//
// Schema: versioned (SQLite: PRAGMA user_version, marked with PRAGMA application_id; PostgreSQL: the
// table cotune_meta in the database's current schema); opening applies missing migrations, and
// refuses stores written by a newer cotune and files or databases that are not stores.
#ifndef COTUNE_CORE_STORE_STORE_HPP_
#define COTUNE_CORE_STORE_STORE_HPP_

#include <cotune/core/store/store_records.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace cotune::core {

inline constexpr const char* kDefaultStorePath = "cotune.db";

// A store that cannot be opened or used: not a store, too new, corrupt, locked for too long, a
// disk error, or a server that cannot be reached or refuses the login. The message names the store
// (a URL with its password redacted).
class StoreError : public std::runtime_error {
 public:
  explicit StoreError(const std::string& message) : std::runtime_error(message) {}
};

class Store {
 public:
  enum class Sync { kFull, kNormal };
  struct Options {
    bool create = true;            // create the file (the tables of a database) when missing, else a StoreError
    Sync sync = Sync::kFull;        // SQLite: see the durability note above
    double busy_timeout_s = 60.0;  // how long a write waits for another process's lock (or retries)
  };

  // Opens (or creates) the store at `location`, a file path or a postgresql:// URL, and brings its
  // schema up to date.
  explicit Store(const std::string& location) : Store(location, Options{}) {}
  Store(const std::string& location, const Options& options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // The store's name for messages and listings: the file path, or the URL with its password redacted.
  const std::string& path() const { return path_; }
  // The schema version this cotune writes, and the one of this store (equal after opening).
  static int latest_schema_version();
  int schema_version();

  // --- studies
  // Creates the study, or returns the existing one of that name when its study hash (or the legacy
  // hash) matches; a different hash is a UserError (the name is taken by another study file).
  StudyRecord create_study(const NewStudy& study);
  // Replaces the study file a study was created from (its budget or another field that may change
  // between runs changed; see kMutableStudyFields), and its hash.
  void update_study_file(std::int64_t study_id, const std::string& study_json, const std::string& study_hash);
  // Deletes the study with its trials and saved state, in one transaction, unless a run or a worker
  // that `holds` accepts is working on it: then nothing changes and that holder is returned.
  std::optional<StudyLease> delete_study(std::int64_t study_id,
                                         const std::function<bool(const StudyLease& holder)>& holds);
  std::optional<StudyRecord> find_study(const std::string& name);
  std::optional<StudyRecord> study(std::int64_t study_id);
  std::vector<StudySummary> list_studies();  // ordered by creation
  void set_study_status(std::int64_t study_id, StudyStatus status);
  void set_study_environment(std::int64_t study_id, const std::string& environment_json);
  // The trial the study recommends (StudyRecord::recommended_trial_id); a StoreError when it is not
  // one of the study's trials.
  void set_study_recommended(std::int64_t study_id, std::int64_t trial_id);

  // One study is run by one process at a time (or shared by workers, below). take_study_lease gives the study to `me` unless
  // another holder has it and `holds(holder)` says it still does (the caller decides: its pid alive
  // on this host, a recent heartbeat elsewhere); that holder is returned then and nothing changes.
  // The check and the take are one transaction, so two runs starting together cannot both win.
  std::optional<StudyLease> take_study_lease(std::int64_t study_id, const StudyLease& me,
                                             const std::function<bool(const StudyLease& holder)>& holds);
  // Heartbeat of the holder `me` (nothing when it no longer holds the study).
  void renew_study_lease(std::int64_t study_id, const StudyLease& me);
  // Gives the study back, if `me` holds it.
  void release_study_lease(std::int64_t study_id, const StudyLease& me);
  // The lease as stored, live or not (a run killed with SIGKILL leaves its own behind); none when no
  // plain run holds the study.
  std::optional<StudyLease> study_lease(std::int64_t study_id);

  // Workers: several `cotune run --worker` processes share one study instead of one holding it
  // alone. join_study registers `me` (or renews its heartbeat) unless the exclusive lease is held by
  // someone `holds` says still holds it: that holder is returned then and nothing changes. Likewise
  // take_study_lease refuses (returns the worker) while a worker that `holds` accepts is registered;
  // the rows of workers it finds gone are removed. Each is one transaction.
  std::optional<StudyLease> join_study(std::int64_t study_id, const StudyLease& me,
                                       const std::function<bool(const StudyLease& holder)>& holds);
  void renew_worker(std::int64_t study_id, const StudyLease& me);  // heartbeat (re-registers when gone)
  void leave_study(std::int64_t study_id, const StudyLease& me);
  std::vector<StudyLease> study_workers(std::int64_t study_id);  // registered, live or not
  // Records a trial claimed by the worker `claim`, in one transaction, when the study lacks this
  // configuration and, with a `limit`, while the trials that count against the budget plus those in
  // flight are fewer than `limit` (so that workers together never start more than the trial budget).
  ClaimedTrial add_claimed_trial(std::int64_t study_id, const NewTrial& trial, const StudyLease& claim,
                                 std::optional<std::int64_t> limit);
  // The trials in flight whose claimant is not a registered worker that `holds` accepts (or that no
  // worker claimed: an earlier plain run's), claimed for `me` and returned, ordered by seq. Removes
  // the rows of workers found gone. One transaction: two workers never take over the same trial.
  std::vector<TrialRecord> claim_orphans(std::int64_t study_id, const StudyLease& me,
                                         const std::function<bool(const StudyLease& worker)>& holds);
  // Opaque state blobs, so that a study resumes where it stopped. Empty optional: never saved.
  void save_searcher_state(std::int64_t study_id, const std::vector<std::uint8_t>& state);
  std::optional<std::vector<std::uint8_t>> load_searcher_state(std::int64_t study_id);
  void save_predictor_state(std::int64_t study_id, const std::vector<std::uint8_t>& state);
  std::optional<std::vector<std::uint8_t>> load_predictor_state(std::int64_t study_id);

  // --- trials
  // Records a trial before it is submitted (status pending or running): the in-flight record that
  // resume re-attaches to. nullopt when the study already has a trial with this config key.
  std::optional<TrialId> add_trial(std::int64_t study_id, const NewTrial& trial);
  // The executor accepted the trial: status running, started now, one more attempt, its job id.
  void update_trial_started(std::int64_t trial_id, const std::string& external_id);
  // The trial's job is gone (cancelled when its run stopped): it stays in flight, without a job to
  // re-attach to, so the next run submits it again.
  void forget_trial_job(std::int64_t trial_id);
  // The trial ended; committed before returning. Sets finished_at to now.
  void finish_trial(std::int64_t trial_id, const TrialOutcome& outcome);
  std::optional<TrialRecord> trial(std::int64_t trial_id);
  std::vector<TrialRecord> trials(std::int64_t study_id);  // ordered by seq
  std::vector<TrialRecord> trials_by_status(std::int64_t study_id, const std::vector<TrialStatus>& statuses);
  std::optional<TrialRecord> best_trial(std::int64_t study_id);  // ok trial with the best objective
  std::unordered_set<std::string> seen_config_keys(std::int64_t study_id);
  std::int64_t trial_count(std::int64_t study_id);
  // The trials numbered `from_seq` or later, ordered by seq: what a worker reads of the others' work.
  std::vector<TrialRecord> trials_from_seq(std::int64_t study_id, std::int64_t from_seq);

  // --- history
  // Imported runs of earlier jobs for this workload (ordered by import, then source and row).
  std::vector<HistoryRow> history_for(const std::string& workload_key, const std::string& space);
  // Trials with these statuses of the other studies with this workload key and space.
  std::vector<TrialRecord> trials_of_workload(const std::string& workload_key, const std::string& space,
                                              std::optional<std::int64_t> exclude_study_id,
                                              const std::vector<TrialStatus>& statuses = {TrialStatus::kOk});
  // Adds rows in one transaction. A row whose (workload key, space, source, row number) is already
  // there is counted as a duplicate and left alone, so re-importing a file changes nothing.
  // With ImportTime::kKeep the rows keep their imported_at (a copy of another store's history).
  ImportCounts import_history(const std::vector<HistoryRow>& rows, ImportTime time = ImportTime::kNow);
  // Everything known about a workload: its imported history, then the finished trials of every
  // study with that workload key (source "study:<name>", row number = seq).
  std::vector<HistoryRow> export_history(const std::string& workload_key, const std::string& space);
  // Every (workload key, space) with imported history or a study, ordered.
  std::vector<std::pair<std::string, std::string>> workloads();

  // --- copies between stores (store_copy.hpp)
  // The study with its trials and saved state, read in one snapshot; a StoreError for an unknown id.
  StudyDump dump_study(std::int64_t study_id);
  // Writes a study read from another store, in one transaction: a new study with every trial as it
  // was (times, attempts, status, the recommendation and the saved state), or, when a study of that
  // name and study hash is here already, the dump's trials whose configuration it lacks. A study of
  // that name with another study hash is a UserError and changes nothing. Restoring the same dump
  // again changes nothing.
  StudyRestoreCounts restore_study(const StudyDump& dump);

 private:
  struct Impl;
  template <class F>
  auto write(F&& body) -> decltype(body());
  template <class F>
  auto read(F&& body) -> decltype(body());

  std::string path_;
  std::unique_ptr<Impl> impl_;
  std::mutex mutex_;
};

}  // namespace cotune::core

#endif  // COTUNE_CORE_STORE_STORE_HPP_
