// The study loop through the real plugins (llm space, sim executor, krr predictor, random and
// reinforce searchers) and a real store: budget and stopping rules, stop and resume, failed history
// never proposed again, constraints, the Pareto front and the recommended configuration.
#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/model/objective.hpp>
#include <cotune/core/model/oom_bound.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/core/run/study_report.hpp>
#include <cotune/core/run/study_runner.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/core/model/surrogate.hpp>

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <thread>

namespace cotune::core {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const json kWorkload = json::parse(R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 256},
                                        "cluster": {"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8}})");
// A space small enough to run out of: tp x pp x micro_batch x recompute x sp, dp derived.
const json kSmallSpace = json::parse(R"({"tp": [1, 2, 4, 8], "pp": [1, 2], "cp": [1], "vpp": [1], "zero": [1],
                                          "micro_batch": [1, 2]})");

class StudyLoop : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cotune-loop-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_path_ = dir_ + "/cotune.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  json study(const std::string& name, const json& budget, const std::string& searcher = "reinforce") const {
    return {{"name", name},
            {"workload", kWorkload},
            {"predictor", {{"name", "krr"}}},
            {"searcher", searcher},
            {"executor", {{"name", "sim"}, {"options", {{"noise", 0.05}}}}},
            {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
            {"budget", budget},
            {"parallel", 3},
            {"seed", 5},
            {"format", "megatron"}};
  }

  StudySpec spec(const json& doc) const { return parse_study_file(doc.dump(2), dir_ + "/study.json", dir_); }

  RunResult run(const StudySpec& s, const std::atomic<int>* stop = nullptr,
                std::function<void(const TrialRecord&)> hook = nullptr) const {
    RunOptions o;
    o.store_path = store_path_;
    o.display = RunOptions::Display::kQuiet;
    o.stop = stop;
    o.on_trial_committed = std::move(hook);
    return run_study(s, o);
  }

  std::vector<TrialRecord> trials(const std::string& name) const {
    Store store(store_path_);
    auto study = store.find_study(name);
    EXPECT_TRUE(study.has_value());
    return study ? store.trials(study->id) : std::vector<TrialRecord>{};
  }

  static void expect_distinct(const std::vector<TrialRecord>& ts) {
    std::set<std::string> keys;
    for (const TrialRecord& t : ts) EXPECT_TRUE(keys.insert(t.config_key).second) << "trial " << t.seq << " repeats a configuration";
  }

  static std::int64_t counted(const std::vector<TrialRecord>& ts) {
    std::int64_t n = 0;
    for (const TrialRecord& t : ts)
      n += t.status == TrialStatus::kOk || t.status == TrialStatus::kFailed || t.status == TrialStatus::kOom ||
           t.status == TrialStatus::kTimeout;
    return n;
  }

  std::string dir_, store_path_;
};

// The recommended configuration of a run must be one of its measured feasible trials.
const TrialRecord& recommended_trial(const RecommendedConfig& rec, const std::vector<TrialRecord>& ts) {
  auto it = std::find_if(ts.begin(), ts.end(), [&](const TrialRecord& t) { return t.id == rec.trial_id; });
  EXPECT_NE(it, ts.end()) << "the recommended trial " << rec.trial_id << " is not a trial of the study";
  if (it == ts.end()) throw std::runtime_error("no such trial");
  EXPECT_EQ(it->seq, rec.seq);
  EXPECT_EQ(it->status, TrialStatus::kOk);
  EXPECT_TRUE(it->objective.has_value()) << "the recommended trial is infeasible";
  EXPECT_EQ(it->objective, rec.measured);
  EXPECT_EQ(it->config_key, config_key(json::parse(rec.config_json)));
  return *it;
}

TEST_F(StudyLoop, RunsExactlyTheTrialBudgetAndRecordsEachTrial) {
  StudySpec s = spec(study("budget", {{"trials", 10}}));
  RunResult r = run(s);
  EXPECT_EQ(r.status, StudyStatus::kFinished);
  EXPECT_FALSE(r.interrupted);
  EXPECT_EQ(r.counted_trials, 10);
  EXPECT_NE(r.reason.find("trial budget"), std::string::npos) << r.reason;

  std::vector<TrialRecord> ts = trials("budget");
  ASSERT_EQ(ts.size(), 10u);
  expect_distinct(ts);
  for (const TrialRecord& t : ts) {
    EXPECT_EQ(t.status, TrialStatus::kOk) << t.error.value_or("");
    EXPECT_EQ(t.executor, "sim");
    ASSERT_TRUE(t.predicted.has_value()) << "with the analytic prior every proposal has a prediction";
    ASSERT_TRUE(t.objective.has_value());
    EXPECT_EQ(t.objective, metric_value(*t.metrics_json, "tokens_per_s"));
    // 5% noise: the prior's prediction is close to what the simulator measured.
    EXPECT_NEAR(*t.predicted / *t.objective, 1.0, 0.3);
    ASSERT_TRUE(t.fingerprint_json.has_value());
    json fp = json::parse(*t.fingerprint_json);
    EXPECT_EQ(fp["study_hash"], s.hash);
    EXPECT_EQ(fp["plugins"]["executor"]["id"], "org.cotune.executor.sim");
    // The simulator writes nothing into a trial's directory, so none is left behind.
    EXPECT_FALSE(fs::exists(dir_ + "/cotune-runs/budget/" + std::to_string(t.seq)));
  }
  Store store(store_path_);
  auto study_record = store.find_study("budget");
  EXPECT_EQ(study_record->status, StudyStatus::kFinished);
  EXPECT_TRUE(store.load_searcher_state(study_record->id).has_value());
  EXPECT_TRUE(store.load_predictor_state(study_record->id).has_value());

  // Running a finished study again changes nothing.
  RunResult again = run(s);
  EXPECT_TRUE(again.already_finished);
  EXPECT_EQ(trials("budget").size(), 10u);
}

TEST_F(StudyLoop, ALargerBudgetRunsAFinishedStudyOnAndOtherChangesNeedANewName) {
  json doc = study("more", {{"trials", 4}});
  ASSERT_EQ(run(spec(doc)).counted_trials, 4);
  const std::vector<TrialRecord> first = trials("more");
  // Fields that may change between runs: the budget (and the description, the parallelism).
  doc["budget"]["trials"] = 7;
  doc["description"] = "seven trials";
  doc["parallel"] = 2;
  const StudySpec more = spec(doc);
  RunResult r = run(more);
  EXPECT_FALSE(r.already_finished);
  EXPECT_EQ(r.status, StudyStatus::kFinished);
  EXPECT_EQ(r.counted_trials, 7);
  EXPECT_EQ(r.trials_this_run, 3);
  const std::vector<TrialRecord> after = trials("more");
  ASSERT_EQ(after.size(), 7u);
  expect_distinct(after);
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(after[i].config_key, first[i].config_key);
    EXPECT_EQ(after[i].finished_at, first[i].finished_at) << "trial " << first[i].seq << " was measured again";
  }
  Store store(store_path_);
  const std::optional<StudyRecord> stored = store.find_study("more");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->study_hash, more.hash);
  EXPECT_EQ(json::parse(stored->study_json)["budget"]["trials"], 7) << "the store keeps the file it ran";
  // Run again unchanged, or with only its description changed: nothing to do.
  EXPECT_TRUE(run(more).already_finished);
  doc["description"] = "seven trials, as planned";
  EXPECT_TRUE(run(spec(doc)).already_finished);
  doc["description"] = "seven trials";
  // Another searcher is another study.
  doc["searcher"] = "random";
  try {
    run(spec(doc));
    ADD_FAILURE() << "a study file that changed its searcher reopened the study";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("another study file (it differs in /searcher)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("only budget, parallel"), std::string::npos) << e.what();
  }
  EXPECT_EQ(trials("more").size(), 7u);
}

TEST_F(StudyLoop, AStudyAStoreHoldsUnderItsEarlierHashResumes) {
  // Stores written before the budget left the hash hold the hash of the whole file.
  const StudySpec s = spec(study("legacy", {{"trials", 3}}));
  ASSERT_NE(s.legacy_hash, s.hash);
  {
    Store store(store_path_);
    NewStudy n;
    n.name = s.name;
    n.study_json = stored_study_json(s);
    n.study_hash = s.legacy_hash;
    n.workload_key = s.workload_key();
    n.space = s.space.name;
    n.objective_json = s.objectives_json().dump();
    store.create_study(n);
  }
  RunResult r = run(s);
  EXPECT_EQ(r.status, StudyStatus::kFinished);
  EXPECT_EQ(r.counted_trials, 3);
  {
    Store store(store_path_);
    EXPECT_EQ(store.find_study("legacy")->study_hash, s.hash) << "the store keeps the current hash";
  }
  // A store of an earlier version holds the legacy hash of a finished study: a larger budget runs it on.
  {
    Store store(store_path_);
    const std::optional<StudyRecord> found = store.find_study("legacy");
    store.update_study_file(found->id, found->study_json, s.legacy_hash);
  }
  json more = study("legacy", {{"trials", 5}});
  RunResult again = run(spec(more));
  EXPECT_FALSE(again.already_finished);
  EXPECT_EQ(again.counted_trials, 5);
}

TEST_F(StudyLoop, TheRooflinePriorLearnsFromTheTrialsMeasured) {
  // The same study with the roofline prior and without a prior, each in its own store: no
  // estimate before anything is measured (the first batch is proposed blind, the same in both);
  // then the roofline terms' rates, fitted on the trials, lead elsewhere and predict closer.
  auto run_with = [&](const std::string& prior) {
    json doc = study("roofline", {{"trials", 15}});
    doc["predictor"]["prior"] = prior;
    // Seeds 1-12 (under the megatron target's rules): the roofline prior's best is at least as high
    // in 9 (2, 7 and 10 trail by under 2 %), and 10 % higher with closer predictions in 6 (1, 4, 6,
    // 9, 11, 12); elsewhere the features alone find a good layout by chance. Seed 1 shows the gain.
    doc["seed"] = 1;
    store_path_ = dir_ + "/" + prior + ".db";
    EXPECT_EQ(run(spec(doc)).counted_trials, 15);
    return trials("roofline");
  };
  const std::vector<TrialRecord> roofline = run_with("roofline");
  const std::vector<TrialRecord> none = run_with("none");
  ASSERT_EQ(roofline.size(), 15u);
  ASSERT_EQ(none.size(), 15u);
  expect_distinct(roofline);
  auto best = [](const std::vector<TrialRecord>& ts) {
    double b = 0;
    for (const TrialRecord& t : ts) b = std::max(b, t.objective.value_or(0));
    return b;
  };
  auto error = [](const std::vector<TrialRecord>& ts) {
    double e = 0;
    for (size_t i = 9; i < ts.size(); ++i) e += std::fabs(std::log(*ts[i].predicted / *ts[i].objective));
    return e / 6;
  };
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(roofline[i].predicted.has_value()) << "trial " << roofline[i].seq;
    EXPECT_EQ(roofline[i].config_key, none[i].config_key);
  }
  for (size_t i = 9; i < 15; ++i) ASSERT_TRUE(roofline[i].predicted.has_value() && none[i].predicted.has_value());
  // (When written: best 379,075 against 268,343 tokens/s.)
  EXPECT_GT(best(roofline), 1.1 * best(none));
  EXPECT_LT(error(roofline), error(none));
}

TEST_F(StudyLoop, StopsWhenTheTargetIsReached) {
  StudySpec s = spec(study("target", {{"trials", 50}, {"target", 1.0}}));
  RunResult r = run(s);
  EXPECT_NE(r.reason.find("target"), std::string::npos) << r.reason;
  // The first round started `parallel` trials at once; nothing was started after the target.
  EXPECT_LE(r.counted_trials, 3);
  EXPECT_GE(r.counted_trials, 1);
}

TEST_F(StudyLoop, StopsAfterPatienceTrialsWithoutImprovement) {
  json doc = study("patience", {{"trials", 200}, {"patience", 4}}, "random");
  doc["parallel"] = 1;
  RunResult r = run(spec(doc));
  EXPECT_NE(r.reason.find("no improvement"), std::string::npos) << r.reason;
  std::vector<TrialRecord> ts = trials("patience");
  ASSERT_GT(ts.size(), 4u);
  ASSERT_LT(ts.size(), 200u);
  // The best came exactly four trials before the end, and nothing after it beat it.
  size_t best = 0;
  for (size_t i = 0; i < ts.size(); ++i)
    if (*ts[i].objective > *ts[best].objective) best = i;
  EXPECT_EQ(best, ts.size() - 5);
}

TEST_F(StudyLoop, ExhaustsASmallSpaceWithoutRepeatingAConfiguration) {
  json doc = study("small", {{"trials", 500}}, "random");
  doc["space"] = {{"name", "llm"}, {"options", kSmallSpace}};
  StudySpec s = spec(doc);
  RunResult r = run(s);
  EXPECT_EQ(r.status, StudyStatus::kFinished);
  EXPECT_NE(r.reason.find("no unmeasured configuration"), std::string::npos) << r.reason;

  Registry registry;
  load_study_plugins(registry, s);
  auto space = make_study_space(registry, s);
  std::vector<double> draws(20000 * space->num_params());
  size_t n = space->sample(11, 20000, draws.data());
  std::set<std::string> valid;
  for (size_t i = 0; i < n; ++i) valid.insert(space->key(draws.data() + i * space->num_params()));

  std::vector<TrialRecord> ts = trials("small");
  expect_distinct(ts);
  EXPECT_EQ(ts.size(), valid.size()) << "every valid configuration ran once";
}

TEST_F(StudyLoop, AnotherStopRequestEndsTheWaitForCancelledTrials) {
  // Trials whose cancel reaches nothing (an agent that is down) would hold the run for the whole
  // cancel grace; a further stop request ends the wait, leaving them recorded as running.
  json doc = study("unreachable", {{"trials", 6}}, "random");
  const std::string journal = dir_ + "/journal";
  doc["executor"] = {{"name", "testecho"},
                     {"options", {{"delay_ms", 600000}, {"ignore_cancel", true}, {"journal", journal}}}};
  doc["plugin_paths"] = {COTUNE_BINARY_DIR "/lib/cotune/test-plugins"};
  doc["parallel"] = 2;
  std::atomic<int> stop{0};
  // Waits until the journal has `n` lines holding `what`.
  const auto wait_for_lines = [&](const std::string& what, int n) {
    for (int i = 0; i < 1200; ++i) {
      std::ifstream in(journal);
      int seen = 0;
      for (std::string line; std::getline(in, line);) seen += line.find(what) != std::string::npos ? 1 : 0;
      if (seen >= n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  std::thread user([&] {
    wait_for_lines("unreachable/", 2);
    stop = 1;  // cancels them (on_stop "cancel"); the executor never confirms
    wait_for_lines("ignored cancel", 2);
    stop = 2;
  });
  RunOptions o;
  o.store_path = store_path_;
  o.display = RunOptions::Display::kQuiet;
  o.stop = &stop;
  o.cancel_grace_s = 600;
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = run_study(spec(doc), o);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  user.join();
  EXPECT_TRUE(r.interrupted);
  EXPECT_LT(waited, 300) << "the run waited out the cancel grace";
  const std::vector<TrialRecord> ts = trials("unreachable");
  ASSERT_EQ(ts.size(), 2u);
  for (const TrialRecord& t : ts) EXPECT_EQ(t.status, TrialStatus::kRunning) << "trial " << t.seq;
}

TEST_F(StudyLoop, SubmissionsTheExecutorRefusesAreUnavailableNotFailedRuns) {
  // The executor cannot launch anything (it refuses every submission): that says nothing of the
  // configurations, so they are stored unavailable (no later study learns them as failed runs),
  // and three refusals in a row stop the run naming the executor.
  json doc = study("refused", {{"trials", 6}}, "random");
  doc["executor"] = {{"name", "testecho"}, {"options", {{"refuse_submit", true}}}};
  doc["plugin_paths"] = {COTUNE_BINARY_DIR "/lib/cotune/test-plugins"};
  doc["parallel"] = 1;
  try {
    run(spec(doc));
    FAIL() << "a run whose executor refuses everything went on";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("the executor 'testecho' refused 3 submissions in a row"), std::string::npos)
        << e.what();
  }
  const std::vector<TrialRecord> ts = trials("refused");
  ASSERT_EQ(ts.size(), 3u);
  for (const TrialRecord& t : ts) {
    EXPECT_EQ(t.status, TrialStatus::kUnavailable) << t.seq;
    EXPECT_NE(t.error.value_or("").find("the executor refused the submission"), std::string::npos) << t.seq;
  }
}

TEST_F(StudyLoop, FailedRunsInTheHistoryAreNeverProposed) {
  json doc = study("history", {{"trials", 500}}, "random");
  doc["space"] = {{"name", "llm"}, {"options", kSmallSpace}};
  StudySpec s = spec(doc);
  Registry registry;
  load_study_plugins(registry, s);
  auto space = make_study_space(registry, s);
  std::vector<double> draws(64 * space->num_params());
  size_t n = space->sample(3, 64, draws.data());
  ASSERT_GE(n, 4u);

  std::vector<HistoryRow> rows;
  std::set<std::string> failed_keys;
  for (size_t i = 0; i < n && rows.size() < 4; ++i) {
    std::string config_json = space->render(draws.data() + i * space->num_params(), COTUNE_RENDER_JSON);
    HistoryRow h;
    h.workload_key = s.workload_key();
    h.space = "llm";
    h.config_json = config_json;
    h.config_key = config_key(json::parse(config_json));
    if (!failed_keys.insert(h.config_key).second) continue;
    h.status = rows.size() % 2 ? TrialStatus::kOom : TrialStatus::kFailed;
    h.source = "earlier-runs.csv";
    h.row_number = static_cast<std::int64_t>(rows.size() + 1);
    rows.push_back(h);
  }
  {
    Store store(store_path_);
    store.import_history(rows);
  }
  RunResult r = run(s);
  EXPECT_EQ(r.status, StudyStatus::kFinished);
  std::vector<TrialRecord> ts = trials("history");
  EXPECT_FALSE(ts.empty());
  for (const TrialRecord& t : ts) EXPECT_EQ(failed_keys.count(t.config_key), 0u) << "trial " << t.seq << " reran a failed run";
}

TEST_F(StudyLoop, StopRequestStopsCleanlyAndTheNextRunResumes) {
  json doc = study("resume", {{"trials", 14}});
  StudySpec s = spec(doc);
  std::atomic<int> stop{0};
  int committed = 0;
  RunResult first = run(s, &stop, [&](const TrialRecord&) {
    if (++committed == 5) stop = 1;
  });
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(first.status, StudyStatus::kStopped);
  std::vector<TrialRecord> before = trials("resume");
  EXPECT_GE(counted(before), 5);
  EXPECT_LT(counted(before), 14);
  {
    Store store(store_path_);
    EXPECT_EQ(store.find_study("resume")->status, StudyStatus::kStopped);
  }

  RunResult second = run(s);
  EXPECT_FALSE(second.interrupted);
  EXPECT_EQ(second.status, StudyStatus::kFinished);
  EXPECT_EQ(second.counted_trials, 14);
  std::vector<TrialRecord> after = trials("resume");
  expect_distinct(after);
  EXPECT_EQ(counted(after), 14);
  // The recommendation weighs the trials of both runs.
  ASSERT_TRUE(second.recommended_config.has_value());
  recommended_trial(*second.recommended_config, after);
  // Nothing measured in the first run was lost or measured again.
  for (const TrialRecord& t : before) {
    if (!is_finished(t.status)) continue;
    const TrialRecord& same = after.at(static_cast<size_t>(t.seq - 1));
    EXPECT_EQ(same.config_key, t.config_key);
    EXPECT_EQ(same.metrics_json, t.metrics_json);
    EXPECT_EQ(same.finished_at, t.finished_at);
    EXPECT_EQ(same.attempts, t.attempts);
  }
}

TEST_F(StudyLoop, ConstraintsMakeTrialsInfeasibleButKeepThem) {
  json doc = study("constrained", {{"trials", 16}}, "random");
  doc["objective"]["constraints"] = json::array({{{"metric", "peak_mem_gib"}, {"max", 30}}});
  StudySpec s = spec(doc);
  run(s);
  std::vector<TrialRecord> ts = trials("constrained");
  ASSERT_EQ(ts.size(), 16u);
  for (const TrialRecord& t : ts) {
    ASSERT_EQ(t.status, TrialStatus::kOk);
    bool fits = *metric_value(*t.metrics_json, "peak_mem_gib") <= 30;
    EXPECT_EQ(t.objective.has_value(), fits) << "trial " << t.seq;
    if (!fits) {
      EXPECT_NE(t.error.value_or("").find("infeasible"), std::string::npos);
    }
  }
  for (const RankedTrial& b : best_trials(ts, s.objectives, 5))
    EXPECT_LE(*metric_value(*b.trial.metrics_json, "peak_mem_gib"), 30);
}

TEST_F(StudyLoop, TheSearchDoesNotSpendTrialsOnWhatTheModelSaysBreaksAConstraint) {
  // The sim executor reports the model's own memory: with the searcher's random exploration off,
  // every proposal is one the model expects to fit under the bound, so no trial is infeasible, while
  // a random search under the same bound measures some that are.
  auto infeasible = [&](const std::string& name) {
    size_t n = 0;
    for (const TrialRecord& t : trials(name)) n += static_cast<size_t>(t.status == TrialStatus::kOk && !t.objective);
    return n;
  };
  json guided = study("guided", {{"trials", 16}});
  guided["searcher"] = {{"name", "reinforce"}, {"options", {{"explore", 0}}}};
  guided["objective"]["constraints"] = json::array({{{"metric", "peak_mem_gib"}, {"max", 30}}});
  EXPECT_EQ(run(spec(guided)).counted_trials, 16);
  EXPECT_EQ(infeasible("guided"), 0u);
  json blind = study("blind", {{"trials", 16}}, "random");
  blind["objective"]["constraints"] = guided["objective"]["constraints"];
  run(spec(blind));
  EXPECT_GT(infeasible("blind"), 0u) << "the bound should cut through the space";
}

TEST_F(StudyLoop, NothingIsProposedAtAMemoryShareThatRanOutUnlessALargerOneRan) {
  // A machine that leaves a job 40 GiB of an H100's 79.6: layouts the space accepts run out of
  // memory there. After a trial runs out, the search proposes nothing the model estimates at that
  // share of the GPU's memory or more (unless a larger share ran), so out-of-memory trials stay few.
  json doc = study("tight", {{"trials", 24}});
  doc["searcher"] = {{"name", "reinforce"}, {"options", {{"explore", 0}}}};  // exploration draws ignore scores
  doc["executor"]["options"]["hardware"] = {{"hbm_gib", 40}};
  doc["parallel"] = 1;
  const StudySpec s = spec(doc);
  run(s);
  std::vector<TrialRecord> ts = trials("tight");
  ASSERT_EQ(ts.size(), 24u);
  std::sort(ts.begin(), ts.end(), [](const TrialRecord& a, const TrialRecord& b) { return a.seq < b.seq; });
  Registry registry;
  registry.load_directories({COTUNE_PLUGIN_DIR});
  auto space = registry.make_space("llm", kWorkload.dump());
  OomBound shares(*space);
  double largest_ran = 0;
  std::vector<double> ran_out;
  size_t ooms = 0;
  for (const TrialRecord& t : ts) {
    const std::vector<double> c = space->parse(t.config_json);
    const std::optional<double> estimated = shares.share(c.data());
    ASSERT_TRUE(estimated.has_value()) << "trial " << t.seq;
    const double share = *estimated;
    for (double o : ran_out)
      EXPECT_TRUE(share < o || o <= largest_ran)
          << "trial " << t.seq << " at an estimated " << share << " of the GPU's memory, where " << o << " ran out";
    ASSERT_TRUE(t.status == TrialStatus::kOk || t.status == TrialStatus::kOom) << t.seq;
    if (t.status == TrialStatus::kOom) {
      ran_out.push_back(share);
      ++ooms;
    } else {
      largest_ran = std::max(largest_ran, share);
    }
  }
  EXPECT_GE(ooms, 1u) << "the machine's memory should cut through what the space accepts";
}

TEST_F(StudyLoop, TwoObjectivesKeepTheParetoFront) {
  json doc = study("pareto", {{"trials", 24}});
  doc.erase("objective");
  doc["objectives"] = json::array({{{"metric", "tokens_per_s"}, {"direction", "maximize"}},
                                   {{"metric", "gpus"}, {"direction", "minimize"}}});
  doc["space"] = {{"name", "llm"}, {"options", {{"gpus", {8, 16, 32}}}}};
  StudySpec s = spec(doc);
  RunResult r = run(s);
  EXPECT_EQ(r.counted_trials, 24);
  EXPECT_FALSE(r.recommended_config.has_value()) << "two objectives: the Pareto front is the answer";
  std::vector<TrialRecord> ts = trials("pareto");
  std::vector<RankedTrial> front = best_trials(ts, s.objectives, 5);
  ASSERT_FALSE(front.empty());
  auto values = [](const TrialRecord& t) {
    return std::vector<double>{*metric_value(*t.metrics_json, "tokens_per_s"), *metric_value(*t.metrics_json, "gpus")};
  };
  auto dominates = [](const std::vector<double>& a, const std::vector<double>& b) {
    return a[0] >= b[0] && a[1] <= b[1] && (a[0] > b[0] || a[1] < b[1]);
  };
  std::set<std::int64_t> on_front;
  for (const RankedTrial& f : front) on_front.insert(f.trial.seq);
  for (const TrialRecord& t : ts) {
    bool dominated = false;
    for (const TrialRecord& u : ts) dominated = dominated || dominates(values(u), values(t));
    EXPECT_EQ(on_front.count(t.seq) == 1, !dominated) << "trial " << t.seq;
  }
}

TEST_F(StudyLoop, RecommendsTheMeasuredFeasibleTrialThePredictorRanksBest) {
  json doc = study("recommend", {{"trials", 30}}, "random");
  doc["executor"]["options"] = {{"noise", 0.3}, {"seed", 6}};
  doc["objective"]["constraints"] = json::array({{{"metric", "peak_mem_gib"}, {"max", 60}}});
  StudySpec s = spec(doc);
  RunResult r = run(s);
  ASSERT_TRUE(r.recommended_config.has_value());
  const RecommendedConfig& rec = *r.recommended_config;
  std::vector<TrialRecord> ts = trials("recommend");
  const TrialRecord& chosen = recommended_trial(rec, ts);
  ASSERT_TRUE(rec.predicted.has_value()) << "with the analytic prior every configuration has an estimate";

  // A surrogate of its own, fitted on the same measurements in the order the loop learnt them,
  // ranks the recommended trial first among the measured feasible trials.
  Registry registry;
  load_study_plugins(registry, s);
  auto space = make_study_space(registry, s);
  auto predictor = registry.make_predictor("krr", surrogate_predictor_options(s.predictor.options.dump(), "test"));
  std::vector<double> probe(space->num_params());
  ASSERT_EQ(space->sample(s.seed, 1, probe.data()), 1u);
  Surrogate surrogate(*space, *predictor, "tokens_per_s", Prior::kAnalytic, probe.data());
  surrogate.calibrate_prior(s.predictor.calibrate);
  std::vector<TrialRecord> by_end = ts;
  std::stable_sort(by_end.begin(), by_end.end(), [](const TrialRecord& a, const TrialRecord& b) {
    return a.finished_at.value_or(0) < b.finished_at.value_or(0);
  });
  std::vector<double> train, values, feasible, feasible_values;
  std::vector<std::int64_t> feasible_ids;
  for (const TrialRecord& t : by_end) {
    if (t.status != TrialStatus::kOk) continue;
    std::vector<double> c = space->parse(t.config_json);
    train.insert(train.end(), c.begin(), c.end());
    values.push_back(*metric_value(*t.metrics_json, "tokens_per_s"));
    if (!t.objective) continue;
    feasible.insert(feasible.end(), c.begin(), c.end());
    feasible_ids.push_back(t.id);
    feasible_values.push_back(*t.objective);
  }
  ASSERT_GT(feasible_ids.size(), 1u);
  ASSERT_LT(feasible_ids.size(), values.size()) << "the constraint should leave some trials infeasible";
  surrogate.fit(train.data(), values.size(), values.data());
  std::vector<double> predicted(feasible_ids.size());
  surrogate.predict(feasible.data(), feasible_ids.size(), predicted.data(), nullptr);
  const size_t k = static_cast<size_t>(std::find(feasible_ids.begin(), feasible_ids.end(), chosen.id) - feasible_ids.begin());
  ASSERT_LT(k, feasible_ids.size());
  EXPECT_NEAR(predicted[k], *rec.predicted, 1e-9 * *rec.predicted);
  // Every trial measured within the noise band of the best measured one is estimated no better.
  const double top = *std::max_element(feasible_values.begin(), feasible_values.end());
  EXPECT_GE(chosen.objective.value(), top * (1 - kRecommendNoiseBand));
  for (size_t i = 0; i < predicted.size(); ++i) {
    if (feasible_values[i] < top * (1 - kRecommendNoiseBand)) continue;
    EXPECT_LE(predicted[i], predicted[k] * (1 + 1e-9)) << "trial " << feasible_ids[i] << " is estimated better";
  }
  // With these seeds (noise seeds 6 and 7 of 1-9) noise lifts a trial's measurement above the one
  // estimated best: the recommendation is not merely the best measured trial.
  EXPECT_NE(best_trials(ts, s.objectives, 1).front().trial.id, chosen.id);
}

TEST_F(StudyLoop, WithoutNoiseTheRecommendedIsTheBestMeasured) {
  json doc = study("exact", {{"trials", 20}}, "random");
  doc["executor"]["options"] = {{"noise", 0}};
  StudySpec s = spec(doc);
  RunResult r = run(s);
  ASSERT_TRUE(r.recommended_config.has_value());
  const RecommendedConfig& rec = *r.recommended_config;
  std::vector<TrialRecord> ts = trials("exact");
  recommended_trial(rec, ts);
  std::vector<RankedTrial> best = best_trials(ts, s.objectives, 1);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(rec.measured, best.front().values[0]);
  // The simulator measures the performance model itself: the prior's estimate is the measurement.
  ASSERT_TRUE(rec.predicted.has_value());
  EXPECT_NEAR(*rec.predicted, rec.measured, 1e-9 * rec.measured);
}

TEST_F(StudyLoop, UnknownPluginIsAClearError) {
  json doc = study("bad", {{"trials", 3}});
  doc["searcher"] = "annealing";
  try {
    run(spec(doc));
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("annealing"), std::string::npos) << e.what();
  }
  json log_option = study("bad-log", {{"trials", 3}});
  log_option["predictor"]["options"] = {{"log", true}};
  EXPECT_THROW(run(spec(log_option)), UserError);
}

}  // namespace
}  // namespace cotune::core
