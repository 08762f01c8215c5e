// The study store: every API, durability across reopen and kill -9 and several processes on both
// backends (StoreTest: real SQLite files in a temporary directory, and a fresh database of a
// throwaway PostgreSQL cluster); the SQLite file's schema and migrations, refusal of foreign and
// newer files and its locking (SqliteStoreTest). PostgreSQL's own: store_postgres_test.cpp.
#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/store/store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "store/schema.hpp"
#include "store/sqlite.hpp"
#include "support/postgres_cluster.hpp"

namespace cotune::core {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class StoreTestBase : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "cotune-store-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = (fs::path(dir_) / "cotune.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  static NewStudy study_named(const std::string& name, Direction direction = Direction::kMaximize,
                              const std::string& workload = "w1") {
    NewStudy s;
    s.name = name;
    s.study_json = R"({"name":")" + name + R"("})";
    s.study_hash = sha256_hex(s.study_json);
    s.workload_key = workload_key(nlohmann::json{{"model", workload}}, "llm");
    s.space = "llm";
    s.objective_json = R"([{"metric":"tokens_per_s","direction":"maximize","constraints":[]}])";
    s.direction = direction;
    s.environment_json = R"({"host":"test"})";
    return s;
  }

  static NewTrial trial_for(int tp, TrialStatus status = TrialStatus::kPending) {
    nlohmann::json config = {{"tp", tp}, {"pp", 1}};
    NewTrial t;
    t.config_key = config_key(config);
    t.config_json = config.dump();
    t.status = status;
    t.executor = "sim";
    return t;
  }

  static TrialOutcome ok_with(double objective) {
    TrialOutcome o;
    o.status = TrialStatus::kOk;
    o.objective = objective;
    o.metrics_json = nlohmann::json{{"tokens_per_s", objective}}.dump();
    return o;
  }

  // Runs SQL on the file directly, outside the Store.
  std::string raw_query(const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr), SQLITE_OK);
    std::string result;
    char* error = nullptr;
    sqlite3_exec(
        db, sql.c_str(),
        [](void* out, int n, char** values, char**) {
          auto* s = static_cast<std::string*>(out);
          for (int i = 0; i < n; ++i) *s += (s->empty() ? "" : "|") + std::string(values[i] ? values[i] : "NULL");
          return 0;
        },
        &result, &error);
    EXPECT_EQ(error, nullptr) << error;
    sqlite3_free(error);
    sqlite3_close(db);
    return result;
  }

  std::string dir_;
  std::string path_;  // the store: a file in dir_, or (StoreTest on PostgreSQL) a database's URL
};

class SqliteStoreTest : public StoreTestBase {};

// The API on each backend, named by the parameter.
class StoreTest : public StoreTestBase, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    StoreTestBase::SetUp();
    if (GetParam() == "postgresql") {
      COTUNE_POSTGRES_DATABASE(path_);
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---------------------------------------------------------------- opening, schema, migrations

TEST_F(SqliteStoreTest, NewStoreIsWalWithTheLatestSchemaAndOurApplicationId) {
  {
    Store store(path_);
    EXPECT_EQ(store.schema_version(), Store::latest_schema_version());
    EXPECT_GE(Store::latest_schema_version(), 1);
  }
  EXPECT_EQ(raw_query("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw_query("PRAGMA application_id"), std::to_string(schema::kApplicationId));
  EXPECT_EQ(raw_query("PRAGMA user_version"), std::to_string(Store::latest_schema_version()));
  EXPECT_EQ(raw_query("SELECT group_concat(name) FROM (SELECT name FROM sqlite_master WHERE type='table' ORDER BY name)"),
            "history,studies,study_workers,trials");
}

TEST_P(StoreTest, ReopeningKeepsTheSchemaAndData) {
  std::int64_t id;
  {
    Store store(path_);
    id = store.create_study(study_named("a")).id;
  }
  Store again(path_);
  EXPECT_EQ(again.schema_version(), Store::latest_schema_version());
  ASSERT_TRUE(again.find_study("a"));
  EXPECT_EQ(again.find_study("a")->id, id);
}

TEST_F(SqliteStoreTest, RefusesAStoreWrittenByANewerCotune) {
  { Store store(path_); }
  int newer = Store::latest_schema_version() + 1;
  raw_query("PRAGMA user_version = " + std::to_string(newer));
  try {
    Store store(path_);
    FAIL() << "opened a newer store";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("newer cotune"));
    EXPECT_THAT(e.what(), HasSubstr("schema version " + std::to_string(newer)));
    EXPECT_THAT(e.what(), HasSubstr(path_));
  }
  EXPECT_EQ(raw_query("PRAGMA user_version"), std::to_string(newer));  // left as it was
}

TEST_F(SqliteStoreTest, RefusesAFileThatIsNotSqliteAndLeavesItUntouched) {
  std::string content;
  for (int i = 0; i < 200; ++i) content += "this is a text file, line " + std::to_string(i) + "\n";
  std::ofstream(path_, std::ios::binary) << content;
  try {
    Store store(path_);
    FAIL() << "opened a text file";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not an SQLite database"));
    EXPECT_THAT(e.what(), HasSubstr("left untouched"));
  }
  EXPECT_EQ(read_bytes(path_), content);
  EXPECT_FALSE(fs::exists(path_ + "-wal"));
  EXPECT_FALSE(fs::exists(path_ + "-shm"));
}

TEST_F(SqliteStoreTest, RefusesAnotherApplicationsSqliteDatabaseAndLeavesItUntouched) {
  raw_query("CREATE TABLE users (id INTEGER PRIMARY KEY, email TEXT); INSERT INTO users (email) VALUES ('a@b.c')");
  std::string before = read_bytes(path_);
  try {
    Store store(path_);
    FAIL() << "opened a foreign database";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not a cotune store"));
    EXPECT_THAT(e.what(), HasSubstr("users"));
  }
  EXPECT_EQ(read_bytes(path_), before);
  EXPECT_EQ(raw_query("PRAGMA journal_mode"), "delete");
}

TEST_F(SqliteStoreTest, AcceptsAnEmptyFileAsANewStore) {
  std::ofstream(path_).close();
  Store store(path_);
  EXPECT_EQ(store.schema_version(), Store::latest_schema_version());
}

TEST_F(SqliteStoreTest, WithoutCreateAMissingFileIsAnErrorAndIsNotCreated) {
  Store::Options options;
  options.create = false;
  EXPECT_THROW(Store(path_, options), StoreError);
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(SqliteStoreTest, ADirectoryIsNotAStore) {
  try {
    Store store(dir_);
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a directory"));
  }
}

TEST_F(SqliteStoreTest, AStoreInADirectoryThatDoesNotExistNamesTheDirectory) {
  const std::string path = dir_ + "/nodir/cotune.db";
  try {
    Store store(path);
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("store " + path + ": the directory " + dir_ + "/nodir does not exist"));
  }
  EXPECT_FALSE(fs::exists(dir_ + "/nodir"));
}

TEST_F(SqliteStoreTest, AddingAMigrationStepUpgradesOldFilesOnce) {
  std::int64_t id;
  {
    Store store(path_);
    id = store.create_study(study_named("old")).id;
  }
  std::vector<schema::Migration> steps = schema::migrations();
  int next = schema::latest_version() + 1;
  steps.push_back({next, "a note per study", "ALTER TABLE studies ADD COLUMN note TEXT NOT NULL DEFAULT 'none'"});
  {
    sqlite::Database db(path_, SQLITE_OPEN_READWRITE);
    EXPECT_EQ(schema::migrate(db, steps), next - 1);
    EXPECT_EQ(schema::migrate(db, steps), next);  // already done: nothing to do
  }
  EXPECT_EQ(raw_query("PRAGMA user_version"), std::to_string(next));
  EXPECT_EQ(raw_query("SELECT note FROM studies WHERE id = " + std::to_string(id)), "none");
  // This cotune's schema is now older than the file's.
  EXPECT_THROW(Store store(path_), StoreError);
}

TEST_F(SqliteStoreTest, AVersion3StoreMigratesAndItsTrialsInFlightAreOrphansForWorkers) {
  std::vector<schema::Migration> steps(schema::migrations().begin(), schema::migrations().begin() + 3);
  {
    sqlite::Database db(path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    schema::migrate(db, steps);
  }
  raw_query("INSERT INTO studies (name, study_json, study_hash, workload_key, space, objective_json, direction, "
            "environment_json, status, created_at, updated_at) VALUES ('old', '{}', 'h', 'w', 'llm', '[]', "
            "'maximize', '{}', 'stopped', 0, 0);"
            "INSERT INTO trials (study_id, seq, config_key, config_json, status, executor, created_at) "
            "VALUES (1, 1, 'k', '{}', 'running', 'sim', 0)");
  Store store(path_);
  EXPECT_EQ(raw_query("PRAGMA user_version"), std::to_string(Store::latest_schema_version()));
  EXPECT_EQ(raw_query("SELECT count(*) FROM study_workers"), "0");
  const StudyLease me{"host-a", 1, 0};
  ASSERT_FALSE(store.join_study(1, me, [](const StudyLease&) { return true; }));
  std::vector<TrialRecord> taken = store.claim_orphans(1, me, [](const StudyLease&) { return true; });
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(raw_query("SELECT claim_host || ':' || claim_pid FROM trials"), "host-a:1");
}

TEST_F(SqliteStoreTest, AFailedMigrationStepLeavesTheFileAtItsVersion) {
  { Store store(path_); }
  std::vector<schema::Migration> steps = schema::migrations();
  int next = schema::latest_version() + 1;
  steps.push_back({next, "broken step", "CREATE TABLE extra (x); ALTER TABLE no_such_table ADD COLUMN y"});
  sqlite::Database db(path_, SQLITE_OPEN_READWRITE);
  try {
    schema::migrate(db, steps);
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("migration to version " + std::to_string(next)));
  }
  EXPECT_EQ(raw_query("PRAGMA user_version"), std::to_string(next - 1));
  EXPECT_EQ(raw_query("SELECT count(*) FROM sqlite_master WHERE name = 'extra'"), "0");
}

// ---------------------------------------------------------------- studies

TEST_P(StoreTest, CreateStudyReturnsTheRecordAndReusesItForTheSameFile) {
  Store store(path_);
  NewStudy n = study_named("s1");
  StudyRecord s = store.create_study(n);
  EXPECT_GT(s.id, 0);
  EXPECT_EQ(s.name, "s1");
  EXPECT_EQ(s.status, StudyStatus::kRunning);
  EXPECT_EQ(s.workload_key, n.workload_key);
  EXPECT_GT(s.created_at, 1.6e9);
  EXPECT_EQ(store.create_study(n).id, s.id);

  std::optional<StudyRecord> found = store.find_study("s1");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->study_json, n.study_json);
  EXPECT_EQ(found->study_hash, n.study_hash);
  EXPECT_EQ(found->space, "llm");
  EXPECT_EQ(found->objective_json, n.objective_json);
  EXPECT_EQ(found->environment_json, n.environment_json);
  EXPECT_EQ(found->direction, Direction::kMaximize);
  EXPECT_DOUBLE_EQ(found->created_at, s.created_at);
  EXPECT_EQ(store.study(s.id)->name, "s1");
  EXPECT_FALSE(store.find_study("nope"));
  EXPECT_FALSE(store.study(s.id + 100));
}

TEST_P(StoreTest, ANameTakenByAnotherStudyFileIsAClearError) {
  Store store(path_);
  store.create_study(study_named("s1"));
  NewStudy changed = study_named("s1");
  changed.study_hash = sha256_hex("something else");
  try {
    store.create_study(changed);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'s1' already exists"));
    EXPECT_THAT(e.what(), HasSubstr("different study file"));
  }
  EXPECT_EQ(store.list_studies().size(), 1u);
  EXPECT_THROW(store.create_study(study_named("")), UserError);
}

TEST_P(StoreTest, StatusEnvironmentAndStateBlobs) {
  Store store(path_);
  std::int64_t id = store.create_study(study_named("s")).id;
  store.set_study_status(id, StudyStatus::kStopped);
  EXPECT_EQ(store.study(id)->status, StudyStatus::kStopped);
  store.set_study_environment(id, R"({"host":"other"})");
  EXPECT_EQ(store.study(id)->environment_json, R"({"host":"other"})");

  EXPECT_FALSE(store.load_searcher_state(id));
  EXPECT_FALSE(store.load_predictor_state(id));
  std::vector<std::uint8_t> state = {0, 1, 2, 255, 0, 42};
  store.save_searcher_state(id, state);
  store.save_predictor_state(id, {});
  EXPECT_EQ(store.load_searcher_state(id), state);
  ASSERT_TRUE(store.load_predictor_state(id));  // saved, and empty
  EXPECT_TRUE(store.load_predictor_state(id)->empty());

  EXPECT_THROW(store.set_study_status(id + 1, StudyStatus::kFinished), StoreError);
  EXPECT_THROW(store.save_searcher_state(id + 1, state), StoreError);
  EXPECT_THROW(store.load_searcher_state(id + 1), StoreError);
  EXPECT_THROW(store.set_study_environment(id, "not json"), StoreError);
}

TEST_P(StoreTest, ListStudiesCountsTrialsByStatusAndFindsTheBestInEachDirection) {
  Store store(path_);
  std::int64_t up = store.create_study(study_named("up", Direction::kMaximize)).id;
  std::int64_t down = store.create_study(study_named("down", Direction::kMinimize)).id;
  store.create_study(study_named("empty"));
  for (std::int64_t study : {up, down}) {
    for (int tp = 1; tp <= 3; ++tp) store.finish_trial(store.add_trial(study, trial_for(tp))->id, ok_with(tp * 10.0));
    TrialOutcome oom;
    oom.status = TrialStatus::kOom;
    oom.error = "out of memory";
    store.finish_trial(store.add_trial(study, trial_for(8))->id, oom);
    store.add_trial(study, trial_for(16));
  }
  std::vector<StudySummary> list = store.list_studies();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].study.name, "up");
  EXPECT_EQ(list[0].trial_count, 5);
  EXPECT_EQ(list[0].trials_by_status.at(TrialStatus::kOk), 3);
  EXPECT_EQ(list[0].trials_by_status.at(TrialStatus::kOom), 1);
  EXPECT_EQ(list[0].trials_by_status.at(TrialStatus::kPending), 1);
  EXPECT_EQ(list[0].trials_by_status.count(TrialStatus::kFailed), 0u);
  EXPECT_EQ(list[0].best_objective, 30.0);
  EXPECT_EQ(list[1].study.name, "down");
  EXPECT_EQ(list[1].best_objective, 10.0);
  EXPECT_EQ(list[2].trial_count, 0);
  EXPECT_FALSE(list[2].best_objective);
}

// ---------------------------------------------------------------- trials

TEST_P(StoreTest, ATrialGoesFromPendingToRunningToFinished) {
  Store store(path_);
  std::int64_t study = store.create_study(study_named("s")).id;
  NewTrial n = trial_for(2);
  n.predicted = 123.5;
  n.fingerprint_json = R"({"plugin":"1.0"})";
  std::optional<TrialId> added = store.add_trial(study, n);
  ASSERT_TRUE(added);
  EXPECT_EQ(added->seq, 1);

  TrialRecord pending = *store.trial(added->id);
  EXPECT_EQ(pending.status, TrialStatus::kPending);
  EXPECT_EQ(pending.study_id, study);
  EXPECT_EQ(pending.config_key, n.config_key);
  EXPECT_EQ(pending.config_json, n.config_json);
  EXPECT_EQ(pending.predicted, 123.5);
  EXPECT_EQ(pending.executor, "sim");
  EXPECT_EQ(pending.attempts, 0);
  EXPECT_EQ(pending.fingerprint_json, n.fingerprint_json);
  EXPECT_FALSE(pending.started_at);
  EXPECT_FALSE(pending.finished_at);
  EXPECT_FALSE(pending.metrics_json);
  EXPECT_FALSE(pending.objective);

  store.update_trial_started(added->id, "slurm-4711");
  TrialRecord running = *store.trial(added->id);
  EXPECT_EQ(running.status, TrialStatus::kRunning);
  EXPECT_EQ(running.external_id, "slurm-4711");
  EXPECT_EQ(running.attempts, 1);
  ASSERT_TRUE(running.started_at);
  EXPECT_GE(*running.started_at, running.created_at);
  store.update_trial_started(added->id, "slurm-4712");  // requeued
  EXPECT_EQ(store.trial(added->id)->attempts, 2);

  TrialOutcome outcome = ok_with(4200.0);
  outcome.log_path = "/tmp/logs/1.txt";
  store.finish_trial(added->id, outcome);
  TrialRecord done = *store.trial(added->id);
  EXPECT_EQ(done.status, TrialStatus::kOk);
  EXPECT_EQ(done.objective, 4200.0);
  EXPECT_EQ(done.metrics_json, outcome.metrics_json);
  EXPECT_EQ(done.log_path, "/tmp/logs/1.txt");
  EXPECT_FALSE(done.error);
  ASSERT_TRUE(done.finished_at);
  EXPECT_GE(*done.finished_at, *done.started_at);

  try {
    store.finish_trial(added->id, ok_with(1));
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("already finished with status 'ok'"));
  }
  EXPECT_THROW(store.update_trial_started(added->id, "x"), StoreError);
  EXPECT_THROW(store.update_trial_started(added->id + 50, "x"), StoreError);
  EXPECT_THROW(store.finish_trial(added->id + 50, ok_with(1)), StoreError);
  EXPECT_FALSE(store.trial(added->id + 50));
}

TEST_P(StoreTest, AFailedTrialKeepsItsErrorAndHasNoObjective) {
  Store store(path_);
  std::int64_t study = store.create_study(study_named("s")).id;
  std::int64_t id = store.add_trial(study, trial_for(1, TrialStatus::kRunning))->id;
  TrialRecord running = *store.trial(id);
  EXPECT_EQ(running.attempts, 1);
  EXPECT_TRUE(running.started_at);
  TrialOutcome failed;
  failed.status = TrialStatus::kFailed;
  failed.error = "exit status 3";
  store.finish_trial(id, failed);
  TrialRecord t = *store.trial(id);
  EXPECT_EQ(t.status, TrialStatus::kFailed);
  EXPECT_EQ(t.error, "exit status 3");
  EXPECT_FALSE(t.objective);
  EXPECT_FALSE(t.metrics_json);
}

TEST_P(StoreTest, ConfigKeysAreUniquePerStudyAndSeqCountsPerStudy) {
  Store store(path_);
  std::int64_t a = store.create_study(study_named("a")).id;
  std::int64_t b = store.create_study(study_named("b")).id;
  EXPECT_EQ(store.add_trial(a, trial_for(1))->seq, 1);
  EXPECT_EQ(store.add_trial(a, trial_for(2))->seq, 2);
  EXPECT_FALSE(store.add_trial(a, trial_for(1)));  // same configuration
  EXPECT_EQ(store.add_trial(b, trial_for(1))->seq, 1);  // another study may run it
  EXPECT_EQ(store.trial_count(a), 2);
  EXPECT_EQ(store.seen_config_keys(a), (std::unordered_set<std::string>{trial_for(1).config_key, trial_for(2).config_key}));
  EXPECT_THROW(store.add_trial(b + 10, trial_for(1)), StoreError);
}

TEST_P(StoreTest, InvalidArgumentsAreRefused) {
  Store store(path_);
  std::int64_t study = store.create_study(study_named("s")).id;
  EXPECT_THROW(store.add_trial(study, trial_for(1, TrialStatus::kOk)), std::invalid_argument);
  std::int64_t id = store.add_trial(study, trial_for(1))->id;
  TrialOutcome still_running;
  still_running.status = TrialStatus::kRunning;
  EXPECT_THROW(store.finish_trial(id, still_running), std::invalid_argument);
  NewTrial bad = trial_for(2);
  bad.config_json = "{tp: 2";
  EXPECT_THROW(store.add_trial(study, bad), StoreError);
  TrialOutcome bad_metrics = ok_with(1);
  bad_metrics.metrics_json = "[1,";
  EXPECT_THROW(store.finish_trial(id, bad_metrics), StoreError);
  EXPECT_EQ(store.trial(id)->status, TrialStatus::kPending);  // nothing half-written
}

TEST_P(StoreTest, QueriesByStatusOrderAndBest) {
  Store store(path_);
  std::int64_t study = store.create_study(study_named("s", Direction::kMinimize)).id;
  std::vector<std::int64_t> ids;
  for (int tp = 1; tp <= 6; ++tp) ids.push_back(store.add_trial(study, trial_for(tp))->id);
  store.finish_trial(ids[0], ok_with(50));
  store.finish_trial(ids[2], ok_with(20));
  store.finish_trial(ids[3], ok_with(20));  // tie: the earlier one is best
  TrialOutcome timeout;
  timeout.status = TrialStatus::kTimeout;
  store.finish_trial(ids[4], timeout);
  store.update_trial_started(ids[5], "job-6");

  std::vector<TrialRecord> all = store.trials(study);
  ASSERT_EQ(all.size(), 6u);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].seq, static_cast<std::int64_t>(i + 1));

  std::vector<TrialRecord> in_flight = store.trials_by_status(study, {TrialStatus::kRunning, TrialStatus::kPending});
  ASSERT_EQ(in_flight.size(), 2u);
  EXPECT_EQ(in_flight[0].id, ids[1]);
  EXPECT_EQ(in_flight[1].id, ids[5]);
  EXPECT_EQ(store.trials_by_status(study, {TrialStatus::kOk}).size(), 3u);
  EXPECT_TRUE(store.trials_by_status(study, {}).empty());

  std::optional<TrialRecord> best = store.best_trial(study);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->id, ids[2]);
  std::int64_t empty = store.create_study(study_named("empty")).id;
  EXPECT_FALSE(store.best_trial(empty));
  EXPECT_THROW(store.best_trial(empty + 1), StoreError);
}

TEST_P(StoreTest, EverythingSurvivesReopening) {
  std::int64_t study, trial;
  {
    Store store(path_);
    study = store.create_study(study_named("s")).id;
    trial = store.add_trial(study, trial_for(4))->id;
    store.finish_trial(trial, ok_with(99));
    store.add_trial(study, trial_for(8));
    store.save_searcher_state(study, {7, 7, 7});
  }
  Store store(path_);
  std::vector<TrialRecord> all = store.trials(study);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].objective, 99.0);
  EXPECT_EQ(all[1].status, TrialStatus::kPending);
  EXPECT_EQ(store.load_searcher_state(study), (std::vector<std::uint8_t>{7, 7, 7}));
  EXPECT_EQ(store.add_trial(study, trial_for(16))->seq, 3);
}

TEST_P(StoreTest, AFinishedTrialSurvivesKillMinus9RightAfterTheCall) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      Store store(path_);
      std::int64_t study = store.create_study(study_named("s")).id;
      for (int tp = 1; tp <= 5; ++tp) store.finish_trial(store.add_trial(study, trial_for(tp))->id, ok_with(tp));
      store.add_trial(study, trial_for(6, TrialStatus::kRunning));
    } catch (...) {
      _exit(1);
    }
    raise(SIGKILL);  // no destructors, no checkpoint, no close
    _exit(2);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child failed before the kill";
  Store store(path_);
  std::int64_t study = store.find_study("s")->id;
  std::vector<TrialRecord> all = store.trials(study);
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[4].objective, 5.0);
  EXPECT_EQ(all[5].status, TrialStatus::kRunning);  // the in-flight record resume re-attaches to
}

// ---------------------------------------------------------------- several processes

// Forks `writers` processes that each record `per_writer` finished trials in one study as fast as
// they can, while this process reads; returns the children's exit statuses. No connection may be
// open in this process across fork() (SQLite's POSIX locks are per process), so the reader opens
// after the children have started.
std::vector<int> run_writers(const std::string& path, int writers, int per_writer, std::int64_t study) {
  std::vector<pid_t> children;
  for (int w = 0; w < writers; ++w) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        Store store(path);
        for (int i = 0; i < per_writer; ++i) {
          nlohmann::json config = {{"writer", w}, {"i", i}};
          NewTrial t;
          t.config_key = config_key(config);
          t.config_json = config.dump();
          t.executor = "sim";
          std::optional<TrialId> id = store.add_trial(study, t);
          if (!id) throw std::runtime_error("lost a unique trial");
          store.update_trial_started(id->id, "job");
          TrialOutcome o;
          o.objective = i;
          o.metrics_json = "{}";
          store.finish_trial(id->id, o);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        code = 1;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  {
    // Read while they write: never a lock error, and counts only grow.
    Store reader(path);
    std::int64_t last = 0;
    for (int i = 0; i < 50; ++i) {
      std::int64_t now = reader.trial_count(study);
      EXPECT_GE(now, last);
      last = now;
      reader.list_studies();
    }
  }
  std::vector<int> codes;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

TEST_P(StoreTest, SeveralProcessesWriteOneStudyAtFullSpeedWithoutLosingAWrite) {
  std::int64_t study = Store(path_).create_study(study_named("shared")).id;
  const int writers = 3, per_writer = 150;
  std::vector<int> codes = run_writers(path_, writers, per_writer, study);
  EXPECT_THAT(codes, ::testing::Each(0));
  Store store(path_);

  std::vector<TrialRecord> all = store.trials(study);
  ASSERT_EQ(all.size(), static_cast<size_t>(writers * per_writer));
  std::set<std::string> keys;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].seq, static_cast<std::int64_t>(i + 1));  // no gaps, no repeats
    EXPECT_EQ(all[i].status, TrialStatus::kOk);
    EXPECT_EQ(all[i].attempts, 1);
    keys.insert(all[i].config_key);
  }
  EXPECT_EQ(keys.size(), all.size());
}

TEST_P(StoreTest, ProcessesOpeningANewStoreAtOnceCreateItOnce) {
  const int openers = 4;
  std::vector<pid_t> children;
  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  for (int w = 0; w < openers; ++w) {
    pid_t pid = fork();
    if (pid == 0) {
      close(gate[1]);
      char c;
      (void)!read(gate[0], &c, 1);  // all start together when the pipe closes
      try {
        Store store(path_);
        // Every opener gets the one study: its id as the exit status (a lost race on PostgreSQL may
        // spend a sequence value, so the id is not always 1).
        const std::int64_t id = store.create_study(study_named("same")).id;
        _exit(id >= 1 && id < 100 ? static_cast<int>(id) : 100);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "opener %d: %s\n", w, e.what());
        _exit(1);
      }
    }
    children.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);
  std::set<int> ids;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_LT(WEXITSTATUS(status), 100) << "opener failed: exit " << WEXITSTATUS(status);
    ids.insert(WEXITSTATUS(status));
  }
  Store store(path_);
  const auto studies = store.list_studies();
  ASSERT_EQ(studies.size(), 1u);
  EXPECT_EQ(ids, std::set<int>{static_cast<int>(studies.front().study.id)});
  EXPECT_EQ(store.schema_version(), Store::latest_schema_version());
}

TEST_F(SqliteStoreTest, AWriterWaitsForALongTransactionOfAnotherConnection) {
  std::int64_t study = Store(path_).create_study(study_named("s")).id;
  int locked[2];
  ASSERT_EQ(pipe(locked), 0);
  pid_t child = fork();
  if (child == 0) {
    // Holds the write lock for 300 ms once the parent is ready to write.
    close(locked[0]);
    int code = 0;
    try {
      sqlite::Database other(path_, SQLITE_OPEN_READWRITE);
      other.exec("BEGIN IMMEDIATE");
      (void)!write(locked[1], "x", 1);
      usleep(300 * 1000);
      other.exec("COMMIT");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      code = 1;
    }
    _exit(code);
  }
  close(locked[1]);
  char c;
  ASSERT_EQ(read(locked[0], &c, 1), 1);
  close(locked[0]);
  Store store(path_);
  EXPECT_TRUE(store.add_trial(study, trial_for(1)));  // waits instead of "database is locked"
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(store.trial_count(study), 1);
}

TEST_F(SqliteStoreTest, ALockHeldPastTheBusyTimeoutIsReportedClearly) {
  { Store store(path_); }
  Store::Options options;
  options.busy_timeout_s = 0.2;
  Store store(path_, options);
  sqlite::Database other(path_, SQLITE_OPEN_READWRITE);
  other.exec("BEGIN IMMEDIATE");
  try {
    store.create_study(study_named("s"));
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("held its write lock"));
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("database is locked")));
  }
  other.exec("ROLLBACK");
  EXPECT_EQ(store.create_study(study_named("s")).name, "s");
}

// ---------------------------------------------------------------- history

HistoryRow history_row(const std::string& key, const std::string& source, int row, int tp, double tps) {
  nlohmann::json config = {{"tp", tp}};
  HistoryRow r;
  r.workload_key = key;
  r.space = "llm";
  r.config_key = config_key(config);
  r.config_json = config.dump();
  r.metrics_json = nlohmann::json{{"tokens_per_s", tps}}.dump();
  r.source = source;
  r.row_number = row;
  return r;
}

TEST_P(StoreTest, ImportHistoryInOneTransactionAndReimportChangesNothing) {
  Store store(path_);
  std::string key = workload_key(nlohmann::json{{"model", "w1"}}, "llm");
  std::vector<HistoryRow> rows;
  for (int i = 1; i <= 500; ++i) rows.push_back(history_row(key, "runs.csv", i, i % 8 + 1, 100.0 + i));
  rows[7].status = TrialStatus::kOom;
  ImportCounts counts = store.import_history(rows);
  EXPECT_EQ(counts.inserted, 500);
  EXPECT_EQ(counts.duplicates, 0);
  counts = store.import_history(rows);
  EXPECT_EQ(counts.inserted, 0);
  EXPECT_EQ(counts.duplicates, 500);

  std::vector<HistoryRow> back = store.history_for(key, "llm");
  ASSERT_EQ(back.size(), 500u);
  EXPECT_EQ(back[0].source, "runs.csv");
  EXPECT_EQ(back[0].row_number, 1);
  EXPECT_EQ(back[0].config_json, rows[0].config_json);
  EXPECT_EQ(back[0].metrics_json, rows[0].metrics_json);
  EXPECT_EQ(back[7].status, TrialStatus::kOom);
  EXPECT_GT(back[0].imported_at, 1.6e9);
  EXPECT_TRUE(store.history_for(key, "recsys").empty());
  EXPECT_TRUE(store.history_for("other", "llm").empty());
}

TEST_P(StoreTest, ABadHistoryRowImportsNothingAndSaysWhichRow) {
  Store store(path_);
  std::vector<HistoryRow> rows;
  for (int i = 1; i <= 10; ++i) rows.push_back(history_row("k", "old.csv", i, i, i));
  rows[6].metrics_json = "{not json";
  try {
    store.import_history(rows);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("old.csv row 7"));
  }
  EXPECT_TRUE(store.history_for("k", "llm").empty());
  rows[6] = history_row("k", "old.csv", 7, 7, 7);
  rows[6].status = TrialStatus::kRunning;
  EXPECT_THROW(store.import_history(rows), UserError);
}

TEST_P(StoreTest, OtherStudiesOfTheSameWorkloadAreHistoryAndExportHasEverything) {
  Store store(path_);
  StudyRecord first = store.create_study(study_named("first", Direction::kMaximize, "w1"));
  StudyRecord second = store.create_study(study_named("second", Direction::kMaximize, "w1"));
  StudyRecord elsewhere = store.create_study(study_named("elsewhere", Direction::kMaximize, "w2"));
  for (const StudyRecord& s : {first, elsewhere}) {
    store.finish_trial(store.add_trial(s.id, trial_for(1))->id, ok_with(10));
    TrialOutcome oom;
    oom.status = TrialStatus::kOom;
    store.finish_trial(store.add_trial(s.id, trial_for(2))->id, oom);
    store.add_trial(s.id, trial_for(4));  // still pending
  }
  store.finish_trial(store.add_trial(second.id, trial_for(8))->id, ok_with(80));

  std::vector<TrialRecord> ok = store.trials_of_workload(first.workload_key, "llm", second.id);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].study_id, first.id);
  EXPECT_EQ(ok[0].objective, 10.0);
  std::vector<TrialRecord> finished =
      store.trials_of_workload(first.workload_key, "llm", std::nullopt, {TrialStatus::kOk, TrialStatus::kOom});
  EXPECT_EQ(finished.size(), 3u);

  store.import_history({history_row(first.workload_key, "past.csv", 1, 16, 5.0)});
  std::vector<HistoryRow> exported = store.export_history(first.workload_key, "llm");
  ASSERT_EQ(exported.size(), 4u);  // 1 imported + 2 finished of "first" + 1 of "second"
  EXPECT_EQ(exported[0].source, "past.csv");
  EXPECT_EQ(exported[1].source, "study:first");
  EXPECT_EQ(exported[1].row_number, 1);
  EXPECT_EQ(exported[1].status, TrialStatus::kOk);
  EXPECT_EQ(exported[2].status, TrialStatus::kOom);
  EXPECT_EQ(exported[2].metrics_json, "{}");
  EXPECT_EQ(exported[3].source, "study:second");

  // Exported rows import into another store as its history.
  Store other((fs::path(dir_) / "other.db").string());
  EXPECT_EQ(other.import_history(exported).inserted, 4);
  EXPECT_EQ(other.history_for(first.workload_key, "llm").size(), 4u);
}

// ---------------------------------------------------------------- workers sharing a study

TEST_P(StoreTest, WorkersAndThePlainRunsLeaseExcludeEachOther) {
  Store store(path_);
  const std::int64_t id = store.create_study(study_named("s")).id;
  auto alive = [](const StudyLease&) { return true; };
  auto gone = [](const StudyLease&) { return false; };
  const StudyLease a{"host-a", 1, 0}, b{"host-b", 2, 0}, plain{"host-p", 3, 0};
  EXPECT_FALSE(store.join_study(id, a, alive));
  EXPECT_FALSE(store.join_study(id, b, alive));
  EXPECT_EQ(store.study_workers(id).size(), 2u);
  // A plain run is refused while a worker lives, and named it.
  std::optional<StudyLease> holder = store.take_study_lease(id, plain, alive);
  ASSERT_TRUE(holder);
  EXPECT_TRUE(holder->host == "host-a" || holder->host == "host-b");
  store.leave_study(id, a);
  store.leave_study(id, b);
  EXPECT_TRUE(store.study_workers(id).empty());
  EXPECT_FALSE(store.take_study_lease(id, plain, alive));
  // A worker is refused while the plain run holds the study ...
  holder = store.join_study(id, a, alive);
  ASSERT_TRUE(holder);
  EXPECT_EQ(holder->host, "host-p");
  EXPECT_EQ(holder->pid, 3);
  EXPECT_TRUE(store.study_workers(id).empty());
  // ... and joins once it is gone; a worker judged gone no longer keeps a plain run out.
  EXPECT_FALSE(store.join_study(id, a, gone));
  EXPECT_FALSE(store.take_study_lease(id, plain, gone));
  EXPECT_TRUE(store.study_workers(id).empty()) << "the gone worker's row is removed";
}

// show reads the lease as stored to tell a live run from one that was killed.
TEST_P(StoreTest, TheStoredLeaseIsReadBackUntilReleased) {
  Store store(path_);
  const std::int64_t id = store.create_study(study_named("s")).id;
  EXPECT_FALSE(store.study_lease(id));
  const StudyLease me{"host-p", 42, 0};
  ASSERT_FALSE(store.take_study_lease(id, me, [](const StudyLease&) { return true; }));
  std::optional<StudyLease> stored = store.study_lease(id);
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->host, "host-p");
  EXPECT_EQ(stored->pid, 42);
  EXPECT_GT(stored->heartbeat, 1.6e9) << "the store sets the heartbeat (seconds since the epoch)";
  store.release_study_lease(id, me);
  EXPECT_FALSE(store.study_lease(id));
  EXPECT_THROW(store.study_lease(id + 1000), StoreError);
}

TEST_P(StoreTest, ClaimedTrialsStopAtTheBudgetLimitCountingThoseInFlight) {
  Store store(path_);
  const std::int64_t id = store.create_study(study_named("s")).id;
  const StudyLease a{"host-a", 1, 0};
  ClaimedTrial first = store.add_claimed_trial(id, trial_for(1), a, 3);
  ASSERT_TRUE(first.id);
  store.finish_trial(first.id->id, ok_with(1));
  ClaimedTrial cancelled = store.add_claimed_trial(id, trial_for(2), a, 3);
  ASSERT_TRUE(cancelled.id);
  TrialOutcome c;
  c.status = TrialStatus::kCancelled;
  store.finish_trial(cancelled.id->id, c);  // measured nothing: does not count
  EXPECT_TRUE(store.add_claimed_trial(id, trial_for(3), a, 3).id);
  EXPECT_TRUE(store.add_claimed_trial(id, trial_for(4), a, 3).id);  // 1 counted + 2 in flight
  ClaimedTrial full = store.add_claimed_trial(id, trial_for(5), a, 3);
  EXPECT_FALSE(full.id);
  EXPECT_TRUE(full.budget_full);
  ClaimedTrial again = store.add_claimed_trial(id, trial_for(1), a, std::nullopt);
  EXPECT_FALSE(again.id);
  EXPECT_FALSE(again.budget_full) << "a configuration already there";
  EXPECT_TRUE(store.add_claimed_trial(id, trial_for(5), a, std::nullopt).id);
  EXPECT_EQ(store.trials_from_seq(id, 4).size(), 2u);
}

TEST_P(StoreTest, TheTrialsOfAGoneWorkerAreClaimedOnce) {
  Store store(path_);
  const std::int64_t id = store.create_study(study_named("s")).id;
  const StudyLease a{"host-a", 1, 0}, b{"host-b", 2, 0}, c{"host-c", 3, 0};
  auto alive = [](const StudyLease&) { return true; };
  ASSERT_FALSE(store.join_study(id, a, alive));
  ASSERT_FALSE(store.join_study(id, b, alive));
  ASSERT_FALSE(store.join_study(id, c, alive));
  const TrialId a1 = *store.add_claimed_trial(id, trial_for(1), a, std::nullopt).id;
  const TrialId a2 = *store.add_claimed_trial(id, trial_for(2), a, std::nullopt).id;
  const TrialId b1 = *store.add_claimed_trial(id, trial_for(3), b, std::nullopt).id;
  store.finish_trial(a2.id, ok_with(2));
  // Every worker alive: nothing to take over.
  EXPECT_TRUE(store.claim_orphans(id, c, alive).empty());
  // a is gone: c takes its trial in flight (not the finished one, not b's), then nobody else can.
  auto all_but_a = [](const StudyLease& w) { return w.host != "host-a"; };
  std::vector<TrialRecord> taken = store.claim_orphans(id, c, all_but_a);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].id, a1.id);
  EXPECT_EQ(store.trial(a1.id)->claim_host, "host-c");
  EXPECT_EQ(store.trial(a1.id)->claim_pid, 3);
  EXPECT_EQ(store.trial(b1.id)->claim_host, "host-b");
  EXPECT_TRUE(store.claim_orphans(id, b, all_but_a).empty());
  EXPECT_EQ(store.study_workers(id).size(), 2u) << "a's row is removed";
  // Trials without a claim (an earlier plain run's) are orphans too.
  ASSERT_TRUE(store.add_trial(id, trial_for(4)));
  taken = store.claim_orphans(id, b, alive);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].seq, 4);
}

}  // namespace
}  // namespace cotune::core
