// `cotune store copy` and the store on PostgreSQL through the real command: SQLite -> PostgreSQL ->
// SQLite keeps every study, trial and history row; a second copy changes nothing; a name taken by
// another study file stops the copy before it writes; `cotune run` and `cotune show` on a
// postgresql:// store, which never print its password.
#include <cotune/core/errors.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/store/store_copy.hpp>
#include <cotune/core/studyfile/canonical_json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include "support/cli_process.hpp"
#include "support/postgres_cluster.hpp"

namespace cotune::core {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;
using testing::PostgresCluster;
using testing::read_file;
using testing::ScratchDir;

NewStudy study_named(const std::string& name, const std::string& file = "v1") {
  NewStudy s;
  s.name = name;
  s.study_json = R"({"name":")" + name + R"(","file":")" + file + R"("})";
  s.study_hash = sha256_hex(s.study_json);
  s.workload_key = "workload-" + name.substr(0, 1);
  s.space = "llm";
  s.objective_json = R"([{"metric":"tokens_per_s","direction":"maximize","constraints":[]}])";
  s.environment_json = R"({"host":"test"})";
  return s;
}

NewTrial trial_for(int tp) {
  json config = {{"tp", tp}};
  NewTrial t;
  t.config_key = config_key(config);
  t.config_json = config.dump();
  t.executor = "sim";
  t.predicted = tp * 1.5;
  return t;
}

// Two studies (finished, failed, in-flight trials; state blobs; a recommendation) and history.
void fill(Store& store) {
  for (const char* name : {"alpha", "beta"}) {
    const std::int64_t id = store.create_study(study_named(name)).id;
    for (int tp = 1; tp <= 5; ++tp) {
      const std::int64_t t = store.add_trial(id, trial_for(tp))->id;
      if (tp == 5) continue;  // still pending
      store.update_trial_started(t, "job-" + std::to_string(tp));
      TrialOutcome o;
      o.status = tp == 3 ? TrialStatus::kOom : TrialStatus::kOk;
      if (tp != 3) o.objective = 100.0 / 3 * tp;
      o.metrics_json = json{{"tokens_per_s", tp}}.dump();
      o.error = tp == 3 ? std::optional<std::string>("out of memory") : std::nullopt;
      store.finish_trial(t, o);
    }
    // One trial a worker claimed and ran: which worker goes with it.
    const std::int64_t claimed = store.add_claimed_trial(id, trial_for(6), StudyLease{"node-7", 4242, 0}, std::nullopt).id->id;
    store.update_trial_started(claimed, "job-6");
    TrialOutcome six;
    six.status = TrialStatus::kOk;
    six.objective = 200;
    six.metrics_json = json{{"tokens_per_s", 6}}.dump();
    store.finish_trial(claimed, six);
    store.save_searcher_state(id, {1, 0, 255, 7});
    store.set_study_recommended(id, store.trials(id)[1].id);
  }
  store.set_study_status(store.find_study("beta")->id, StudyStatus::kStopped);
  std::vector<HistoryRow> rows;
  for (int i = 1; i <= 20; ++i) {
    HistoryRow r;
    r.workload_key = "workload-a";
    r.space = "llm";
    r.config_key = "k" + std::to_string(i);
    r.config_json = json{{"tp", i}}.dump();
    r.metrics_json = json{{"tokens_per_s", i * 0.1}}.dump();
    r.source = "past.csv";
    r.row_number = i;
    rows.push_back(r);
  }
  store.import_history(rows);
}

// Everything a copy must keep, without the ids of the store it is in.
std::string contents(Store& store) {
  json out = json::array();
  for (const StudySummary& s : store.list_studies()) {
    StudyDump d = store.dump_study(s.study.id);
    json trials = json::array();
    std::string recommended;
    for (const TrialRecord& t : d.trials) {
      trials.push_back({t.seq, t.config_key, t.config_json, to_string(t.status), t.metrics_json.value_or("-"),
                        t.objective.value_or(-1), t.predicted.value_or(-1), t.executor, t.external_id.value_or("-"),
                        t.attempts, t.error.value_or("-"), t.created_at, t.started_at.value_or(-1),
                        t.finished_at.value_or(-1), t.claim_host.value_or("-"), t.claim_pid.value_or(-1)});
      if (d.study.recommended_trial_id == t.id) recommended = t.config_key;
    }
    out.push_back({d.study.name, d.study.study_hash, d.study.study_json, to_string(d.study.status),
                   d.study.created_at, d.study.updated_at, d.study.environment_json, recommended,
                   d.searcher_state.value_or(std::vector<std::uint8_t>{}), d.predictor_state.has_value(), trials});
  }
  for (const auto& [key, space] : store.workloads())
    for (const HistoryRow& r : store.history_for(key, space))
      out.push_back({r.workload_key, r.space, r.config_key, r.config_json, to_string(r.status), r.metrics_json,
                     r.source, r.row_number, r.imported_at});
  return out.dump();
}

class StoreCopy : public ::testing::Test {
 protected:
  void SetUp() override { COTUNE_POSTGRES_DATABASE(url_); }
  static int cluster_port() { return testing::PostgresEnvironment::instance().cluster()->port(); }
  ScratchDir dir_{"copy"};
  std::string url_;
};

TEST_F(StoreCopy, SqliteToPostgresToSqliteKeepsEveryStudyTrialAndHistoryRow) {
  Store source(dir_.file("source.db"));
  fill(source);
  Store pg(url_);
  StoreCopyCounts there = copy_store(source, pg);
  EXPECT_EQ(there.studies_created, 2);
  EXPECT_EQ(there.trials_added, 12);
  EXPECT_EQ(there.history.inserted, 20);
  Store back(dir_.file("back.db"));
  copy_store(pg, back);
  const std::string expected = contents(source);
  EXPECT_EQ(contents(pg), expected);
  EXPECT_EQ(contents(back), expected);
  EXPECT_EQ(pg.best_trial(pg.find_study("alpha")->id)->config_key, trial_for(6).config_key);
}

TEST_F(StoreCopy, CopyingTwiceChangesNothingAndANewerSourceAddsOnlyWhatIsMissing) {
  Store source(dir_.file("source.db"));
  fill(source);
  Store pg(url_);
  copy_store(source, pg);
  const std::string once = contents(pg);
  StoreCopyCounts again = copy_store(source, pg);
  EXPECT_EQ(again.studies_created, 0);
  EXPECT_EQ(again.studies_unchanged, 2);
  EXPECT_EQ(again.trials_added, 0);
  EXPECT_EQ(again.history.inserted, 0);
  EXPECT_EQ(again.history.duplicates, 20);
  EXPECT_EQ(contents(pg), once);

  source.add_trial(source.find_study("alpha")->id, trial_for(64));
  StoreCopyCounts more = copy_store(source, pg);
  EXPECT_EQ(more.studies_updated, 1);
  EXPECT_EQ(more.trials_added, 1);
  EXPECT_EQ(pg.trial_count(pg.find_study("alpha")->id), 7);
}

TEST_F(StoreCopy, HistoryExportedFromAStudysTrialsIsThatTrialWhereverItIsCopied) {
  // A store's trials exported as history ("study:alpha", the trial's number) and imported into a
  // second store: copied back (to PostgreSQL, which holds alpha) nothing is added; copied the other
  // way (alpha into the second store) the rows read as the trials, not twice.
  Store source(dir_.file("source.db"));
  fill(source);
  Store pg(url_);
  copy_store(source, pg);
  const std::string before = contents(pg);
  const std::vector<HistoryRow> exported = pg.export_history("workload-a", "llm");
  std::vector<HistoryRow> from_trials;
  for (const HistoryRow& r : exported)
    if (r.source.rfind("study:", 0) == 0) from_trials.push_back(r);
  ASSERT_EQ(from_trials.size(), 5u);  // alpha's finished trials (beta's workload is another)
  Store other(dir_.file("other.db"));
  EXPECT_EQ(other.import_history(from_trials).inserted, 5);
  StoreCopyCounts back = copy_store(other, pg);
  EXPECT_EQ(back.history.inserted, 0);
  EXPECT_EQ(back.history.duplicates, 5);
  EXPECT_EQ(contents(pg), before);
  // The other way: the studies arrive after the rows; each trial is read once.
  copy_store(source, other);
  size_t rows = 0;
  for (const HistoryRow& r : other.history_for("workload-a", "llm")) rows += r.source.rfind("study:", 0) == 0 ? 1 : 0;
  EXPECT_EQ(rows, 0u) << "rows of trials the store holds are read as the trials";
}

TEST_F(StoreCopy, ACopyTakenWhileAStudyRanCatchesUpWhenCopiedAgain) {
  // alpha's tp 5 trial is still pending when the first copy is taken, and the study running; then
  // it runs to the end in the source. Copied again, the destination has it as the source does, and
  // the study finished.
  Store source(dir_.file("source.db"));
  fill(source);
  Store pg(url_);
  copy_store(source, pg);
  const std::int64_t alpha = source.find_study("alpha")->id;
  TrialRecord pending = source.trials(alpha)[4];
  ASSERT_EQ(pending.status, TrialStatus::kPending);
  source.update_trial_started(pending.id, "job-5");
  TrialOutcome o;
  o.status = TrialStatus::kOk;
  o.objective = 500;
  o.metrics_json = json{{"tokens_per_s", 5}}.dump();
  source.finish_trial(pending.id, o);
  source.set_study_status(alpha, StudyStatus::kFinished);
  ASSERT_NE(contents(pg), contents(source));

  StoreCopyCounts again = copy_store(source, pg);
  EXPECT_EQ(again.trials_added, 0);
  EXPECT_EQ(again.trials_updated, 1);
  EXPECT_EQ(again.studies_updated, 1);
  EXPECT_EQ(contents(pg), contents(source));
  EXPECT_EQ(pg.find_study("alpha")->status, StudyStatus::kFinished);
  // And once more: nothing left to bring up to date.
  StoreCopyCounts third = copy_store(source, pg);
  EXPECT_EQ(third.trials_updated, 0);
  EXPECT_EQ(third.studies_unchanged, 2);
}

TEST_F(StoreCopy, OneStudyUnderAnEarlierVersionsHashIsStillOneStudy) {
  // The destination holds the study under the hash an earlier version computed (over the whole
  // file, its budget included); the source's file has a larger budget and today's hash.
  NewStudy there = study_named("gamma");
  there.study_json = R"({"name":"gamma","searcher":"random","budget":{"trials":4}})";
  there.study_hash = "0ld" + sha256_hex(there.study_json).substr(3);
  NewStudy here = there;
  here.study_json = R"({"name":"gamma","searcher":"random","budget":{"trials":8}})";
  here.study_hash = sha256_hex(here.study_json);
  Store source(dir_.file("source.db"));
  const StudyRecord made = source.create_study(here);
  source.add_trial(made.id, trial_for(2));
  Store destination(dir_.file("destination.db"));
  destination.create_study(there);
  const StoreCopyCounts c = copy_store(source, destination);
  EXPECT_EQ(c.studies_created, 0);
  EXPECT_EQ(c.trials_added, 1);
  // Another searcher is another study.
  Store other(dir_.file("other.db"));
  NewStudy changed = there;
  changed.study_json = R"({"name":"gamma","searcher":"evolution","budget":{"trials":4}})";
  other.create_study(changed);
  EXPECT_THROW(copy_store(source, other), UserError);
}

TEST_F(StoreCopy, ANameTakenByAnotherStudyFileStopsTheCopyBeforeItWrites) {
  Store source(dir_.file("source.db"));
  fill(source);
  Store pg(url_);
  pg.create_study(study_named("beta", "another file"));
  try {
    copy_store(source, pg);
    FAIL() << "copied over another study";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("study 'beta'"));
    EXPECT_THAT(e.what(), HasSubstr("different study file"));
    EXPECT_THAT(e.what(), Not(HasSubstr(PostgresCluster::kPassword)));
  }
  EXPECT_FALSE(pg.find_study("alpha"));
  EXPECT_TRUE(pg.workloads().size() == 1u);  // beta's own workload, no history copied
}

// ---------------------------------------------------------------- through the command

class StoreCli : public StoreCopy {
 protected:
  int run(const std::vector<std::string>& args, const std::function<int()>& setup = {}) {
    return testing::wait_exit_within(
        testing::spawn_cotune(dir_.path(), args, dir_.file("out"), dir_.file("err"), setup), std::chrono::seconds(120));
  }
  std::string out() const { return read_file(dir_.file("out")); }
  std::string err() const { return read_file(dir_.file("err")); }
  std::string write_study(const std::string& name, int trials) {
    json doc = {{"name", name},
                {"workload", json::parse(R"({"model": {"preset": "llama3-70b"}, "training": {"global_batch": 1024},
                                             "cluster": {"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8}})")},
                {"searcher", "random"},
                {"executor", {{"name", "sim"}, {"options", {{"noise", 0.05}}}}},
                {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
                {"budget", {{"trials", trials}}},
                {"parallel", 2},
                {"seed", 3}};
    std::string path = dir_.file(name + ".json");
    std::ofstream(path) << doc.dump(2);
    return path;
  }
};

TEST_F(StoreCli, RunAndShowOnAPostgresStoreNeverPrintThePassword) {
  const std::string study = write_study("pg-demo", 6);
  ASSERT_EQ(run({"run", study, "--store", url_}), 0) << err();
  const std::string redacted = "postgresql://postgres:***@127.0.0.1:" + std::to_string(cluster_port());
  EXPECT_THAT(out(), HasSubstr("store: " + redacted)) << out();
  EXPECT_THAT(out() + err(), Not(HasSubstr(PostgresCluster::kPassword)));
  EXPECT_EQ(testing::count_finished(testing::stored_trials(url_, "pg-demo")), 6u);

  // COTUNE_STORE is the default of every command.
  auto with_env = [this] { return ::setenv("COTUNE_STORE", url_.c_str(), 1); };
  ASSERT_EQ(run({"show"}, with_env), 0) << err();
  EXPECT_THAT(out(), HasSubstr("pg-demo"));
  EXPECT_THAT(out(), HasSubstr("6 ok"));
  ASSERT_EQ(run({"show", "pg-demo"}, with_env), 0) << err();
  EXPECT_THAT(out(), HasSubstr("store " + redacted));
  EXPECT_THAT(out() + err(), Not(HasSubstr(PostgresCluster::kPassword)));
}

TEST_F(StoreCli, StoreCopyBothWaysAndTwice) {
  const std::string file = dir_.file("local.db");
  const std::string study = write_study("local", 4);
  ASSERT_EQ(run({"run", study, "--store", file}), 0) << err();
  ASSERT_EQ(run({"store", "copy", file, url_}), 0) << err();
  EXPECT_THAT(out(), HasSubstr("studies 1 new"));
  EXPECT_THAT(out(), Not(HasSubstr(PostgresCluster::kPassword)));
  ASSERT_EQ(run({"store", "copy", file, url_}), 0) << err();
  EXPECT_THAT(out(), HasSubstr("studies 0 new, 0 brought up to date, 1 already there; 0 trials added, 0 finished since an earlier copy"));
  const std::string back = dir_.file("back.db");
  ASSERT_EQ(run({"store", "copy", url_, back}), 0) << err();
  Store a(file), b(back);
  EXPECT_EQ(contents(a), contents(b));

  // A wrong password: a clear error, exit 1, the password not printed.
  std::string wrong = url_;
  wrong.replace(wrong.find(PostgresCluster::kPassword), std::string(PostgresCluster::kPassword).size(), "wrong-one");
  EXPECT_EQ(run({"store", "copy", file, wrong}), 1);
  EXPECT_THAT(err(), HasSubstr("password authentication failed"));
  EXPECT_THAT(err(), Not(HasSubstr("wrong-one")));
  EXPECT_EQ(run({"store", "copy", file}), 2) << "usage";
  // One store on both sides, however it is named, is a mistake, not a copy of nothing.
  EXPECT_EQ(run({"store", "copy", file, dir_.file("./local.db")}), 2);
  EXPECT_THAT(err(), HasSubstr("is the destination too"));
  EXPECT_EQ(run({"store", "copy", url_, url_}), 2);
  EXPECT_THAT(err(), HasSubstr("is the destination too"));
}

}  // namespace
}  // namespace cotune::core
