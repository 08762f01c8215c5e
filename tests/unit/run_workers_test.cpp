// `cotune run --worker` through the real command: several workers on one study, on PostgreSQL and
// SQLite. Each trial is stored once and run once, the workers stop together at the budget, a worker
// killed with -9 leaves its claimed trials to another, a plain run and workers exclude each other,
// and `show` lists the live workers and who runs each trial.
#include <cotune/core/report/live_server.hpp>
#include <cotune/core/store/store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/cli_process.hpp"
#include "support/http_client.hpp"
#include "support/postgres_cluster.hpp"

namespace cotune::core {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::read_file;
using testing::ScratchDir;

class RunWorkers : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      COTUNE_POSTGRES_DATABASE(store_);
    } else {
      store_ = dir_.file("cotune.db");
    }
  }

  // A study whose trials are a shell command: each appends its trial id to ran.txt (after
  // `sleep_s`) and reports tokens_per_s.
  std::string write_study(const std::string& name, int trials, int parallel, const std::string& sleep_s = "0") {
    const std::string command = "sleep " + sleep_s + "; echo \"$COTUNE_TRIAL_ID\" >> " + dir_.file("ran.txt") +
                                "; echo '{{\"tokens_per_s\": {tp}}}' > \"$COTUNE_RESULT_FILE\"";
    json doc = {{"name", name},
                {"workload", json::parse(R"({"model": {"preset": "llama3-70b"}, "training": {"global_batch": 1024},
                                             "cluster": {"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8}})")},
                {"searcher", "random"},
                {"executor", {{"name", "process"}, {"options", {{"parallel", parallel}, {"command", {"/bin/sh", "-c", command}}}}}},
                {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
                {"budget", {{"trials", trials}}},
                {"parallel", parallel},
                {"seed", 5}};
    const std::string path = dir_.file(name + ".json");
    std::ofstream(path) << doc.dump(2);
    return path;
  }

  pid_t spawn(const std::vector<std::string>& args, const std::string& tag) {
    return testing::spawn_cotune(dir_.path(), args, dir_.file("out" + tag), dir_.file("err" + tag));
  }
  std::string err(const std::string& tag) const { return read_file(dir_.file("err" + tag)); }
  static int wait(pid_t pid) { return testing::wait_exit_within(pid, std::chrono::seconds(180)); }

  std::vector<TrialRecord> trials(const std::string& study) { return testing::stored_trials(store_, study); }

  // The lines of ran.txt.
  std::vector<std::string> ran() const {
    std::istringstream in(read_file(dir_.file("ran.txt")));
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lines.push_back(line);
    return lines;
  }

  // Every trial stored once, finished, none in flight; no worker left registered.
  void expect_every_trial_stored_once(const std::string& study, size_t n) {
    const std::vector<TrialRecord> ts = trials(study);
    ASSERT_EQ(ts.size(), n);
    std::set<std::int64_t> seqs;
    std::set<std::string> keys;
    for (const TrialRecord& t : ts) {
      seqs.insert(t.seq);
      keys.insert(t.config_key);
      EXPECT_TRUE(is_finished(t.status)) << "trial " << t.seq << " left " << to_string(t.status);
      EXPECT_EQ(t.status, TrialStatus::kOk) << "trial " << t.seq << ": " << t.error.value_or("");
    }
    EXPECT_EQ(seqs.size(), n);
    EXPECT_EQ(keys.size(), n);
    Store store(store_);
    EXPECT_TRUE(store.study_workers(store.find_study(study)->id).empty());
    EXPECT_EQ(store.find_study(study)->status, StudyStatus::kFinished);
  }

  ScratchDir dir_{"workers"};
  std::string store_;
};

INSTANTIATE_TEST_SUITE_P(Backends, RunWorkers, ::testing::Values("postgresql", "sqlite"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST_P(RunWorkers, FourWorkersRunEachOfTwoHundredTrialsOnce) {
  const std::string study = write_study("shared", 200, 4);
  std::vector<pid_t> workers;
  for (int i = 0; i < 4; ++i)
    workers.push_back(spawn({"run", study, "--store", store_, "--worker", "--quiet"}, std::to_string(i)));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(wait(workers[i]), 0) << err(std::to_string(i));
  expect_every_trial_stored_once("shared", 200);
  // Run once: each trial id appears once in what the jobs wrote.
  const std::vector<std::string> lines = ran();
  EXPECT_EQ(lines.size(), 200u);
  EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()).size(), 200u);
  // Each worker did some of them.
  std::map<std::int64_t, int> by_worker;
  for (const TrialRecord& t : trials("shared")) ++by_worker[t.claim_pid.value_or(0)];
  for (pid_t w : workers) EXPECT_GT(by_worker[w], 0) << "worker " << w << " ran no trial";
}

TEST_P(RunWorkers, ShowServeAndReportReadWhileWorkersWrite) {
  const std::string study = write_study("watched", 6, 2, "2");
  std::vector<pid_t> workers;
  for (int i = 0; i < 2; ++i)
    workers.push_back(spawn({"run", study, "--store", store_, "--worker", "--quiet"}, "w" + std::to_string(i)));
  // Until both workers have trials in flight.
  std::set<std::int64_t> busy;
  for (int i = 0; i < 2000 && busy.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    busy.clear();
    for (const TrialRecord& t : trials("watched"))
      if (t.status == TrialStatus::kRunning && t.claim_pid) busy.insert(*t.claim_pid);
  }
  ASSERT_EQ(busy.size(), 2u) << err("w0") << err("w1");

  // The live server answers the same document while they write.
  {
    report::LiveServerOptions o;
    o.store_path = store_;
    o.port = 0;
    report::LiveServer server(o);
    std::thread thread([&] { server.run(); });
    const testing::Reply reply = testing::get(server.port(), "/api/studies/watched");
    server.stop();
    thread.join();
    ASSERT_EQ(reply.status, 200) << reply.body;
    const json served_doc = json::parse(reply.body);  // kept: a range over a temporary's member dangles
    std::set<std::int64_t> served;
    for (const json& w : served_doc.at("study").at("workers")) served.insert(w.at("pid").get<std::int64_t>());
    EXPECT_EQ(served, std::set<std::int64_t>(workers.begin(), workers.end()));
  }
  EXPECT_EQ(wait(spawn({"show", "watched", "--store", store_, "--json"}, "j")), 0) << err("j");
  const json doc = json::parse(read_file(dir_.file("outj")));
  std::set<std::int64_t> listed;
  for (const json& w : doc.at("study").at("workers")) {
    listed.insert(w.at("pid").get<std::int64_t>());
    EXPECT_LT(w.at("last_heard_s").get<double>(), 60);
    EXPECT_GE(w.at("in_flight").get<std::int64_t>(), 1) << w.dump();
  }
  EXPECT_EQ(listed, std::set<std::int64_t>(workers.begin(), workers.end()));
  for (const json& t : doc.at("trials")) {
    if (t.at("status") != "running") continue;
    EXPECT_THAT(t.at("worker").get<std::string>(), HasSubstr(":"));
  }

  EXPECT_EQ(wait(spawn({"show", "watched", "--store", store_}, "t")), 0) << err("t");
  for (pid_t w : workers)
    EXPECT_THAT(read_file(dir_.file("outt")), HasSubstr("worker pid " + std::to_string(w) + " on "));
  // The report reads the same store while they write.
  EXPECT_EQ(wait(spawn({"report", "watched", "--store", store_, "--output", dir_.file("live.html")}, "r")), 0) << err("r");
  EXPECT_THAT(read_file(dir_.file("live.html")), HasSubstr("watched"));

  for (int i = 0; i < 2; ++i) EXPECT_EQ(wait(workers[i]), 0) << err("w" + std::to_string(i));
  // Finished: the workers have unregistered.
  EXPECT_EQ(wait(spawn({"show", "watched", "--store", store_, "--json"}, "j2")), 0) << err("j2");
  EXPECT_TRUE(json::parse(read_file(dir_.file("outj2"))).at("study").at("workers").empty());
  expect_every_trial_stored_once("watched", 6);
}

TEST_P(RunWorkers, WorkersThatJoinLateDrawTheirOwnConfigurations) {
  // The first worker has saved nothing a later one may take as its own: a joining worker that
  // restored the first one's random stream proposes what the first proposes next, is refused by
  // the store, and with trials that finish at once (the simulator) gave up as if the space were
  // exhausted ("no unmeasured configuration left").
  json doc = {{"name", "late"},
              {"workload", json::parse(R"({"model": {"preset": "llama3-70b"}, "training": {"global_batch": 1024},
                                           "cluster": {"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8}})")},
              {"searcher", "random"},
              {"executor", {{"name", "sim"}, {"options", {{"noise", 0.05}}}}},
              {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
              {"budget", {{"trials", 120}}},
              {"parallel", 4},
              {"seed", 1}};
  const std::string study = dir_.file("late.json");
  std::ofstream(study) << doc.dump(2);
  std::vector<pid_t> workers{spawn({"run", study, "--store", store_, "--worker"}, "0")};
  for (int i = 0; i < 3000 && testing::count_finished(trials("late")) < 8; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (int i = 1; i < 4; ++i) workers.push_back(spawn({"run", study, "--store", store_, "--worker"}, std::to_string(i)));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(wait(workers[i]), 0) << err(std::to_string(i));
  expect_every_trial_stored_once("late", 120);
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(read_file(dir_.file("out" + std::to_string(i))), HasSubstr("the trial budget (120) is spent"))
        << "worker " << i;
  }
  // The last fit is in the store for the others to take (AnalyticPrior.AnotherProcessTakesTheFitWhole).
  Store store(store_);
  const auto state = store.load_predictor_state(store.find_study("late")->id);
  ASSERT_TRUE(state.has_value());
  const std::string text(state->begin(), state->end());
  EXPECT_EQ(text.rfind("cotune-surrogate-state 1\n", 0), 0u) << text.substr(0, 80);
  EXPECT_THAT(text, HasSubstr("\"predictor\":\"org.cotune.predictor.krr\""));
}

TEST_P(RunWorkers, TheClaimedTrialsOfAKilledWorkerAreTakenOver) {
  const std::string study = write_study("killed", 8, 3, "1");
  const pid_t victim = spawn({"run", study, "--store", store_, "--worker", "--quiet"}, "v");
  // Until the victim has claimed trials that are in flight.
  std::set<std::int64_t> claimed;
  for (int i = 0; i < 2000 && claimed.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (const TrialRecord& t : trials("killed"))
      if (t.claim_pid == victim && t.status == TrialStatus::kRunning) claimed.insert(t.id);
  }
  ASSERT_FALSE(claimed.empty()) << err("v");
  ::kill(victim, SIGKILL);
  EXPECT_EQ(wait(victim), 128 + SIGKILL);
  const pid_t heir = spawn({"run", study, "--store", store_, "--worker", "--quiet"}, "h");
  EXPECT_EQ(wait(heir), 0) << err("h");
  expect_every_trial_stored_once("killed", 8);
  for (const TrialRecord& t : trials("killed")) {
    if (claimed.count(t.id) == 0) continue;
    EXPECT_EQ(t.claim_pid, heir) << "trial " << t.seq << " of the killed worker";
  }
}

TEST_P(RunWorkers, APlainRunAndWorkersRefuseEachOtherNamingTheHolder) {
  const std::string study = write_study("exclusive", 6, 1, "0.5");
  // Workers live: a plain run is refused and told who works on the study.
  const pid_t worker = spawn({"run", study, "--store", store_, "--worker", "--quiet"}, "w");
  for (int i = 0; i < 2000 && trials("exclusive").empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_FALSE(trials("exclusive").empty()) << err("w");
  EXPECT_EQ(wait(spawn({"run", study, "--store", store_, "--quiet"}, "p")), 2);
  EXPECT_THAT(err("p"), HasSubstr("study 'exclusive' is being run by workers (pid " + std::to_string(worker)));
  EXPECT_EQ(wait(worker), 0) << err("w");

  // A plain run holds it: a worker is refused and told who holds it.
  const std::string again = write_study("alone", 6, 1, "0.5");
  const pid_t plain = spawn({"run", again, "--store", store_, "--quiet"}, "p2");
  for (int i = 0; i < 2000 && trials("alone").empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_FALSE(trials("alone").empty()) << err("p2");
  EXPECT_EQ(wait(spawn({"run", again, "--store", store_, "--worker", "--quiet"}, "w2")), 2);
  EXPECT_THAT(err("w2"), HasSubstr("study 'alone' is being run by pid " + std::to_string(plain)));
  EXPECT_THAT(err("w2"), HasSubstr("holds it alone"));
  EXPECT_EQ(wait(plain), 0) << err("p2");
  expect_every_trial_stored_once("alone", 6);
}

}  // namespace
}  // namespace cotune::core
