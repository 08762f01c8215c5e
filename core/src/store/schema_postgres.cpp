// The store's schema on PostgreSQL: the same tables, columns, constraints and versions as the SQLite
// steps in schema.cpp, in PostgreSQL's types (BIGSERIAL ids, DOUBLE PRECISION, BYTEA). JSON columns
// stay TEXT, stored as given, and are checked by cotune_json_valid (the twin of SQLite's json_valid:
// false instead of an error, so that a bad value is a check violation like on SQLite).
#include <vector>

#include "store/schema.hpp"

namespace cotune::core::schema {
namespace {

const char* const kVersion1 = R"sql(
CREATE FUNCTION cotune_json_valid(value TEXT) RETURNS BOOLEAN LANGUAGE plpgsql IMMUTABLE AS $body$
BEGIN
  PERFORM value::jsonb;
  RETURN TRUE;
EXCEPTION WHEN OTHERS THEN
  RETURN FALSE;
END
$body$;

CREATE TABLE studies (
  id               BIGSERIAL PRIMARY KEY,
  name             TEXT NOT NULL UNIQUE,
  study_json       TEXT NOT NULL,
  study_hash       TEXT NOT NULL,
  workload_key     TEXT NOT NULL,
  space            TEXT NOT NULL,
  objective_json   TEXT NOT NULL CHECK (cotune_json_valid(objective_json)),
  direction        TEXT NOT NULL CHECK (direction IN ('maximize', 'minimize')),
  environment_json TEXT NOT NULL CHECK (cotune_json_valid(environment_json)),
  status           TEXT NOT NULL CHECK (status IN ('running', 'stopped', 'finished')),
  searcher_state   BYTEA,
  predictor_state  BYTEA,
  created_at       DOUBLE PRECISION NOT NULL,
  updated_at       DOUBLE PRECISION NOT NULL
);
CREATE INDEX studies_by_workload ON studies (workload_key, space);

CREATE TABLE trials (
  id               BIGSERIAL PRIMARY KEY,
  study_id         BIGINT NOT NULL REFERENCES studies (id) ON DELETE CASCADE,
  seq              BIGINT NOT NULL,
  config_key       TEXT NOT NULL,
  config_json      TEXT NOT NULL CHECK (cotune_json_valid(config_json)),
  status           TEXT NOT NULL CHECK (status IN ('pending', 'running', 'ok', 'failed', 'oom',
                                                   'timeout', 'cancelled', 'unavailable')),
  metrics_json     TEXT CHECK (metrics_json IS NULL OR cotune_json_valid(metrics_json)),
  objective        DOUBLE PRECISION,
  predicted        DOUBLE PRECISION,
  executor         TEXT NOT NULL,
  external_id      TEXT,
  attempts         BIGINT NOT NULL DEFAULT 0,
  error            TEXT,
  log_path         TEXT,
  created_at       DOUBLE PRECISION NOT NULL,
  started_at       DOUBLE PRECISION,
  finished_at      DOUBLE PRECISION,
  fingerprint_json TEXT CHECK (fingerprint_json IS NULL OR cotune_json_valid(fingerprint_json)),
  UNIQUE (study_id, seq),
  UNIQUE (study_id, config_key)
);
CREATE INDEX trials_by_status ON trials (study_id, status, objective);

CREATE TABLE history (
  id           BIGSERIAL PRIMARY KEY,
  workload_key TEXT NOT NULL,
  space        TEXT NOT NULL,
  config_key   TEXT NOT NULL,
  config_json  TEXT NOT NULL CHECK (cotune_json_valid(config_json)),
  status       TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'oom', 'timeout', 'cancelled',
                                               'unavailable')),
  metrics_json TEXT NOT NULL CHECK (cotune_json_valid(metrics_json)),
  source       TEXT NOT NULL,
  row_number   BIGINT NOT NULL,
  imported_at  DOUBLE PRECISION NOT NULL,
  UNIQUE (workload_key, space, source, row_number)
);
)sql";

const char* const kVersion2 = R"sql(
ALTER TABLE studies ADD COLUMN recommended_trial_id BIGINT REFERENCES trials (id) ON DELETE SET NULL;
)sql";

const char* const kVersion3 = R"sql(
ALTER TABLE studies ADD COLUMN lease_host TEXT;
ALTER TABLE studies ADD COLUMN lease_pid BIGINT;
ALTER TABLE studies ADD COLUMN lease_heartbeat DOUBLE PRECISION;
)sql";

const char* const kVersion4 = R"sql(
CREATE TABLE study_workers (
  study_id  BIGINT NOT NULL REFERENCES studies (id) ON DELETE CASCADE,
  host      TEXT NOT NULL,
  pid       BIGINT NOT NULL,
  heartbeat DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (study_id, host, pid)
);
ALTER TABLE trials ADD COLUMN claim_host TEXT;
ALTER TABLE trials ADD COLUMN claim_pid BIGINT;
)sql";

}  // namespace

const std::vector<Migration>& postgres_migrations() {
  static const std::vector<Migration> steps = {
      {1, "studies, trials and imported history", kVersion1},
      {2, "the recommended trial of a study", kVersion2},
      {3, "the run that holds a study", kVersion3},
      {4, "the workers of a study and their claims", kVersion4},
  };
  return steps;
}

}  // namespace cotune::core::schema
