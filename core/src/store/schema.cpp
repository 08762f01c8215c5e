#include "store/schema.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "store/sqlite.hpp"

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

// Version 4: several `cotune run --worker` on one study. Each live worker has a row (its host, pid
// and heartbeat); a trial in flight names the worker that claimed it, so that the others know what
// to take over when that worker is gone.
const char* const kVersion4 = R"sql(
CREATE TABLE study_workers (
  study_id  INTEGER NOT NULL REFERENCES studies (id) ON DELETE CASCADE,
  host      TEXT NOT NULL,
  pid       INTEGER NOT NULL,
  heartbeat REAL NOT NULL,
  PRIMARY KEY (study_id, host, pid)
);
ALTER TABLE trials ADD COLUMN claim_host TEXT;
ALTER TABLE trials ADD COLUMN claim_pid INTEGER;
)sql";

}  // namespace

const std::vector<Migration>& migrations() {
  static const std::vector<Migration> steps = {
      {1, "studies, trials and imported history", kVersion1},
      {2, "the recommended trial of a study", kVersion2},
      {3, "the run that holds a study", kVersion3},
      {4, "the workers of a study and their claims", kVersion4},
  };
  return steps;
}

const std::vector<Migration>& migrations_for(sql::Dialect dialect) {
  return dialect == sql::Dialect::kPostgres ? postgres_migrations() : migrations();
}

int latest_version(const std::vector<Migration>& steps) { return steps.empty() ? 0 : steps.back().version; }

namespace {

bool postgres(sql::Connection& db) { return db.dialect() == sql::Dialect::kPostgres; }

// PostgreSQL: the marker and the version are rows of cotune_meta, in the connection's schema.
bool has_meta_table(sql::Connection& db) {
  return db.query_int64("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() "
                        "AND table_name = 'cotune_meta'") > 0;
}

std::int64_t meta_value(sql::Connection& db, const char* key) {
  auto q = db.prepare("SELECT value FROM cotune_meta WHERE key = ?1");
  q->bind(1, key);
  if (!q->step()) return 0;
  return std::strtoll(q->text(0).c_str(), nullptr, 10);
}

void set_meta_value(sql::Connection& db, const char* key, std::int64_t value) {
  auto q = db.prepare("INSERT INTO cotune_meta (key, value) VALUES (?1, ?2) "
                      "ON CONFLICT (key) DO UPDATE SET value = excluded.value");
  q->bind(1, key);
  q->bind(2, std::to_string(value));
  q->step();
}

void set_version(sql::Connection& db, int version) {
  if (postgres(db)) set_meta_value(db, "schema_version", version);
  else db.exec(("PRAGMA user_version = " + std::to_string(version)).c_str());
}

void mark(sql::Connection& db) {
  if (postgres(db)) {
    db.exec("CREATE TABLE IF NOT EXISTS cotune_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
    set_meta_value(db, "application_id", kApplicationId);
  } else {
    db.exec(("PRAGMA application_id = " + std::to_string(kApplicationId)).c_str());
  }
}

class MigrationLock {
 public:
  explicit MigrationLock(sql::Connection& db) : db_(postgres(db) ? &db : nullptr) {
    if (db_) db_->exec(("SELECT pg_advisory_lock(" + std::to_string(kApplicationId) + ")").c_str());
  }
  ~MigrationLock() {
    if (!db_) return;
    try {
      db_->exec(("SELECT pg_advisory_unlock(" + std::to_string(kApplicationId) + ")").c_str());
    } catch (const std::exception&) {  // the connection is gone, and the lock with it
    }
  }
  MigrationLock(const MigrationLock&) = delete;
  MigrationLock& operator=(const MigrationLock&) = delete;

 private:
  sql::Connection* db_;
};

}  // namespace

int read_version(sql::Connection& db) {
  if (!postgres(db)) return static_cast<int>(db.query_int64("PRAGMA user_version"));
  return has_meta_table(db) ? static_cast<int>(meta_value(db, "schema_version")) : 0;
}

FileIdentity identify(sql::Connection& db) {
  FileIdentity id;
  id.dialect = db.dialect();
  if (postgres(db)) {
    if (has_meta_table(db)) {
      id.application_id = static_cast<std::int32_t>(meta_value(db, "application_id"));
      id.user_version = static_cast<int>(meta_value(db, "schema_version"));
    }
    auto names = db.prepare("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                            "ORDER BY table_name");
    while (names->step()) id.tables.push_back(names->text(0));
    return id;
  }
  id.application_id = static_cast<std::int32_t>(db.query_int64("PRAGMA application_id"));
  id.user_version = static_cast<int>(db.query_int64("PRAGMA user_version"));
  auto names = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  while (names->step()) id.tables.push_back(names->text(0));
  return id;
}

void check_identity(const FileIdentity& id, const std::string& path, int latest) {
  bool empty = id.application_id == 0 && id.user_version == 0 && id.tables.empty();
  if (empty) return;
  const bool pg = id.dialect == sql::Dialect::kPostgres;
  if (id.application_id != kApplicationId) {
    std::string tables;
    for (size_t i = 0; i < id.tables.size() && i < 5; ++i) tables += (i ? ", " : "") + id.tables[i];
    if (id.tables.size() > 5) tables += ", ...";
    throw StoreError("store " + path +
                     (pg ? ": this PostgreSQL database (its current schema) is not a cotune store"
                         : ": this is an SQLite database but not a cotune store") +
                     (tables.empty() ? std::string() : " (it has tables " + tables + ")") +
                     "; it was left untouched. " +
                     (pg ? "Pass the URL of a cotune store, or of an empty database."
                         : "Pass the path of a cotune store, or a new file name."));
  }
  if (id.user_version > latest)
    throw StoreError("store " + path + ": written by a newer cotune (schema version " +
                     std::to_string(id.user_version) + "; this cotune " COTUNE_VERSION
                     " reads up to version " + std::to_string(latest) +
                     "). Use a newer cotune, or another store" + (pg ? "." : " file."));
}

int migrate(sql::Connection& db) { return migrate(db, migrations_for(db.dialect())); }

int migrate(sql::Connection& db, const std::vector<Migration>& steps) {
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].version != static_cast<int>(i) + 1)
      throw std::logic_error("store migrations must be numbered 1, 2, 3, ... in order");
  // Up to date (the usual case): no write lock needed.
  int current = read_version(db);
  if (current == latest_version(steps)) return current;
  // One migrator at a time on PostgreSQL: a session lock taken before the transaction starts, so
  // that its snapshot sees what a migrator before it committed (SQLite's BEGIN IMMEDIATE already is
  // the lock).
  MigrationLock lock(db);
  db.begin(sql::Access::kWrite);
  try {
    // Read inside the write lock: another process may have migrated since we looked.
    int found = read_version(db);
    check_identity(identify(db), db.name(), latest_version(steps));
    if (found == 0) mark(db);
    for (const Migration& step : steps) {
      if (step.version <= found) continue;
      try {
        db.exec(step.sql);
      } catch (const sqlite::Error& e) {
        throw sqlite::Error(e.code(), std::string(e.what()) + " [schema migration to version " +
                                  std::to_string(step.version) + ": " + step.summary + "]");
      } catch (const sql::Error& e) {
        throw sql::Error(std::string(e.what()) + " [schema migration to version " + std::to_string(step.version) +
                             ": " + step.summary + "]",
                         e.retry(), e.constraint());
      }
      set_version(db, step.version);
    }
    db.commit();
    return found;
  } catch (...) {
    if (db.in_transaction()) db.rollback();
    throw;
  }
}

}  // namespace cotune::core::schema
