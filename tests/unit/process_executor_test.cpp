// The process executor through its real plugin library: jobs are real /bin/sh programs.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/cotune.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using cotune::core::Executor;
using cotune::core::TrialResult;
using ::testing::HasSubstr;

constexpr const char* kPlugin = COTUNE_PLUGIN_DIR "/libcotune-executor-process.so";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A small space: tp in {1,2,4,8}, micro_batch in [1,16], recompute in {none, selective, full}, overlap.
struct Space {
  cotune::ParamList params;
  Space() {
    params.add_int("tp", {1, 2, 4, 8}, 1);
    params.add_int_range("micro_batch", 1, 16, 1);
    params.add_categorical("recompute", {"none", "selective", "full"}, 0);
    params.add_bool("overlap", false);
  }
};

// A trial built by hand; the strings live as long as the object.
struct Trial {
  std::string id, workdir, config_json;
  std::vector<double> config;
  cotune_trial raw = cotune::core::empty_trial();
  Trial(const Space& space, std::string trial_id, std::string dir, std::vector<double> values)
      : id(std::move(trial_id)), workdir(std::move(dir)), config(std::move(values)) {
    nlohmann::json j = nlohmann::json::object();
    for (size_t i = 0; i < space.params.size() && i < config.size(); ++i)
      j[std::string(cotune::view(space.params[i].name))] = config[i];
    config_json = j.dump();
    raw.trial_id = cotune::str(id);
    raw.workdir = cotune::str(workdir);
    raw.config_json = cotune::str(config_json);
    raw.params = space.params.data();
    raw.num_params = space.params.size();
    raw.config = config.data();
  }
};

class ProcessExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/cotune-process-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    ASSERT_TRUE(registry_.load_file(kPlugin)) << (registry_.problems().empty() ? "" : registry_.problems()[0].reason);
  }
  void TearDown() override { (void)std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::unique_ptr<Executor> make(const nlohmann::json& options) {
    return registry_.make_executor("process", options.dump());
  }
  // Options running a /bin/sh script; the trailing arguments become $1, $2, ...
  static nlohmann::json sh(const std::string& script, std::vector<std::string> args = {}) {
    std::vector<std::string> cmd = {"/bin/sh", "-c", script, "job"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    return {{"command", cmd}};
  }
  std::string workdir(const std::string& name) { return dir_ + "/" + name; }
  static TrialResult wait(Executor::Job& job) {
    TrialResult r;
    for (int i = 0; i < 600 && !r.finished(); ++i) r = job.poll(100);
    return r;
  }

  Space space_;
  std::string dir_;
  cotune::core::Registry registry_;
};

TEST_F(ProcessExecutorTest, MetricsFromResultFileWithArgvEnvironmentAndTrialFile) {
  auto ex = make(sh("echo \"args: $*\"; test \"$COTUNE_PARAM_TP\" = 2 || exit 9; "
                    "echo \"{{\\\"step_time_s\\\": $((10 / $1)), \\\"mb\\\": $COTUNE_PARAM_MICRO_BATCH}}\" "
                    "> \"$COTUNE_RESULT_FILE\"",
                    {"{tp}", "--mb={micro_batch}", "{recompute}", "{overlap}", "{trial_id}"}));
  EXPECT_EQ(ex->capacity(), 1);
  Trial t(space_, "study/1", workdir("t1"), {2, 4, 1, 1});
  auto job = ex->submit(t.raw);
  TrialResult r = wait(*job);
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  nlohmann::json metrics = nlohmann::json::parse(r.metrics_json);
  // The time the process ran is added (GPU-hours count it), unless the job says its own.
  ASSERT_TRUE(metrics.contains("wall_time_s")) << r.metrics_json;
  EXPECT_GE(metrics["wall_time_s"].get<double>(), 0);
  EXPECT_LT(metrics["wall_time_s"].get<double>(), 600);
  metrics.erase("wall_time_s");
  EXPECT_EQ(metrics, nlohmann::json::parse(R"({"step_time_s": 5, "mb": 4})"));
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.log_path, t.workdir + "/stdout.log");
  EXPECT_EQ(read_file(r.log_path), "args: 2 --mb=4 selective true study/1\n");
  auto trial_file = nlohmann::json::parse(read_file(t.workdir + "/trial.json"));
  EXPECT_EQ(trial_file["trial_id"], "study/1");
  EXPECT_EQ(trial_file["params"]["recompute"], "selective");
  EXPECT_EQ(trial_file["params"]["overlap"], "true");
  EXPECT_EQ(trial_file["config"]["tp"], 2);
}

// A relative program path names a file from where cotune runs; the trial runs in its own directory.
TEST_F(ProcessExecutorTest, ARelativeProgramIsFoundFromWhereCotuneRuns) {
  std::filesystem::create_directories(dir_ + "/bin");
  {
    std::ofstream f(dir_ + "/bin/job.sh");
    f << "#!/bin/sh\necho '{\"step_time_s\": 2}' > \"$COTUNE_RESULT_FILE\"\n";
  }
  std::filesystem::permissions(dir_ + "/bin/job.sh", std::filesystem::perms::owner_all);
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  auto ex = make({{"command", {"./bin/job.sh", "{tp}"}}});
  std::filesystem::current_path(before);
  Trial t(space_, "s/9", workdir("elsewhere/t9"), {1, 1, 0, 0});
  auto job = ex->submit(t.raw);
  TrialResult r = wait(*job);
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.metrics_json)["step_time_s"].get<double>(), 2);
}

TEST_F(ProcessExecutorTest, MetricsFromStdoutRegexWhenNoResultFile) {
  nlohmann::json o = sh("echo 'warming up'; echo 'step time: 1.5 s'; echo 'step time: 1.25 s'; echo 'mem 3e9'");
  o["metrics_regex"] = {{"step_time_s", "step time: ([0-9.]+)"}, {"peak_bytes", "mem ([0-9.e+]+)"}};
  auto ex = make(o);
  Trial t(space_, "s/2", workdir("t2"), {1, 1, 0, 0});
  auto job = ex->submit(t.raw);
  TrialResult r = wait(*job);
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  auto m = nlohmann::json::parse(r.metrics_json);
  EXPECT_DOUBLE_EQ(m["step_time_s"].get<double>(), 1.25);  // the last match wins
  EXPECT_DOUBLE_EQ(m["peak_bytes"].get<double>(), 3e9);
}

TEST_F(ProcessExecutorTest, RegexThatMatchesNothingFailsTheTrialNamingTheMetric) {
  nlohmann::json o = sh("echo nothing useful");
  o["metrics_regex"] = {{"step_time_s", "step time: ([0-9.]+)"}};
  auto ex = make(o);
  Trial t(space_, "s/3", workdir("t3"), {1, 1, 0, 0});
  auto job = ex->submit(t.raw);
  TrialResult r = wait(*job);
  EXPECT_EQ(r.status, COTUNE_STATUS_FAILED);
  EXPECT_THAT(r.error, HasSubstr("step_time_s"));
  EXPECT_EQ(r.metrics_json, "{}") << "the job ran to its end: the host counts it as a trial without its metric";
}

TEST_F(ProcessExecutorTest, ResultFileMustHoldNumbers) {
  auto ex = make(sh("echo '{{\"step_time_s\": \"fast\"}}' > \"$COTUNE_RESULT_FILE\""));
  Trial t(space_, "s/4", workdir("t4"), {1, 1, 0, 0});
  auto job = ex->submit(t.raw);
  TrialResult r = wait(*job);
  EXPECT_EQ(r.status, COTUNE_STATUS_FAILED);
  EXPECT_THAT(r.error, HasSubstr("'step_time_s' is not a number"));
}

TEST_F(ProcessExecutorTest, HostileOutputFailsTheTrialAndNothingElse) {
  // Each job writes what once crashed the host (std::regex recursed per character of a line; a deep
  // result was dumped recursively) or blocked it; each is a failed trial with the reason.
  struct Case {
    std::string script, expected;
    bool regex;
  };
  const std::vector<Case> cases = {
      // A 100 KB line, then the metric: the long line is cut and skipped, the metric still found.
      {"head -c 100000 /dev/zero | tr '\\0' 7; echo; echo 'step time: 1.5 s'", "", true},
      // A 50,000-digit number captured by the metric's group: not a number, said so.
      {"printf 'step time: '; head -c 50000 /dev/zero | tr '\\0' 9; echo", "which is not a number", true},
      {"printf '{{\"a\":' > \"$COTUNE_RESULT_FILE\"; head -c 300000 /dev/zero | tr '\\0' '[' >> \"$COTUNE_RESULT_FILE\"",
       "nested deeper than 64 levels", false},
      {"printf '{{\"a\": \"' > \"$COTUNE_RESULT_FILE\"; head -c 2000000 /dev/zero | tr '\\0' x >> \"$COTUNE_RESULT_FILE\"; "
       "echo '\"}}' >> \"$COTUNE_RESULT_FILE\"",
       "at most 1048576 are read", false},
      {"mkfifo \"$COTUNE_RESULT_FILE\"", "not a regular file", false},
  };
  int n = 0;
  for (const Case& c : cases) {
    nlohmann::json o = sh(c.script);
    if (c.regex) o["metrics_regex"] = {{"step_time_s", "step time: ([0-9.]+)"}};
    auto ex = make(o);
    const std::string id = std::to_string(++n);
    Trial t(space_, "s/h" + id, workdir("h" + id), {1, 1, 0, 0});
    auto job = ex->submit(t.raw);
    TrialResult r = wait(*job);
    if (c.expected.empty()) {
      ASSERT_EQ(r.status, COTUNE_STATUS_OK) << c.script << ": " << r.error;
      EXPECT_DOUBLE_EQ(nlohmann::json::parse(r.metrics_json)["step_time_s"].get<double>(), 1.5);
    } else {
      EXPECT_EQ(r.status, COTUNE_STATUS_FAILED) << c.script;
      EXPECT_THAT(r.error, HasSubstr(c.expected)) << c.script;
      EXPECT_LT(r.error.size(), 1000u) << "the error holds no copy of the output";
    }
  }
}

TEST_F(ProcessExecutorTest, FailingExitCodeReportsCodeAndStderrTail) {
  auto ex = make(sh("for i in 1 2 3 4 5; do echo \"line $i\" >&2; done; echo 'fatal: bad tp' >&2; exit 3"));
  Trial t(space_, "s/5", workdir("t5"), {1, 1, 0, 0});
  auto job = ex->submit(t.raw);
  TrialResult r = wait(*job);
  EXPECT_EQ(r.status, COTUNE_STATUS_FAILED);
  EXPECT_THAT(r.error, HasSubstr("exit code 3"));
  EXPECT_THAT(r.error, HasSubstr("fatal: bad tp"));
  EXPECT_THAT(read_file(t.workdir + "/stderr.log"), HasSubstr("line 1\n"));  // logs are kept
}

TEST_F(ProcessExecutorTest, OutOfMemoryInStderrIsOom) {
  auto ex = make(sh("echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB' >&2; exit 1"));
  Trial t(space_, "s/6", workdir("t6"), {1, 1, 0, 0});
  auto job = ex->submit(t.raw);
  EXPECT_EQ(wait(*job).status, COTUNE_STATUS_OOM);
}

TEST_F(ProcessExecutorTest, SignalIsReported) {
  auto ex = make(sh("kill -SEGV $$"));
  Trial t(space_, "s/7", workdir("t7"), {1, 1, 0, 0});
  auto job = ex->submit(t.raw);
  TrialResult r = wait(*job);
  EXPECT_EQ(r.status, COTUNE_STATUS_FAILED);
  EXPECT_THAT(r.error, HasSubstr("killed by signal 11 (SIGSEGV)"));
}

bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  // Reparented to a PID 1 that does not reap: a zombie has ended all the same.
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

TEST_F(ProcessExecutorTest, TimeoutKillsTheWholeProcessGroupEvenWhenTermIsIgnored) {
  // The job starts a grandchild that ignores SIGTERM, then waits: only a group SIGKILL ends both.
  nlohmann::json o = sh("trap '' TERM; sleep 300 & echo $! > \"$COTUNE_WORKDIR/grandchild.pid\"; "
                        "echo started >&2; wait; wait; sleep 300");
  o["timeout_s"] = 0.5;
  o["kill_grace_s"] = 0.3;
  auto ex = make(o);
  Trial t(space_, "s/8", workdir("t8"), {1, 1, 0, 0});
  auto job = ex->submit(t.raw);
  TrialResult r = wait(*job);
  EXPECT_EQ(r.status, COTUNE_STATUS_TIMEOUT);
  EXPECT_THAT(r.error, HasSubstr("timed out after 0.5 s"));
  EXPECT_THAT(r.error, HasSubstr("SIGKILL"));
  pid_t grandchild = std::atoi(read_file(t.workdir + "/grandchild.pid").c_str());
  ASSERT_GT(grandchild, 0);
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i, ::usleep(20000)) gone = process_gone(grandchild);
  EXPECT_TRUE(gone) << "grandchild " << grandchild << " survived the timeout";
}

TEST_F(ProcessExecutorTest, CancelStopsARunningJob) {
  auto ex = make(sh("sleep 300"));
  Trial t(space_, "s/9", workdir("t9"), {1, 1, 0, 0});
  auto job = ex->submit(t.raw);
  const TrialResult started = job->poll(0);
  EXPECT_EQ(started.status, COTUNE_STATUS_RUNNING) << started.error;
  job->cancel();
  TrialResult r = wait(*job);
  EXPECT_EQ(r.status, COTUNE_STATUS_CANCELLED) << r.error;
}

TEST_F(ProcessExecutorTest, CancelStopsWhatLeftTheProcessGroupWithSetsid) {
  // The job starts a daemon the usual way: a subshell that runs setsid (a new session and process
  // group) and exits at once, so that the daemon loses its parent. The job's first process adopts
  // it, and a cancel stops it along with the job.
  auto ex = make(sh("(setsid sleep 300 & echo $! > \"$COTUNE_WORKDIR/daemon.pid\") ; sleep 300"));
  Trial t(space_, "s/9b", workdir("t9b"), {1, 1, 0, 0});
  auto job = ex->submit(t.raw);
  pid_t daemon = 0;
  for (int i = 0; i < 100 && daemon <= 0; ++i, ::usleep(20000))
    daemon = std::atoi(read_file(t.workdir + "/daemon.pid").c_str());
  ASSERT_GT(daemon, 0);
  EXPECT_NE(::getpgid(daemon), ::getpgid(0));
  job->cancel();
  EXPECT_EQ(wait(*job).status, COTUNE_STATUS_CANCELLED);
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i, ::usleep(20000)) gone = process_gone(daemon);
  EXPECT_TRUE(gone) << "the setsid daemon " << daemon << " survived the cancel";
  if (!gone) ::kill(daemon, SIGKILL);
}

TEST_F(ProcessExecutorTest, InjectionAttemptsAreRefusedBeforeAnythingRuns) {
  auto ex = make(sh("touch \"$COTUNE_WORKDIR/ran\"; echo '{{\"x\": 1}}' > \"$COTUNE_RESULT_FILE\"", {"{recompute}", "{tp}"}));
  Space evil;
  evil.params.add_categorical("attack", {"ok", "a;rm -rf /", "-rf", "$(id)", "x y"}, 0);
  auto refused = [&](std::vector<double> values, const std::string& why, const std::string& id = "s/10") {
    Trial t(evil, id, workdir("inject"), values);
    try {
      ex->submit(t.raw);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const cotune::core::PluginError& e) {
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
    EXPECT_FALSE(std::ifstream(workdir("inject") + "/ran").good());
  };
  refused({1, 1, 0, 0, 1}, "choice 'a;rm -rf /' cannot be passed");
  refused({1, 1, 0, 0, 2}, "choice '-rf' cannot be passed");
  refused({1, 1, 0, 0, 3}, "choice '$(id)' cannot be passed");
  refused({1, 1, 0, 0, 4}, "choice 'x y' cannot be passed");
  refused({3, 1, 0, 0, 0}, "parameter 'tp': value 3 is not one of its allowed values");
  refused({2.5, 1, 0, 0, 0}, "parameter 'tp': value 2.5 is not an integer");
  refused({1, 17, 0, 0, 0}, "parameter 'micro_batch': value 17 is outside [1, 16]");
  refused({1, 1, 7, 0, 0}, "parameter 'recompute': choice index 7");
  refused({1, 1, 0, 2, 0}, "parameter 'overlap': boolean value 2");
  refused({1, 1, 0, 0, 0}, "trial id '../../etc' is not usable", "../../etc");
  refused({1, 1, 0, 0, 0}, "trial id '-rf' is not usable", "-rf");
}

TEST_F(ProcessExecutorTest, TheProgramCannotBeAPlaceholder) {
  // ["{recompute}"] ran whatever "full" (a parameter value) was on PATH.
  try {
    make({{"command", {"{recompute}", "--x"}}});
    ADD_FAILURE() << "accepted a placeholder as the program";
  } catch (const cotune::core::PluginError& e) {
    EXPECT_THAT(e.what(), HasSubstr("command[0] \"{recompute}\": the program (the first element) cannot hold a placeholder"));
  }
}

TEST_F(ProcessExecutorTest, UnknownPlaceholderIsAnErrorNamingIt) {
  auto ex = make(sh("true", {"{pipeline_stages}"}));
  Trial t(space_, "s/11", workdir("t11"), {1, 1, 0, 0});
  try {
    ex->submit(t.raw);
    ADD_FAILURE() << "accepted an unknown placeholder";
  } catch (const cotune::core::PluginError& e) {
    EXPECT_THAT(e.what(), HasSubstr("{pipeline_stages}"));
  }
}

// Before the first trial (ABI 1.10 check_study): a placeholder the study's space has no parameter
// for is refused with the one it most likely means; a command the space fits passes.
TEST_F(ProcessExecutorTest, CheckStudyRefusesAPlaceholderTheSpaceLacksBeforeAnyTrial) {
  Trial study(space_, "s", workdir("s"), {});
  study.raw.config = nullptr;
  study.raw.config_json = cotune::str(std::string_view());
  auto ex = make(sh("true", {"{tp}", "--mbs={micro_bach}", "{trial_id}"}));
  try {
    ex->check_study(study.raw);
    ADD_FAILURE() << "accepted a placeholder the space lacks";
  } catch (const cotune::core::PluginError& e) {
    EXPECT_EQ(e.code(), COTUNE_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("command[5]: placeholder {micro_bach} names no parameter of the space (did you "
                                    "mean {micro_batch}?); its parameters: tp, micro_batch, recompute, overlap"));
  }
  EXPECT_NO_THROW(make(sh("true", {"{tp}", "--mbs={micro_batch}", "{trial_id}", "{workdir}"}))->check_study(study.raw));
  // Isolated in its own process, the check crosses the boundary the same way.
  auto there = registry_.make_executor("process", sh("true", {"{tpp}"}).dump(), cotune::core::Isolation::kProcess);
  try {
    there->check_study(study.raw);
    ADD_FAILURE() << "the isolated executor accepted a placeholder the space lacks";
  } catch (const cotune::core::PluginError& e) {
    EXPECT_EQ(e.code(), COTUNE_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("placeholder {tpp} names no parameter of the space (did you mean {tp}?)"));
  }
}

TEST_F(ProcessExecutorTest, BadOptionsAreRefusedNamingTheField) {
  auto refused = [&](const nlohmann::json& o, const std::string& why) {
    try {
      make(o);
      ADD_FAILURE() << "accepted " << o.dump();
    } catch (const cotune::core::PluginError& e) {
      EXPECT_THAT(e.what(), HasSubstr(why));
    }
  };
  refused({{"command", {"/bin/true"}}, {"paralel", 2}}, "no such option (did you mean \"parallel\"?)");
  refused({{"command", {"/bin/true", "{tp"}}}, "'{' without a closing '}'");
  refused({{"command", nlohmann::json::array()}}, "command: expected a non-empty array");
  refused({{"command", {"/bin/true"}}, {"parallel", 0}}, "'parallel'");
  refused({{"command", {"/bin/true"}}, {"metrics_regex", {{"x", "no group"}}}}, "capture group");
  refused({{"command", {"/bin/true"}}, {"gpus", {"0;1"}}}, "'gpus'");
  refused({{"command", {"no-such-program-cotune"}}}, "not in PATH");
  refused({{"command", {"/nonexistent/prog"}}}, "not executable");
}

// Jobs that hold their slot until the test creates the file "go" in the test directory.
std::string blocking_job(const std::string& dir, const std::string& extra) {
  return "until [ -e '" + dir + "/go' ]; do sleep 0.02; done; " + extra +
         "echo '{{\"x\": 1}}' > \"$COTUNE_RESULT_FILE\"";
}

TEST_F(ProcessExecutorTest, ParallelLimitQueuesTheRest) {
  nlohmann::json o = sh("mkdir -p '" + dir_ + "/running'; mkdir \"" + dir_ + "/running/$COTUNE_PARAM_MICRO_BATCH\"; " +
                        "ls '" + dir_ + "/running' | wc -l >> '" + dir_ + "/seen'; " +
                        blocking_job(dir_, "rmdir \"" + dir_ + "/running/$COTUNE_PARAM_MICRO_BATCH\"; "));
  o["parallel"] = 2;
  auto ex = make(o);
  EXPECT_EQ(ex->capacity(), 2);
  std::vector<std::unique_ptr<Trial>> trials;
  std::vector<std::unique_ptr<Executor::Job>> jobs;
  for (int i = 1; i <= 4; ++i) {
    trials.push_back(std::make_unique<Trial>(space_, "p/" + std::to_string(i), workdir("p" + std::to_string(i)),
                                             std::vector<double>{1, double(i), 0, 0}));
    jobs.push_back(ex->submit(trials.back()->raw));
  }
  EXPECT_EQ(jobs[0]->poll(0).status, COTUNE_STATUS_RUNNING);
  EXPECT_EQ(jobs[1]->poll(0).status, COTUNE_STATUS_RUNNING);
  EXPECT_EQ(jobs[2]->poll(0).status, COTUNE_STATUS_PENDING);
  EXPECT_EQ(jobs[3]->poll(0).status, COTUNE_STATUS_PENDING);
  write_file(dir_ + "/go", "");
  for (auto& job : jobs) EXPECT_EQ(wait(*job).status, COTUNE_STATUS_OK);
  std::istringstream seen(read_file(dir_ + "/seen"));
  int n = 0, count = 0, most = 0;
  while (seen >> n) most = std::max(most, n), ++count;
  EXPECT_EQ(count, 4);
  EXPECT_LE(most, 2);
}

TEST_F(ProcessExecutorTest, GpusArePinnedPerTrialWithoutOverlap) {
  nlohmann::json o = sh("echo \"$CUDA_VISIBLE_DEVICES\" > \"$COTUNE_WORKDIR/devices\"; " + blocking_job(dir_, ""));
  o["parallel"] = 8;
  o["gpus"] = {"0", "1", "2", "3"};
  o["gpus_per_trial"] = 2;
  auto ex = make(o);
  EXPECT_EQ(ex->capacity(), 2);  // four devices, two per trial
  std::vector<std::unique_ptr<Trial>> trials;
  std::vector<std::unique_ptr<Executor::Job>> jobs;
  for (int i = 1; i <= 3; ++i) {
    trials.push_back(std::make_unique<Trial>(space_, "g/" + std::to_string(i), workdir("g" + std::to_string(i)),
                                             std::vector<double>{1, 1, 0, 0}));
    jobs.push_back(ex->submit(trials.back()->raw));
  }
  EXPECT_EQ(jobs[2]->poll(0).status, COTUNE_STATUS_PENDING);  // waits for devices
  for (int i = 0; i < 2; ++i)
    while (!std::ifstream(trials[i]->workdir + "/devices").good()) ::usleep(10000);
  ::usleep(50000);
  std::string a = read_file(trials[0]->workdir + "/devices"), b = read_file(trials[1]->workdir + "/devices");
  EXPECT_EQ(a, "0,1\n");
  EXPECT_EQ(b, "2,3\n");
  write_file(dir_ + "/go", "");
  for (auto& job : jobs) EXPECT_EQ(wait(*job).status, COTUNE_STATUS_OK);
  std::string c = read_file(trials[2]->workdir + "/devices");
  EXPECT_TRUE(c == "0,1\n" || c == "2,3\n") << c;
}

TEST_F(ProcessExecutorTest, ReleasedJobsAreStillReaped) {
  auto ex = make(sh("exit 0"));
  Trial t(space_, "s/12", workdir("t12"), {1, 1, 0, 0});
  pid_t pid = 0;
  {
    auto job = ex->submit(t.raw);
    pid = std::atoi(job->poll(0).external_id.c_str());
  }  // released while (probably) still running
  ASSERT_GT(pid, 0);
  Trial t2(space_, "s/13", workdir("t13"), {1, 1, 0, 0});
  auto job2 = ex->submit(t2.raw);
  wait(*job2);  // polling any job reaps every finished child
  EXPECT_NE(::kill(pid, 0), 0) << "child " << pid << " left as a zombie";
}

}  // namespace
