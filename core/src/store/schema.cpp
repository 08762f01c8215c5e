#include "store/schema.hpp"

#include <stdexcept>
#include <string>

namespace cotune::core::schema {
namespace {

// Version 1: studies, trials, imported history. JSON columns are checked with json_valid so that
// a bug upstream cannot store text that later readers choke on.
const char* const kVersion1 = R"sql(
CREATE TABLE studies (
  id               INTEGER PRIMARY KEY,
  name             TEXT NOT NULL UNIQUE,
  study_json       TEXT NOT NULL,
  study_hash       TEXT NOT NULL,
  workload_key     TEXT NOT NULL,
  space            TEXT NOT NULL,
  objective_json   TEXT NOT NULL CHECK (json_valid(objective_json)),
  direction        TEXT NOT NULL CHECK (direction IN ('maximize', 'minimize')),
  environment_json TEXT NOT NULL CHECK (json_valid(environment_json)),
  status           TEXT NOT NULL CHECK (status IN ('running', 'stopped', 'finished')),
  searcher_state   BLOB,
  predictor_state  BLOB,
  created_at       REAL NOT NULL,
  updated_at       REAL NOT NULL
);
CREATE INDEX studies_by_workload ON studies (workload_key, space);

CREATE TABLE trials (
  id               INTEGER PRIMARY KEY,
  study_id         INTEGER NOT NULL REFERENCES studies (id) ON DELETE CASCADE,
  seq              INTEGER NOT NULL,
  config_key       TEXT NOT NULL,
  config_json      TEXT NOT NULL CHECK (json_valid(config_json)),
  status           TEXT NOT NULL CHECK (status IN ('pending', 'running', 'ok', 'failed', 'oom',
                                                   'timeout', 'cancelled', 'unavailable')),
  metrics_json     TEXT CHECK (metrics_json IS NULL OR json_valid(metrics_json)),
  objective        REAL,
  predicted        REAL,
  executor         TEXT NOT NULL,
  external_id      TEXT,
  attempts         INTEGER NOT NULL DEFAULT 0,
  error            TEXT,
  log_path         TEXT,
  created_at       REAL NOT NULL,
  started_at       REAL,
  finished_at      REAL,
  fingerprint_json TEXT CHECK (fingerprint_json IS NULL OR json_valid(fingerprint_json)),
  UNIQUE (study_id, seq),
  UNIQUE (study_id, config_key)
);
-- In-flight trials of a 1M-trial study, counts by status, and the best objective: index seeks.
CREATE INDEX trials_by_status ON trials (study_id, status, objective);

CREATE TABLE history (
  id           INTEGER PRIMARY KEY,
  workload_key TEXT NOT NULL,
  space        TEXT NOT NULL,
  config_key   TEXT NOT NULL,
  config_json  TEXT NOT NULL CHECK (json_valid(config_json)),
  status       TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'oom', 'timeout', 'cancelled',
                                               'unavailable')),
  metrics_json TEXT NOT NULL CHECK (json_valid(metrics_json)),
  source       TEXT NOT NULL,
  row_number   INTEGER NOT NULL,
  imported_at  REAL NOT NULL,
  UNIQUE (workload_key, space, source, row_number)
);
)sql";

// Version 2: the trial a study recommends (the predictor's denoised best, written at the end of
// each run; `cotune export` takes it by default).
const char* const kVersion2 = R"sql(
ALTER TABLE studies ADD COLUMN recommended_trial_id INTEGER REFERENCES trials (id) ON DELETE SET NULL;
)sql";

// Version 3: the run working on a study (its host and pid) and when it last said so: one study is
// run by one `cotune run` at a time.
const char* const kVersion3 = R"sql(
ALTER TABLE studies ADD COLUMN lease_host TEXT;
ALTER TABLE studies ADD COLUMN lease_pid INTEGER;
ALTER TABLE studies ADD COLUMN lease_heartbeat REAL;
)sql";

}  // namespace

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> steps = {
      {1, "studies, trials and imported history", kVersion1},
      {2, "the recommended trial of a study", kVersion2},
      {3, "the run that holds a study", kVersion3},
  };
  return steps;
}

int latest_version(const std::vector<Migration>& steps) { return steps.empty() ? 0 : steps.back().version; }

FileIdentity identify(sqlite::Database& db) {
  FileIdentity id;
  id.application_id = static_cast<std::int32_t>(db.query_int64("PRAGMA application_id"));
  id.user_version = static_cast<int>(db.query_int64("PRAGMA user_version"));
  auto names = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  while (names->step()) id.tables.push_back(names->text(0));
  return id;
}

void check_identity(const FileIdentity& id, const std::string& path, int latest) {
  bool empty = id.application_id == 0 && id.user_version == 0 && id.tables.empty();
  if (empty) return;
  if (id.application_id != kApplicationId) {
    std::string tables;
    for (size_t i = 0; i < id.tables.size() && i < 5; ++i) tables += (i ? ", " : "") + id.tables[i];
    if (id.tables.size() > 5) tables += ", ...";
    throw StoreError("store " + path + ": this is an SQLite database but not a cotune store" +
                     (tables.empty() ? std::string() : " (it has tables " + tables + ")") +
                     "; it was left untouched. Pass the path of a cotune store, or a new file name.");
  }
  if (id.user_version > latest)
    throw StoreError("store " + path + ": written by a newer cotune (schema version " +
                     std::to_string(id.user_version) + "; this cotune " COTUNE_VERSION
                     " reads up to version " + std::to_string(latest) +
                     "). Use a newer cotune, or another store file.");
}

int migrate(sqlite::Database& db, const std::vector<Migration>& steps) {
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].version != static_cast<int>(i) + 1)
      throw std::logic_error("store migrations must be numbered 1, 2, 3, ... in order");
  // Up to date (the usual case): no write lock needed.
  int current = static_cast<int>(db.query_int64("PRAGMA user_version"));
  if (current == latest_version(steps)) return current;
  db.exec("BEGIN IMMEDIATE");
  try {
    // Read inside the write lock: another process may have migrated since we looked.
    int found = static_cast<int>(db.query_int64("PRAGMA user_version"));
    check_identity(identify(db), db.path(), latest_version(steps));
    for (const Migration& step : steps) {
      if (step.version <= found) continue;
      try {
        db.exec(step.sql);
      } catch (const sqlite::Error& e) {
        throw sqlite::Error(e.code(), std::string(e.what()) + " [schema migration to version " +
                                  std::to_string(step.version) + ": " + step.summary + "]");
      }
      db.exec(("PRAGMA user_version = " + std::to_string(step.version)).c_str());
    }
    if (found == 0) db.exec(("PRAGMA application_id = " + std::to_string(kApplicationId)).c_str());
    db.exec("COMMIT");
    return found;
  } catch (...) {
    if (db.in_transaction()) sqlite3_exec(db.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

}  // namespace cotune::core::schema
