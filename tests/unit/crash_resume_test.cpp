// kill -9 of `cotune run` at random (seeded) moments, many times over, with the sim executor and
// with the process executor running a real command. After each kill the store must open and pass
// SQLite's integrity check, every trial that had finished must be there exactly once and unchanged,
// and no configuration may appear twice; a final `cotune run` resumes the study to its budget.
#include <cotune/core/store/store.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include <sys/wait.h>

#include "store/sqlite.hpp"
#include "support/cli_process.hpp"

namespace cotune::core {
namespace {

using nlohmann::json;
using testing::count_finished;
using testing::ScratchDir;
using testing::stored_trials;

constexpr int kKills = 25;
constexpr int kBudget = 120;

json study_doc(const std::string& name, const json& executor) {
  return {{"name", name},
          {"workload", json::parse(R"({"model": {"preset": "llama3-70b"}, "training": {"global_batch": 1024},
                                       "cluster": {"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8}})")},
          {"searcher", "random"},
          {"executor", executor},
          {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
          {"budget", {{"trials", kBudget}}},
          {"parallel", 2},
          {"seed", 3}};
}

// A real job per trial: a shell that writes its result file from the configuration it was given
// ({{ and }} are literal braces in the command template).
json process_executor() {
  const char* script =
      "printf '{{\"tokens_per_s\": %d}}' $((1000 * COTUNE_PARAM_TP + 100 * COTUNE_PARAM_PP + COTUNE_PARAM_MICRO_BATCH))"
      " > \"$COTUNE_RESULT_FILE\"";
  return {{"name", "process"}, {"options", {{"command", {"/bin/sh", "-c", script}}, {"parallel", 2}}}};
}

class CrashResume : public ::testing::Test {
 protected:
  // What the store holds right after a kill; fails the test on any lost, changed or repeated trial.
  void check_store(const std::string& study, int kill_no) {
    SCOPED_TRACE("after kill " + std::to_string(kill_no));
    {
      sqlite::Database db(store_, SQLITE_OPEN_READONLY);
      EXPECT_EQ(db.query_text("PRAGMA integrity_check"), "ok");
      EXPECT_EQ(db.query_int64("SELECT COUNT(*) FROM (SELECT 1 FROM trials GROUP BY study_id, config_key "
                               "HAVING COUNT(*) > 1)"),
                0)
          << "a configuration recorded twice";
    }
    std::vector<TrialRecord> now = stored_trials(store_, study);  // through the Store: it must open
    std::set<std::string> keys;
    std::map<std::int64_t, const TrialRecord*> by_seq;
    for (const TrialRecord& t : now) {
      EXPECT_TRUE(keys.insert(t.config_key).second) << "trial " << t.seq << " repeats a configuration";
      EXPECT_TRUE(by_seq.emplace(t.seq, &t).second) << "sequence number " << t.seq << " twice";
    }
    for (const auto& [seq, before] : finished_) {
      auto it = by_seq.find(seq);
      ASSERT_NE(it, by_seq.end()) << "finished trial " << seq << " was lost";
      const TrialRecord& t = *it->second;
      EXPECT_EQ(t.config_key, before.config_key) << "trial " << seq;
      EXPECT_EQ(t.status, before.status) << "trial " << seq;
      EXPECT_EQ(t.finished_at, before.finished_at) << "trial " << seq << " was measured again";
      EXPECT_EQ(t.metrics_json, before.metrics_json) << "trial " << seq;
      ++trials_checked_;
    }
    for (const TrialRecord& t : now)
      if (is_finished(t.status)) finished_.emplace(t.seq, t);
  }

  // Kills `cotune run` kKills times at seeded random moments, then resumes it to the end.
  void kill_and_resume(const json& executor, unsigned seed) {
    const std::string name = "crash";
    const std::string study = dir_.file(name + ".json");
    std::ofstream(study) << study_doc(name, executor).dump(2);
    std::mt19937 rng(seed);
    int kills = 0;
    for (int i = 0; i < kKills; ++i) {
      const size_t done = count_finished(stored_trials(store_, name));
      // The moment: 1-3 more finished trials (so the study moves on), then 0-20 ms more.
      const size_t target = done + std::uniform_int_distribution<size_t>(1, 3)(rng);
      const int extra_ms = std::uniform_int_distribution<int>(0, 20)(rng);
      pid_t pid = spawn({"run", study, "--store", store_});
      bool ended = false;
      int status = 0;
      while (count_finished(stored_trials(store_, name)) < target) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
          ended = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      if (ended) {
        // Sim trials take microseconds: on a loaded machine, where these polls are slow, the run can
        // finish the study between two of them. That is success, not a crash; nothing is left to kill.
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "cotune run ended before kill " << i + 1 << ":\n" << testing::read_file(dir_.file("stderr"));
        EXPECT_EQ(count_finished(stored_trials(store_, name)), static_cast<size_t>(kBudget))
            << "cotune run ended before kill " << i + 1 << " without finishing the study";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(extra_ms));
      ::kill(pid, SIGKILL);
      int code = testing::wait_exit(pid);
      if (code != 128 + SIGKILL) {  // it finished the study in the extra time: nothing left to kill
        EXPECT_EQ(code, 0) << testing::read_file(dir_.file("stderr"));
        break;
      }
      ++kills;
      check_store(name, kills);
      if (HasFatalFailure()) return;
    }
    ASSERT_EQ(testing::wait_exit(spawn({"run", study, "--store", store_})), 0)
        << testing::read_file(dir_.file("stderr"));
    check_store(name, kills + 1);
    std::vector<TrialRecord> all = stored_trials(store_, name);
    EXPECT_EQ(all.size(), static_cast<size_t>(kBudget));
    EXPECT_EQ(count_finished(all), static_cast<size_t>(kBudget));
    std::printf("[ crash-resume ] %s executor: %d kills, %zu finished-trial checks, %zu trials at the end\n",
                executor["name"].get<std::string>().c_str(), kills, trials_checked_, all.size());
    RecordProperty("kills", kills);
    RecordProperty("trials_checked", static_cast<int>(trials_checked_));
    EXPECT_GE(kills, 1);
  }

  pid_t spawn(const std::vector<std::string>& args) {
    return testing::spawn_cotune(dir_.path(), args, dir_.file("stdout"), dir_.file("stderr"));
  }

  ScratchDir dir_{"crash"};
  std::string store_ = dir_.file("cotune.db");
  std::map<std::int64_t, TrialRecord> finished_;  // every finished trial seen so far, by seq
  size_t trials_checked_ = 0;
};

TEST_F(CrashResume, SimExecutorSurvivesRepeatedKillNine) {
  kill_and_resume({{"name", "sim"}, {"options", {{"noise", 0.05}}}}, 1201);
}

TEST_F(CrashResume, ProcessExecutorSurvivesRepeatedKillNine) { kill_and_resume(process_executor(), 1202); }

// A trial process outlives a kill -9 of its host (it is in a process group of its own). The resumed
// run stops it before it runs the trial again: never two processes of one trial side by side.
TEST_F(CrashResume, ATrialProcessThatOutlivedItsHostIsStoppedBeforeTheTrialRunsAgain) {
  // The first attempt of a trial writes its pid and waits (for ten minutes); a later attempt, which
  // finds the marker, writes its result at once.
  const char* script =
      "if [ ! -e \"$COTUNE_WORKDIR/started\" ]; then touch \"$COTUNE_WORKDIR/started\"; echo $$ > \"$COTUNE_WORKDIR/pid\"; "
      "sleep 600; fi; printf '{{\"tokens_per_s\": 1}}' > \"$COTUNE_RESULT_FILE\"";
  json doc = study_doc("leftover", {{"name", "process"}, {"options", {{"command", {"/bin/sh", "-c", script}}}}});
  doc["budget"] = {{"trials", 1}};
  doc["parallel"] = 1;
  const std::string study = dir_.file("leftover.json");
  std::ofstream(study) << doc.dump(2);
  const std::string pid_file = dir_.file("cotune-runs/leftover/1/pid");
  pid_t host = spawn({"run", study, "--store", store_});
  pid_t job = 0;
  for (int i = 0; i < 1000 && job == 0; ++i) {
    const std::string text = testing::read_file(pid_file);
    if (!text.empty() && text.back() == '\n') job = std::atoi(text.c_str());
    else std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(job, 0) << "the trial did not start: " << testing::read_file(dir_.file("stderr"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the run records the job's id
  ::kill(host, SIGKILL);
  testing::wait_exit(host);
  ASSERT_EQ(::kill(job, 0), 0) << "the trial's process should have outlived its host";

  ASSERT_EQ(testing::wait_exit(spawn({"run", study, "--store", store_})), 0) << testing::read_file(dir_.file("stderr"));
  EXPECT_NE(testing::read_file(dir_.file("stderr")).find("outlived the run that started it and has been stopped"),
            std::string::npos)
      << testing::read_file(dir_.file("stderr"));
  // Gone (or a zombie nobody reaps, where the container's init does not).
  std::ifstream stat("/proc/" + std::to_string(job) + "/stat");
  std::string fields((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = fields.rfind(')');
  EXPECT_TRUE(close == std::string::npos || fields.substr(close + 2, 1) == "Z") << fields;
  std::vector<TrialRecord> all = stored_trials(store_, "leftover");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].status, TrialStatus::kOk);
}

// Ctrl-C cancels the trials in flight; the next run submits them again without trying to re-attach
// to jobs that are gone (which said "cannot re-attach ... no longer running" of each).
TEST_F(CrashResume, TrialsCancelledByAStopAreSubmittedAgainNotReattached) {
  const char* script =
      "if [ ! -e \"$COTUNE_WORKDIR/started\" ]; then touch \"$COTUNE_WORKDIR/started\"; sleep 600; fi; "
      "printf '{{\"tokens_per_s\": 1}}' > \"$COTUNE_RESULT_FILE\"";
  json doc = study_doc("stopped", {{"name", "process"}, {"options", {{"command", {"/bin/sh", "-c", script}}}}});
  doc["budget"] = {{"trials", 1}};
  doc["parallel"] = 1;
  const std::string study = dir_.file("stopped.json");
  std::ofstream(study) << doc.dump(2);
  pid_t host = spawn({"run", study, "--store", store_});
  for (int i = 0; i < 1000 && !std::filesystem::exists(dir_.file("cotune-runs/stopped/1/started")); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(dir_.file("cotune-runs/stopped/1/started"))) << testing::read_file(dir_.file("stderr"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the run records the job's id
  ::kill(host, SIGINT);
  ASSERT_EQ(testing::wait_exit(host), 130) << testing::read_file(dir_.file("stderr"));
  std::vector<TrialRecord> before = stored_trials(store_, "stopped");
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].status, TrialStatus::kRunning);
  EXPECT_FALSE(before[0].external_id.has_value()) << *before[0].external_id;

  ASSERT_EQ(testing::wait_exit(spawn({"run", study, "--store", store_})), 0) << testing::read_file(dir_.file("stderr"));
  EXPECT_EQ(testing::read_file(dir_.file("stderr")).find("cannot re-attach"), std::string::npos)
      << testing::read_file(dir_.file("stderr"));
  std::vector<TrialRecord> all = stored_trials(store_, "stopped");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].status, TrialStatus::kOk);
}

}  // namespace
}  // namespace cotune::core
