// The Slurm executor against a real single-node cluster (scripts/slurm-local up, run by ctest as the
// fixture `slurm_cluster`). Skipped when the Slurm programs are not installed.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/cotune.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using cotune::core::Executor;
using cotune::core::TrialResult;
using ::testing::HasSubstr;

constexpr const char* kPlugin = COTUNE_PLUGIN_DIR "/libcotune-executor-slurm.so";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool on_path(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

std::string run(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

struct Space {
  cotune::ParamList params;
  Space() {
    params.add_int("tp", {1, 2, 4, 8}, 1);
    params.add_int_range("micro_batch", 1, 16, 1);
  }
};

struct Trial {
  std::string id, workdir, config_json;
  std::vector<double> config;
  cotune_trial raw = cotune::core::empty_trial();
  Trial(const Space& space, std::string trial_id, std::string dir, std::vector<double> values)
      : id(std::move(trial_id)), workdir(std::move(dir)), config(std::move(values)) {
    config_json = nlohmann::json{{"tp", config[0]}, {"micro_batch", config[1]}}.dump();
    raw.trial_id = cotune::str(id);
    raw.workdir = cotune::str(workdir);
    raw.config_json = cotune::str(config_json);
    raw.params = space.params.data();
    raw.num_params = space.params.size();
    raw.config = config.data();
  }
};

class SlurmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!on_path("sbatch") || !on_path("squeue"))
      GTEST_SKIP() << "Slurm is not installed (apt-get install slurmctld slurmd slurm-client munge); skipping";
    if (std::getenv("SLURM_CONF") == nullptr) {
      const char* dir = std::getenv("COTUNE_SLURM_DIR");
      std::string conf = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp/cotune-slurm") + "/slurm.conf";
      ::setenv("SLURM_CONF", conf.c_str(), 1);
    }
    ASSERT_EQ(std::system("sinfo -h >/dev/null 2>&1"), 0)
        << "Slurm is installed but no cluster answers at SLURM_CONF=" << std::getenv("SLURM_CONF")
        << "; start one with scripts/slurm-local up";
    char pattern[] = "/tmp/cotune-slurm-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    ASSERT_TRUE(registry_.load_file(kPlugin)) << (registry_.problems().empty() ? "" : registry_.problems()[0].reason);
  }
  void TearDown() override {
    if (!dir_.empty()) (void)std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  // Options running a /bin/sh script as the job; fast polling for tests.
  nlohmann::json sh(const std::string& script) const {
    return {{"command", {"/bin/sh", "-c", script, "job", "{tp}", "{micro_batch}"}},
            {"partition", "debug"},
            {"poll_min_s", 0.2},
            {"poll_max_s", 1.0}};
  }
  std::unique_ptr<Executor> make(const nlohmann::json& options) {
    return registry_.make_executor("slurm", options.dump());
  }
  std::unique_ptr<Trial> trial(const std::string& name, std::vector<double> values = {2, 4}) {
    return std::make_unique<Trial>(space_, "slurm-test/" + name, dir_ + "/trials/" + name, std::move(values));
  }
  static TrialResult wait(Executor::Job& job, int seconds = 120) {
    TrialResult r;
    for (int i = 0; i < seconds * 4 && !r.finished(); ++i) r = job.poll(250);
    return r;
  }

  Space space_;
  std::string dir_;
  cotune::core::Registry registry_;
};

// The job: records each run, then writes its metrics computed from the parameters.
const char* kGoodJob =
    "echo run >> \"$COTUNE_WORKDIR/runs\"; "
    "echo \"{{\\\"step_time_s\\\": $(( 100 / $1 + $2 ))}}\" > \"$COTUNE_RESULT_FILE\"";

TEST_F(SlurmTest, EightTrialsAsOneJobArrayEndToEnd) {
  auto ex = make(sh(kGoodJob));
  std::vector<std::unique_ptr<Trial>> trials;
  std::vector<std::unique_ptr<Executor::Job>> jobs;
  const double tps[] = {1, 2, 4, 8};
  for (int i = 0; i < 8; ++i) {
    trials.push_back(trial("e" + std::to_string(i), {tps[i % 4], double(1 + i)}));
    jobs.push_back(ex->submit(trials.back()->raw));
  }
  std::set<std::string> array_ids;
  for (int i = 0; i < 8; ++i) {
    TrialResult r = wait(*jobs[i]);
    ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
    EXPECT_EQ(nlohmann::json::parse(r.metrics_json)["step_time_s"], int(100 / tps[i % 4]) + 1 + i);
    EXPECT_EQ(r.attempts, 1);
    size_t underscore = r.external_id.find('_');
    ASSERT_NE(underscore, std::string::npos) << r.external_id;
    EXPECT_EQ(r.external_id.substr(underscore + 1), std::to_string(i));
    array_ids.insert(r.external_id.substr(0, underscore));
    EXPECT_EQ(read_file(trials[i]->workdir + "/runs"), "run\n");
  }
  EXPECT_EQ(array_ids.size(), 1u) << "the eight trials were not one job array";
}

// Before the first trial: a placeholder of the job's command the space has no parameter for.
TEST_F(SlurmTest, CheckStudyRefusesAPlaceholderTheSpaceLacks) {
  auto study = trial("study");
  study->raw.config = nullptr;
  nlohmann::json options = sh("true");
  options["command"].push_back("--pp={pipeline}");
  try {
    make(options)->check_study(study->raw);
    ADD_FAILURE() << "accepted a placeholder the space lacks";
  } catch (const cotune::core::PluginError& e) {
    EXPECT_EQ(e.code(), COTUNE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("placeholder {pipeline} names no parameter of the space"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(make(sh("true"))->check_study(study->raw));
}

TEST_F(SlurmTest, SingleTrialIsAPlainJob) {
  auto ex = make(sh(kGoodJob));
  auto t = trial("single");
  auto job = ex->submit(t->raw);
  TrialResult r = wait(*job);
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_EQ(r.external_id.find('_'), std::string::npos);
  EXPECT_EQ(r.log_path, t->workdir + "/stdout.log");
}

TEST_F(SlurmTest, FailingJobReportsExitCodeAndStderr) {
  auto ex = make(sh("echo 'loss is NaN at step 3' >&2; exit 3"));
  auto t = trial("fail");
  auto job = ex->submit(t->raw);
  TrialResult r = wait(*job);
  EXPECT_EQ(r.status, COTUNE_STATUS_FAILED);
  EXPECT_THAT(r.error, HasSubstr("exit code 3"));
  EXPECT_THAT(r.error, HasSubstr("loss is NaN at step 3"));
  EXPECT_EQ(r.metrics_json, "") << "the job failed: it measured nothing";
}

TEST_F(SlurmTest, CompletedJobWithoutItsResultFileIsFailedWithEmptyMetrics) {
  auto ex = make(sh("echo done"));
  auto t = trial("noresult");
  auto job = ex->submit(t->raw);
  TrialResult r = wait(*job);
  EXPECT_EQ(r.status, COTUNE_STATUS_FAILED);
  EXPECT_THAT(r.error, HasSubstr("completed but wrote no result file"));
  EXPECT_EQ(r.metrics_json, "{}") << "it ran to its end: the host counts it as a trial without its metric";
}

TEST_F(SlurmTest, JobOverItsTimeLimitIsTimeout) {
  nlohmann::json o = sh("sleep 600");
  o["time_limit"] = "1";  // one minute: Slurm enforces limits at minute granularity
  auto ex = make(o);
  auto t = trial("timeout");
  auto job = ex->submit(t->raw);
  TrialResult r = wait(*job, 240);
  EXPECT_EQ(r.status, COTUNE_STATUS_TIMEOUT) << r.error;
  EXPECT_THAT(r.error, HasSubstr("time limit"));
}

TEST_F(SlurmTest, CancelEndsTheJob) {
  auto ex = make(sh("sleep 600"));
  auto t = trial("cancel");
  auto job = ex->submit(t->raw);
  TrialResult r;
  for (int i = 0; i < 240 && r.status != COTUNE_STATUS_RUNNING; ++i) r = job->poll(250);
  ASSERT_EQ(r.status, COTUNE_STATUS_RUNNING);
  job->cancel();
  r = wait(*job);
  EXPECT_EQ(r.status, COTUNE_STATUS_CANCELLED) << r.error;
  std::string state = run("squeue -h --states=all -j " + r.external_id + " -o %T");
  EXPECT_THAT(state, HasSubstr("CANCELLED"));
}

TEST_F(SlurmTest, ResumeReattachesToRunningAndFinishedJobsWithoutRunningThemTwice) {
  nlohmann::json o = sh(std::string("sleep 3; ") + kGoodJob);
  o["cancel_on_destroy"] = false;
  auto a = trial("resume-a"), b = trial("resume-b", {4, 2});
  std::string id_a, id_b;
  {
    auto first = make(o);  // the first cotune: submits, then goes away with its jobs in flight
    auto ja = first->submit(a->raw);
    auto jb = first->submit(b->raw);
    id_a = ja->poll(0).external_id;
    id_b = jb->poll(0).external_id;
  }
  ASSERT_FALSE(id_a.empty());
  auto second = make(o);
  auto ja = second->attach(a->raw, id_a);
  auto jb = second->attach(b->raw, id_b);
  TrialResult ra = wait(*ja), rb = wait(*jb);
  ASSERT_EQ(ra.status, COTUNE_STATUS_OK) << ra.error;
  ASSERT_EQ(rb.status, COTUNE_STATUS_OK) << rb.error;
  EXPECT_EQ(nlohmann::json::parse(rb.metrics_json)["step_time_s"], 27);
  EXPECT_EQ(read_file(a->workdir + "/runs"), "run\n");
  EXPECT_EQ(read_file(b->workdir + "/runs"), "run\n");
}

TEST_F(SlurmTest, JobForgottenBySlurmIsCollectedFromItsExitStatus) {
  // A job that ended while cotune was down and has since left the controller's memory: only the
  // files on the shared filesystem remain.
  auto ex = make(sh(kGoodJob));
  auto t = trial("forgotten");
  ASSERT_EQ(std::system(("mkdir -p '" + t->workdir + "'").c_str()), 0);
  std::ofstream(t->workdir + "/exit_status") << "0 987654\n";
  std::ofstream(t->workdir + "/result.json") << R"({"step_time_s": 42})";
  auto job = ex->attach(t->raw, "987654");
  TrialResult r = wait(*job);
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_EQ(nlohmann::json::parse(r.metrics_json)["step_time_s"], 42);

  auto lost = trial("lost");
  auto job2 = ex->attach(lost->raw, "987655");
  r = wait(*job2);
  EXPECT_EQ(r.status, COTUNE_STATUS_FAILED);
  EXPECT_THAT(r.error, HasSubstr("no longer knows job 987655"));
}

TEST_F(SlurmTest, NodeSetDownMidJobIsRequeued) {
  // The first attempt waits; the second (after the node failure) finishes at once.
  nlohmann::json o = sh(std::string("if [ -e \"$COTUNE_WORKDIR/first\" ]; then ") + kGoodJob +
                        "; else touch \"$COTUNE_WORKDIR/first\"; sleep 600; fi");
  auto ex = make(o);
  auto t = trial("nodefail");
  auto job = ex->submit(t->raw);
  TrialResult r;
  for (int i = 0; i < 240 && !(r.status == COTUNE_STATUS_RUNNING && std::ifstream(t->workdir + "/first").good()); ++i)
    r = job->poll(250);
  ASSERT_EQ(r.status, COTUNE_STATUS_RUNNING);
  const std::string first_id = r.external_id;
  (void)run("scontrol update nodename=localhost state=down reason=cotune-test 2>&1");
  // Bring the node back once the job has failed, so the resubmission can run.
  for (int i = 0; i < 120; ++i) {
    std::string state = run("squeue -h --states=all -j " + first_id + " -o %T");
    if (state.find("NODE_FAIL") != std::string::npos) break;
    ::usleep(250000);
  }
  (void)run("scontrol update nodename=localhost state=resume 2>&1");
  r = wait(*job, 180);
  (void)run("scontrol update nodename=localhost state=resume 2>&1");
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_EQ(r.attempts, 2);
  EXPECT_NE(r.external_id, first_id);
}

TEST_F(SlurmTest, ClearErrorsForMissingSlurmPartitionAndRefusedScript) {
  auto refused = [&](const nlohmann::json& o, const std::string& why) {
    try {
      make(o);
      ADD_FAILURE() << "accepted " << o.dump();
    } catch (const cotune::core::PluginError& e) {
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
  };
  nlohmann::json absent = sh("true");
  absent["slurm_bin"] = dir_;  // holds no Slurm programs
  refused(absent, "Slurm is not available: 'sbatch' not found");
  nlohmann::json partition = sh("true");
  partition["partition"] = "no-such-partition";
  refused(partition, "partition 'no-such-partition' does not exist (partitions: debug)");
  nlohmann::json too_big = sh("true");
  too_big["nodes"] = 64;
  refused(too_big, "sbatch refuses these job options");

  // Without the check at create, sbatch's refusal comes back from submit (64 nodes would only
  // pend forever: that is what the check at create is for).
  nlohmann::json bad_gres = sh("true");
  bad_gres["sbatch_options"] = {"--gres=gpu:99"};
  refused(bad_gres, "sbatch refuses these job options: sbatch: error: Invalid generic resource");
  bad_gres["check_on_create"] = false;
  bad_gres["array"] = false;
  auto ex = make(bad_gres);
  auto t = trial("refused");
  try {
    ex->submit(t->raw);
    ADD_FAILURE() << "sbatch accepted --gres=gpu:99";
  } catch (const cotune::core::PluginError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sbatch refused the job script"));
  }
}

TEST_F(SlurmTest, InjectedValuesNeverReachTheScript) {
  auto ex = make(sh(kGoodJob));
  auto t = trial("inject", {3, 4});  // 3 is not an allowed tp
  try {
    ex->submit(t->raw);
    ADD_FAILURE() << "accepted tp=3";
  } catch (const cotune::core::PluginError& e) {
    EXPECT_THAT(e.what(), HasSubstr("parameter 'tp'"));
  }
}

}  // namespace
