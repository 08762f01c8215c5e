// `cotune run` with the slurm executor against a real single-node cluster (scripts/slurm-local up,
// run by ctest as the fixture `slurm_cluster`): the real binary, store and plugins, jobs that run
// `cotune simulate` for their configuration, SIGINT and kill -9 in the middle of a study, then the
// same command again. Skipped when the Slurm programs are not installed.
//
// Every job appends its trial id to runs.log when it starts, so the tests count how often each
// trial really ran. While the file `hold` exists in the test directory, jobs wait after starting
// (unless their trial directory holds a file `go`): that keeps them queued or running for as long
// as a test needs.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store/store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/cli_process.hpp"

namespace cotune::core {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kJobName = "cotune-study-test";

const char* const kWorkload = R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 256},
                                  "cluster": {"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8}})";

// The job: $1 is the trial's configuration as JSON (filled in by the executor's command template).
const char* const kJob =
    "echo \"$COTUNE_TRIAL_ID\" >> \"$TEST_DIR/runs.log\"; "
    "touch \"$COTUNE_WORKDIR/started\"; "
    "while [ -e \"$TEST_DIR/hold\" ] && [ ! -e \"$COTUNE_WORKDIR/go\" ]; do sleep 0.2; done; "
    "printf '%s' \"$1\" > \"$COTUNE_WORKDIR/config.json\"; "
    "exec \"$COTUNE_BIN\" simulate --workload \"$TEST_DIR/workload.json\" --config \"$COTUNE_WORKDIR/config.json\"";

using cotune::testing::read_file;

bool on_path(const std::string& program) {
  return std::system(("command -v " + program + " >/dev/null 2>&1").c_str()) == 0;
}

std::string shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// Polls `done` every 100 ms for up to `seconds` (generous: a limit on a hang, not a timing check).
bool eventually(const std::function<bool()>& done, int seconds = 180) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

// The llm space's configuration as a command-template argument: {"tp": {tp}, "recompute": "{recompute}", ...}.
std::string config_template(const std::string& workload_json) {
  Registry registry;
  const std::string plugin = std::string(COTUNE_PLUGIN_DIR) + "/libcotune-space-llm.so";
  if (!registry.load_file(plugin)) throw std::runtime_error("cannot load " + plugin);
  std::unique_ptr<Space> space = registry.make_space("llm", workload_json, "{}");
  std::string out = "{{";
  for (const Param& p : space->params()) {
    const bool quoted = p.type == COTUNE_PARAM_CATEGORICAL;
    const std::string placeholder = "{" + p.name + "}";
    out += (out.size() > 2 ? ", \"" : "\"") + p.name + "\": " + (quoted ? "\"" + placeholder + "\"" : placeholder);
  }
  return out + "}}";
}

class SlurmStudy : public ::testing::Test {
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
    char pattern[] = "/tmp/cotune-slurm-study-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    store_ = dir_ + "/cotune.db";
    std::ofstream(dir_ + "/workload.json") << kWorkload;
    try {
      config_template_ = config_template(kWorkload);
    } catch (const std::exception& e) {
      FAIL() << "the jobs need the llm space: " << e.what();
    }
  }
  void TearDown() override {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
    }
    if (dir_.empty()) return;
    (void)shell(std::string("scancel --quiet --name=") + kJobName + " 2>&1");  // only this suite's jobs
    fs::remove_all(dir_);
  }

  std::string write_study(const std::string& name, int trials, int parallel) {
    json options = {{"command", {"/bin/sh", "-c", kJob, "job", config_template_}},
                    {"partition", "debug"},
                    {"job_name", kJobName},
                    {"env", {{"TEST_DIR", dir_}, {"COTUNE_BIN", COTUNE_CLI}}},
                    {"result_file", false},
                    {"metrics_regex",
                     {{"tokens_per_s", R"(^tokens/s\s+([0-9.eE+-]+))"},
                      {"step_time_s", R"(^step time\s+([0-9.eE+-]+) s)"}}},
                    {"poll_min_s", 0.2},
                    {"poll_max_s", 1.0}};
    json doc = {{"name", name},
                {"workload", json::parse(kWorkload)},
                {"searcher", "random"},
                {"seed", 11},
                {"executor", {{"name", "slurm"}, {"options", options}}},
                {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
                {"budget", {{"trials", trials}}},
                {"parallel", parallel}};
    std::string path = dir_ + "/" + name + ".json";
    std::ofstream(path) << doc.dump(2);
    return path;
  }

  // Starts `cotune args...` in the test directory, stdout and stderr to files.
  pid_t spawn(const std::vector<std::string>& args) {
    child_ = cotune::testing::spawn_cotune(dir_, args, dir_ + "/stdout", dir_ + "/stderr");
    return child_;
  }
  // The exit status (128 + signal when killed).
  int wait_for(pid_t pid) {
    const int code = cotune::testing::wait_exit(pid);
    if (pid == child_) child_ = 0;
    return code;
  }
  int run(const std::vector<std::string>& args) { return wait_for(spawn(args)); }
  bool exited(pid_t pid) {
    int status = 0;
    return waitpid(pid, &status, WNOHANG) == pid ? (child_ = 0, true) : false;
  }

  std::string out() const { return read_file(dir_ + "/stdout"); }
  std::string err() const { return read_file(dir_ + "/stderr"); }

  std::vector<TrialRecord> trials(const std::string& study) const {
    if (!fs::exists(store_)) return {};
    Store store(store_);
    auto s = store.find_study(study);
    return s ? store.trials(s->id) : std::vector<TrialRecord>{};
  }
  static std::vector<TrialRecord> in_flight(const std::vector<TrialRecord>& ts) {
    std::vector<TrialRecord> out;
    for (const TrialRecord& t : ts)
      if (!is_finished(t.status)) out.push_back(t);
    return out;
  }
  // Waits until `n` trials are submitted (their job ids stored) and at least one job has started.
  bool wait_submitted(pid_t pid, const std::string& study, size_t n) {
    return eventually([&] {
      if (exited(pid)) return true;
      std::vector<TrialRecord> ts = trials(study);
      size_t with_id = 0, started = 0;
      for (const TrialRecord& t : ts) {
        with_id += t.external_id && !t.external_id->empty();
        started += fs::exists(trial_dir(study, t.seq) + "/started");
      }
      return with_id >= n && started >= 1;
    }) && child_ == pid;
  }

  std::string trial_dir(const std::string& study, std::int64_t seq) const {
    return dir_ + "/cotune-runs/" + study + "/" + std::to_string(seq);
  }
  // How often each trial's job started: trial id ("study/seq") -> runs.
  std::map<std::string, int> runs() const {
    std::map<std::string, int> n;
    std::istringstream in(read_file(dir_ + "/runs.log"));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) ++n[line];
    return n;
  }
  // How often each trial was submitted: the sbatch scripts (one per sbatch call, kept next to the
  // trial directories) that run it. Trial seq -> submissions.
  std::map<std::int64_t, int> submissions(const std::string& study, std::int64_t trials) const {
    std::map<std::int64_t, int> n;
    for (const auto& entry : fs::directory_iterator(dir_ + "/cotune-runs/" + study)) {
      if (entry.path().extension() != ".sbatch") continue;
      const std::string script = read_file(entry.path().string());
      for (std::int64_t seq = 1; seq <= trials; ++seq)
        n[seq] += script.find("cd '" + trial_dir(study, seq) + "' ||") != std::string::npos;
    }
    return n;
  }
  static std::vector<std::string> job_ids(const std::vector<TrialRecord>& ts) {
    std::vector<std::string> ids;
    for (const TrialRecord& t : ts) ids.push_back(t.external_id.value_or(""));
    return ids;
  }
  static std::string array_of(const std::string& id) { return id.substr(0, id.find('_')); }
  // Slurm's state of each job, "" for a job squeue does not list. An array task cancelled while
  // pending has no record of its own: it takes the state of its array's record ("JOBID").
  static std::map<std::string, std::string> slurm_states(const std::vector<std::string>& ids) {
    std::set<std::string> query(ids.begin(), ids.end());
    for (const std::string& id : ids) query.insert(array_of(id));
    std::map<std::string, std::string> listed, states;
    std::istringstream in(shell("squeue -h --states=all -r -j " + join({query.begin(), query.end()}, ",") +
                                " -O JobArrayID:64,State:32 2>&1"));
    for (std::string id, state; in >> id >> state;) listed[id] = state;
    for (const std::string& id : ids) states[id] = listed.count(id) ? listed[id] : listed[array_of(id)];
    return states;
  }

  // The study ran to its budget: every trial ok with its metrics, every configuration once.
  void expect_complete(const std::string& study, size_t budget) {
    std::vector<TrialRecord> ts = trials(study);
    ASSERT_EQ(ts.size(), budget) << err();
    std::set<std::string> keys;
    for (const TrialRecord& t : ts) {
      EXPECT_EQ(t.status, TrialStatus::kOk) << "trial " << t.seq << ": " << t.error.value_or("");
      EXPECT_TRUE(keys.insert(t.config_key).second) << "trial " << t.seq << " repeats a configuration";
      ASSERT_TRUE(t.metrics_json.has_value()) << "trial " << t.seq;
      json m = json::parse(*t.metrics_json);
      EXPECT_GT(m.value("tokens_per_s", 0.0), 0) << *t.metrics_json;
      EXPECT_GT(m.value("step_time_s", 0.0), 0) << *t.metrics_json;
      ASSERT_TRUE(t.objective.has_value()) << "trial " << t.seq;
      EXPECT_EQ(*t.objective, m["tokens_per_s"].get<double>());
      EXPECT_TRUE(t.external_id && !t.external_id->empty()) << "trial " << t.seq << " has no Slurm job id";
      EXPECT_EQ(t.log_path.value_or(""), trial_dir(study, t.seq) + "/stdout.log");
    }
  }

  std::string dir_, store_, config_template_;
  pid_t child_ = 0;
};

TEST_F(SlurmStudy, EightTrialsRunAsSlurmJobsWithBatchesAsJobArrays) {
  std::string study = write_study("arrays", 8, 4);
  ASSERT_EQ(run({"run", study, "--store", store_}), 0) << err();
  EXPECT_THAT(out(), HasSubstr("8 ok")) << out();
  expect_complete("arrays", 8);

  std::vector<TrialRecord> ts = trials("arrays");
  ASSERT_EQ(ts.size(), 8u);
  // The loop proposes the first four together: one array, task i running trial i + 1.
  std::set<std::string> first_arrays;
  for (size_t i = 0; i < 4; ++i) {
    const std::string id = ts[i].external_id.value_or("");
    size_t underscore = id.find('_');
    ASSERT_NE(underscore, std::string::npos) << "trial " << ts[i].seq << ": " << id << " is not an array task";
    EXPECT_EQ(id.substr(underscore + 1), std::to_string(i));
    first_arrays.insert(id.substr(0, underscore));
  }
  EXPECT_EQ(first_arrays.size(), 1u) << "the first batch was not one job array";
  const std::vector<std::string> all_ids = job_ids(ts);
  std::set<std::string> ids(all_ids.begin(), all_ids.end());
  EXPECT_EQ(ids.size(), 8u) << "two trials share a Slurm job id";

  // Each trial was submitted once, its job ran once and recorded its exit status under its own id.
  std::map<std::string, int> n = runs();
  EXPECT_EQ(n.size(), 8u);
  for (const auto& [trial, count] : n) EXPECT_EQ(count, 1) << trial;
  for (const TrialRecord& t : ts)
    EXPECT_EQ(read_file(trial_dir("arrays", t.seq) + "/exit_status"), "0 " + t.external_id.value_or("") + "\n");
  for (const auto& [seq, count] : submissions("arrays", 8)) EXPECT_EQ(count, 1) << "trial " << seq;
}

TEST_F(SlurmStudy, SigintCancelsTheJobsExitsWith130AndTheStudyResumes) {
  std::ofstream(dir_ + "/hold").flush();
  std::string study = write_study("interrupted", 8, 4);
  pid_t pid = spawn({"run", study, "--store", store_});
  ASSERT_TRUE(wait_submitted(pid, "interrupted", 4)) << "the study ended before it could be interrupted:\n" << err();
  std::vector<TrialRecord> submitted = in_flight(trials("interrupted"));
  ASSERT_EQ(submitted.size(), 4u);
  const std::vector<std::string> ids = job_ids(submitted);

  ::kill(pid, SIGINT);
  ASSERT_EQ(wait_for(pid), 130) << err();
  EXPECT_THAT(out(), HasSubstr("resume: cotune run")) << out();
  {
    Store store(store_);
    EXPECT_EQ(store.find_study("interrupted")->status, StudyStatus::kStopped);
  }
  // Cancelled in Slurm: nothing of them queued or running, each known as CANCELLED.
  EXPECT_EQ(shell("squeue -h -r -j " + join(ids, ",") + " -o '%i %T' 2>&1"), "") << "jobs left queued or running";
  std::map<std::string, std::string> states = slurm_states(ids);
  std::set<std::string> arrays;
  for (const std::string& id : ids) {
    EXPECT_EQ(states[id], "CANCELLED") << "job " << id;
    arrays.insert(array_of(id));
  }
  // scontrol agrees: every record of their arrays (all of whose tasks were in flight) is cancelled.
  for (const std::string& array : arrays) {
    std::istringstream records(shell("scontrol -o show job " + array + " 2>&1"));
    int n = 0;
    for (std::string record; std::getline(records, record); ++n)
      EXPECT_THAT(record, HasSubstr("JobState=CANCELLED")) << "job " << array;
    EXPECT_GT(n, 0) << "scontrol does not know job " << array;
  }
  // The interrupted trials stay in flight, never measured, resumed next time; their jobs are gone
  // (cancelled, confirmed), so no job id is left to re-attach to.
  std::vector<TrialRecord> stopped = trials("interrupted");
  EXPECT_EQ(in_flight(stopped).size(), 4u);
  EXPECT_EQ(job_ids(in_flight(stopped)), std::vector<std::string>(4, ""));
  std::map<std::string, int> before = runs();
  EXPECT_FALSE(before.empty()) << "no job had started before the interrupt";

  fs::remove(dir_ + "/hold");
  ASSERT_EQ(run({"run", study, "--store", store_}), 0) << err();
  EXPECT_THAT(err(), HasSubstr("resuming study 'interrupted'")) << err();
  expect_complete("interrupted", 8);
  // Each trial ran once more in the resumed study: the interrupted ones again, with new job ids.
  std::map<std::string, int> after = runs();
  EXPECT_EQ(after.size(), 8u);
  for (const auto& [trial, count] : after) EXPECT_EQ(count, before[trial] + 1) << trial;
  std::vector<TrialRecord> done = trials("interrupted");
  for (const TrialRecord& t : submitted)
    EXPECT_NE(done.at(static_cast<size_t>(t.seq - 1)).external_id, t.external_id) << "trial " << t.seq;
  std::set<std::int64_t> interrupted;
  for (const TrialRecord& t : submitted) interrupted.insert(t.seq);
  for (const auto& [seq, count] : submissions("interrupted", 8))
    EXPECT_EQ(count, interrupted.count(seq) ? 2 : 1) << "trial " << seq << " submitted " << count << " times";
}

TEST_F(SlurmStudy, KillNineLeavesJobsRunningAndTheNextRunCollectsThemWithoutRunningAnyTwice) {
  std::ofstream(dir_ + "/hold").flush();
  std::string study = write_study("killed", 8, 4);
  pid_t pid = spawn({"run", study, "--store", store_});
  ASSERT_TRUE(wait_submitted(pid, "killed", 4)) << "the study ended before it could be killed:\n" << err();
  ::kill(pid, SIGKILL);
  ASSERT_EQ(wait_for(pid), 128 + SIGKILL);

  std::vector<TrialRecord> submitted = in_flight(trials("killed"));
  ASSERT_EQ(submitted.size(), 4u);
  const std::vector<std::string> ids = job_ids(submitted);
  std::map<std::string, std::string> states = slurm_states(ids);
  for (const std::string& id : ids)
    EXPECT_TRUE(states[id] == "RUNNING" || states[id] == "PENDING") << "job " << id << ": " << states[id];

  // One job finishes while no cotune is watching.
  const TrialRecord* early = nullptr;
  for (const TrialRecord& t : submitted)
    if (early == nullptr && fs::exists(trial_dir("killed", t.seq) + "/started")) early = &t;
  ASSERT_NE(early, nullptr);
  std::ofstream(trial_dir("killed", early->seq) + "/go").flush();
  ASSERT_TRUE(eventually([&] { return slurm_states({*early->external_id})[*early->external_id] == "COMPLETED"; }))
      << "job " << *early->external_id << " did not complete";

  // The next run collects it from Slurm and re-attaches to the three still held.
  pid = spawn({"run", study, "--store", store_});
  ASSERT_TRUE(eventually([&] {
    if (exited(pid)) return true;
    std::vector<TrialRecord> ts = trials("killed");
    return ts.size() >= static_cast<size_t>(early->seq) && is_finished(ts[early->seq - 1].status);
  })) << err();
  ASSERT_EQ(child_, pid) << "the resumed study ended early:\n" << err();
  std::vector<TrialRecord> resumed = trials("killed");
  EXPECT_EQ(resumed.at(static_cast<size_t>(early->seq - 1)).status, TrialStatus::kOk);
  for (const TrialRecord& t : submitted) {
    const TrialRecord& now = resumed.at(static_cast<size_t>(t.seq - 1));
    EXPECT_EQ(now.external_id, t.external_id) << "trial " << t.seq;
    if (t.seq != early->seq) {
      EXPECT_FALSE(is_finished(now.status)) << "trial " << t.seq << " is still held in Slurm";
    }
  }

  fs::remove(dir_ + "/hold");
  ASSERT_EQ(wait_for(pid), 0) << err();
  EXPECT_THAT(err(), HasSubstr("resuming study 'killed': 0 finished, 4 to resume")) << err();
  expect_complete("killed", 8);
  std::vector<TrialRecord> done = trials("killed");
  for (const TrialRecord& t : submitted)
    EXPECT_EQ(done.at(static_cast<size_t>(t.seq - 1)).external_id, t.external_id)
        << "trial " << t.seq << " was submitted again";
  std::map<std::string, int> n = runs();
  EXPECT_EQ(n.size(), 8u);
  for (const auto& [trial, count] : n) EXPECT_EQ(count, 1) << trial << " ran " << count << " times";
  for (const auto& [seq, count] : submissions("killed", 8))
    EXPECT_EQ(count, 1) << "trial " << seq << " submitted " << count << " times";
}

}  // namespace
}  // namespace cotune::core
