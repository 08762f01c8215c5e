// The store on PostgreSQL, what differs from SQLite (the shared API runs on both in store_test.cpp):
// store locations and the redaction of passwords, the schema's marker and version in cotune_meta,
// refusal of foreign and newer databases, a wrong password and an unreachable server, the lease.
#include <cotune/core/errors.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/store/store_location.hpp>
#include <cotune/core/studyfile/canonical_json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "store/postgres.hpp"
#include "store/schema.hpp"
#include "support/postgres_cluster.hpp"

namespace cotune::core {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::PostgresCluster;

// ---------------------------------------------------------------- locations (no server needed)

TEST(StoreLocation, PostgresUrlsAreToldFromFilePaths) {
  EXPECT_TRUE(is_postgres_url("postgresql://u@h/db"));
  EXPECT_TRUE(is_postgres_url("postgres://h/db"));
  EXPECT_TRUE(is_postgres_url("PostgreSQL://h/db"));  // schemes are case-insensitive (RFC 3986) ...
  EXPECT_EQ(connection_url("PostgreSQL://u@h/DB"), "postgresql://u@h/DB");  // ... libpq reads lower case
  EXPECT_FALSE(is_postgres_url("cotune.db"));
  EXPECT_FALSE(is_postgres_url("/data/postgresql/cotune.db"));
  EXPECT_FALSE(is_postgres_url("postgresql:/h/db"));
}

TEST(StoreLocation, RedactionHidesEveryPasswordAndKeepsTheRest) {
  EXPECT_EQ(redact_store_location("postgresql://alice:s3cret@db.example:5433/cotune?sslmode=require"),
            "postgresql://alice:***@db.example:5433/cotune?sslmode=require");
  EXPECT_EQ(redact_store_location("postgres://alice@db/cotune"), "postgres://alice@db/cotune");
  EXPECT_EQ(redact_store_location("postgresql://db/cotune?user=bob&password=hunter2&sslmode=require"),
            "postgresql://db/cotune?user=bob&password=***&sslmode=require");
  EXPECT_EQ(redact_store_location("postgresql://a:p%40ss@h/db?PASSWORD=x"), "postgresql://a:***@h/db?PASSWORD=***");
  EXPECT_EQ(redact_store_location("postgresql://:only@h/db"), "postgresql://:***@h/db");
  EXPECT_EQ(redact_store_location("postgresql://a:p@s/s@h/db"), "postgresql://a:***@h/db");  // raw '@' and '/'
  EXPECT_EQ(redact_store_location("postgresql://h/db?user=a@b"), "postgresql://h/db?user=a@b");
  EXPECT_EQ(redact_store_location("postgresql:///db?host=/tmp"), "postgresql:///db?host=/tmp");
  EXPECT_EQ(redact_store_location("runs/cotune.db"), "runs/cotune.db");
  EXPECT_EQ(redact_store_location("user:pw@file.db"), "user:pw@file.db");  // a file name, not a URL
  // A mistyped or foreign scheme's password is hidden too: it is printed in the error that says so.
  EXPECT_EQ(redact_store_location("postgressql://alice:s3cret@h/db"), "postgressql://alice:***@h/db");
  EXPECT_EQ(redact_store_location("mysql://h/db?password=x"), "mysql://h/db?password=***");
}

TEST(StoreLocation, AMistypedUrlIsRefusedNotTakenForAFileName) {
  EXPECT_EQ(check_store_location("postgresql://u@h/db"), "");
  EXPECT_EQ(check_store_location("PostgreSQL://u@h/db"), "");
  EXPECT_EQ(check_store_location("runs/cotune.db"), "");
  EXPECT_EQ(check_store_location("/data/postgres/cotune.db"), "");
  const std::string scheme = check_store_location("postgressql://alice:s3cret@h/db");
  EXPECT_THAT(scheme, HasSubstr("'postgressql://' is not a store URL"));
  EXPECT_THAT(scheme, HasSubstr("postgressql://alice:***@h/db"));
  EXPECT_THAT(scheme, Not(HasSubstr("s3cret")));
  for (const char* typo : {"postgres:team", "postgresql:/h/db", "postgresq:team", "Postgres:team"})
    EXPECT_THAT(check_store_location(typo), HasSubstr("looks like a PostgreSQL URL but is not one")) << typo;
  // A stray space from a copied line would name a file " postgresql:..." in the working directory.
  for (const char* spaced : {" postgresql://u@h/db", "cotune.db ", " "})
    EXPECT_THAT(check_store_location(spaced), HasSubstr("begins or ends with white space")) << spaced;
}

TEST(StoreLocation, CommandsToRunAgainLeaveThePasswordOut) {
  bool left_out = false;
  EXPECT_EQ(store_location_for_command("postgresql://u:pw@h/db?password=x&sslmode=require", &left_out),
            "postgresql://u@h/db?sslmode=require");
  EXPECT_TRUE(left_out);
  EXPECT_EQ(store_location_for_command("postgresql://u@h/db?password=x", &left_out), "postgresql://u@h/db");
  EXPECT_TRUE(left_out);
  EXPECT_EQ(store_location_for_command("postgresql://u@h/db?sslmode=require", &left_out),
            "postgresql://u@h/db?sslmode=require");
  EXPECT_FALSE(left_out);
}

TEST(StoreLocation, FilesOfADatabaseStoreGoToTheWorkingDirectory) {
  EXPECT_EQ(store_files_directory("postgresql://h/db"), std::filesystem::current_path().string());
  EXPECT_EQ(store_files_directory("/a/b/cotune.db"), "/a/b");
  EXPECT_EQ(store_location_for_display("postgresql://u:pw@h/db"), "postgresql://u:***@h/db");
}

TEST(StoreLocation, ParametersAreTranslatedOutsideQuotedText) {
  EXPECT_EQ(postgres::translate_parameters("SELECT a FROM t WHERE x = ?1 AND y IN (?2, ?12) AND z = '?3'"),
            "SELECT a FROM t WHERE x = $1 AND y IN ($2, $12) AND z = '?3'");
  EXPECT_EQ(postgres::translate_parameters("VALUES (?, ?, 'it''s ?')"), "VALUES ($1, $2, 'it''s ?')");
}

TEST(StoreSchema, BothDatabasesHaveTheSameMigrationSteps) {
  const auto& lite = schema::migrations();
  const auto& pg = schema::postgres_migrations();
  ASSERT_EQ(lite.size(), pg.size());
  for (size_t i = 0; i < lite.size(); ++i) {
    EXPECT_EQ(lite[i].version, pg[i].version);
    EXPECT_STREQ(lite[i].summary, pg[i].summary);
  }
}

// ---------------------------------------------------------------- against the server

class PostgresStore : public ::testing::Test {
 protected:
  void SetUp() override { COTUNE_POSTGRES_DATABASE(url_); }
  PostgresCluster& cluster() { return *testing::PostgresEnvironment::instance().cluster(); }
  std::string database() const { return url_.substr(url_.rfind('/') + 1); }
  // Runs SQL on the test's database as the superuser, outside the Store.
  void raw(const std::string& sql) { cluster().admin(sql, database()); }
  std::string raw_text(const std::string& sql) {
    postgres::Connection c(url_, 10);
    return c.query_text(sql.c_str());
  }

  static NewStudy study_named(const std::string& name) {
    NewStudy s;
    s.name = name;
    s.study_json = R"({"name":")" + name + R"("})";
    s.study_hash = sha256_hex(s.study_json);
    s.workload_key = "w";
    s.space = "llm";
    s.objective_json = "[]";
    return s;
  }

  std::string url_;
};

TEST_F(PostgresStore, ANewStoreIsMarkedAndVersionedInCotuneMeta) {
  {
    Store store(url_);
    EXPECT_EQ(store.schema_version(), Store::latest_schema_version());
    EXPECT_THAT(store.path(), HasSubstr("postgres:***@"));
    EXPECT_THAT(store.path(), Not(HasSubstr(PostgresCluster::kPassword)));
  }
  EXPECT_EQ(raw_text("SELECT value FROM cotune_meta WHERE key = 'application_id'"),
            std::to_string(schema::kApplicationId));
  EXPECT_EQ(raw_text("SELECT value FROM cotune_meta WHERE key = 'schema_version'"),
            std::to_string(Store::latest_schema_version()));
  EXPECT_EQ(raw_text("SELECT string_agg(table_name, ',' ORDER BY table_name) FROM information_schema.tables "
                     "WHERE table_schema = 'public'"),
            "cotune_meta,history,studies,study_workers,trials");
  Store again(url_);  // reopening migrates nothing
  EXPECT_EQ(again.schema_version(), Store::latest_schema_version());
}

TEST_F(PostgresStore, RefusesAnotherApplicationsDatabaseAndLeavesItUntouched) {
  raw("CREATE TABLE users (id BIGSERIAL PRIMARY KEY, email TEXT); INSERT INTO users (email) VALUES ('a@b.c')");
  try {
    Store store(url_);
    FAIL() << "opened a foreign database";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("not a cotune store"));
    EXPECT_THAT(e.what(), HasSubstr("users"));
    EXPECT_THAT(e.what(), Not(HasSubstr(PostgresCluster::kPassword)));
  }
  EXPECT_EQ(raw_text("SELECT string_agg(table_name, ',') FROM information_schema.tables "
                     "WHERE table_schema = 'public'"),
            "users");
}

TEST_F(PostgresStore, RefusesAStoreWrittenByANewerCotune) {
  { Store store(url_); }
  const int newer = Store::latest_schema_version() + 1;
  raw("UPDATE cotune_meta SET value = '" + std::to_string(newer) + "' WHERE key = 'schema_version'");
  try {
    Store store(url_);
    FAIL() << "opened a newer store";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("newer cotune"));
    EXPECT_THAT(e.what(), HasSubstr("schema version " + std::to_string(newer)));
  }
  EXPECT_EQ(raw_text("SELECT value FROM cotune_meta WHERE key = 'schema_version'"), std::to_string(newer));
}

TEST_F(PostgresStore, AFailedMigrationStepLeavesTheDatabaseAtItsVersion) {
  { Store store(url_); }
  std::vector<schema::Migration> steps = schema::postgres_migrations();
  const int next = schema::latest_version(steps) + 1;
  steps.push_back({next, "broken step", "CREATE TABLE extra (x INT); ALTER TABLE no_such_table ADD COLUMN y INT"});
  postgres::Connection db(url_, 10);
  try {
    schema::migrate(db, steps);
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("migration to version " + std::to_string(next)));
  }
  EXPECT_EQ(schema::read_version(db), next - 1);
  EXPECT_EQ(db.query_int64("SELECT count(*) FROM information_schema.tables WHERE table_name = 'extra'"), 0);
  steps.back().sql = "ALTER TABLE studies ADD COLUMN note TEXT NOT NULL DEFAULT 'none'";
  EXPECT_EQ(schema::migrate(db, steps), next - 1);
  EXPECT_EQ(schema::migrate(db, steps), next);  // already done
}

TEST_F(PostgresStore, WithoutCreateAnEmptyDatabaseIsAnErrorAndStaysEmpty) {
  Store::Options options;
  options.create = false;
  EXPECT_THROW(Store(url_, options), StoreError);
  EXPECT_EQ(raw_text("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"), "0");
}

TEST_F(PostgresStore, AWrongPasswordIsAClearErrorThatDoesNotPrintItAndWritesNothing) {
  std::string wrong = url_;
  wrong.replace(wrong.find(PostgresCluster::kPassword), std::string(PostgresCluster::kPassword).size(), "not-it-at-all");
  try {
    Store store(wrong);
    FAIL() << "logged in with a wrong password";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("store postgresql://postgres:***@127.0.0.1:"));
    EXPECT_THAT(e.what(), HasSubstr("password authentication failed"));
    EXPECT_THAT(e.what(), Not(HasSubstr("not-it-at-all")));
  }
  EXPECT_EQ(raw_text("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"), "0");
}

TEST_F(PostgresStore, AnUnreachableServerIsAClearError) {
  // Port 1: nothing listens there, so the connection is refused at once.
  const std::string url = "postgresql://postgres:" + std::string(PostgresCluster::kPassword) + "@127.0.0.1:1/cotune";
  try {
    Store store(url);
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("store postgresql://postgres:***@127.0.0.1:1/cotune: cannot connect"));
    EXPECT_THAT(e.what(), Not(HasSubstr(PostgresCluster::kPassword)));
  }
}

TEST_F(PostgresStore, TheLeaseGoesToOneOfTwoConnections) {
  Store a(url_), b(url_);
  const std::int64_t id = a.create_study(study_named("s")).id;
  auto alive = [](const StudyLease&) { return true; };
  EXPECT_FALSE(a.take_study_lease(id, {"host-a", 1, 0}, alive));
  std::optional<StudyLease> holder = b.take_study_lease(id, {"host-b", 2, 0}, alive);
  ASSERT_TRUE(holder);
  EXPECT_EQ(holder->host, "host-a");
  a.release_study_lease(id, {"host-a", 1, 0});
  EXPECT_FALSE(b.take_study_lease(id, {"host-b", 2, 0}, alive));
  auto gone = [](const StudyLease&) { return false; };
  EXPECT_FALSE(a.take_study_lease(id, {"host-a", 1, 0}, gone));  // b's holder judged gone: taken over
}

TEST_F(PostgresStore, AWriterWaitsForALockOfAnotherConnection) {
  Store store(url_);
  const std::int64_t id = store.create_study(study_named("s")).id;
  postgres::Connection other(url_, 10);
  other.exec("BEGIN; LOCK TABLE trials IN EXCLUSIVE MODE");
  std::thread release([&other] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    other.exec("COMMIT");
  });
  const auto start = std::chrono::steady_clock::now();
  NewTrial t;
  t.config_key = "k";
  t.config_json = "{}";
  t.executor = "sim";
  EXPECT_TRUE(store.add_trial(id, t));  // waits instead of failing
  release.join();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250));
  EXPECT_EQ(store.trial_count(id), 1);
}

TEST_F(PostgresStore, ALockHeldPastTheBusyTimeoutIsReportedClearly) {
  { Store store(url_); }
  Store::Options options;
  options.busy_timeout_s = 0.2;
  Store store(url_, options);
  postgres::Connection other(url_, 10);
  other.exec("BEGIN; LOCK TABLE studies IN EXCLUSIVE MODE");
  try {
    store.create_study(study_named("s"));
    FAIL();
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("held its write lock"));
    EXPECT_THAT(e.what(), HasSubstr("postgres:***@"));
  }
  other.exec("ROLLBACK");
  EXPECT_EQ(store.create_study(study_named("s")).name, "s");
}

TEST_F(PostgresStore, TextAndBlobsRoundTripExactly) {
  Store store(url_);
  NewStudy n = study_named("ünïcødé ✓");
  n.environment_json = R"({"quote":"it's","backslash":"a\\b","dollar":"$1 ?2"})";
  const std::int64_t id = store.create_study(n).id;
  EXPECT_EQ(store.study(id)->environment_json, n.environment_json);
  EXPECT_EQ(store.study(id)->name, n.name);
  std::vector<std::uint8_t> bytes(4096);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7);
  store.save_searcher_state(id, bytes);
  EXPECT_EQ(store.load_searcher_state(id), bytes);
}

}  // namespace
}  // namespace cotune::core
