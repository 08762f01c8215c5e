// `cotune run`, `show` and `export` as a user runs them: the real binary (fork + exec), the real
// plugins and store, kill -9 and SIGINT in the middle of a study, then the same command again.
#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/store/store.hpp>

#include <gtest/gtest.h>

#include "support/cli_process.hpp"
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace cotune::core {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using cotune::testing::read_file;

// The trial numbers in `cotune show STUDY`'s trial table (the rows under its "TRIAL" header).
std::vector<long> trial_rows(const std::string& show_output) {
  std::istringstream in(show_output);
  std::string line;
  while (std::getline(in, line) && line.rfind("TRIAL ", 0) != 0) {
  }
  std::vector<long> rows;
  while (std::getline(in, line) && !line.empty())
    if (std::isdigit(static_cast<unsigned char>(line[0]))) rows.push_back(std::stol(line));
  return rows;
}

class RunCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cotune-cli-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_ = dir_ + "/cotune.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_study(const std::string& name, int trials, int parallel, const std::string& searcher = "reinforce") {
    json doc = {{"name", name},
                {"workload",
                 json::parse(R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 256},
                                 "cluster": {"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8}})")},
                {"searcher", searcher},
                {"executor", {{"name", "sim"}, {"options", {{"noise", 0.05}}}}},
                {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
                {"budget", {{"trials", trials}}},
                {"parallel", parallel},
                {"format", "megatron"}};
    std::string path = dir_ + "/" + name + ".json";
    std::ofstream(path) << doc.dump(2);
    return path;
  }

  // A random-search study of the testgrid fixture space (`space`: its name or {name, options}),
  // answered by the testecho fixture executor.
  std::string write_grid_study(const std::string& name, const json& space) {
    const std::string path = write_study(name, 2, 1, "random");
    json doc = json::parse(read_file(path));
    doc["space"] = space;
    doc["executor"] = {{"name", "testecho"}, {"options", json::object()}};
    doc.erase("format");
    doc["plugin_paths"] = {COTUNE_BINARY_DIR "/lib/cotune/test-plugins"};
    std::ofstream(path) << doc.dump(2);
    return path;
  }

  // A random-search study whose trials the test executor testecho answers, with its options.
  std::string write_echo_study(const std::string& name, int trials, int parallel, const json& options) {
    const std::string path = write_study(name, trials, parallel, "random");
    json doc = json::parse(read_file(path));
    doc["executor"] = {{"name", "testecho"}, {"options", options}};
    doc["plugin_paths"] = {COTUNE_BINARY_DIR "/lib/cotune/test-plugins"};
    std::ofstream(path) << doc.dump(2);
    return path;
  }
  // Starts `cotune args...` in the test directory with stdout and stderr going to files.
  pid_t spawn(const std::vector<std::string>& args) {
    return cotune::testing::spawn_cotune(dir_, args, dir_ + "/stdout", dir_ + "/stderr");
  }

  // Runs to completion; returns the exit status (128 + signal when killed).
  int run(const std::vector<std::string>& args) { return wait_for(spawn(args)); }

  static int wait_for(pid_t pid) { return cotune::testing::wait_exit(pid); }

  std::string out() const { return read_file(dir_ + "/stdout"); }
  std::string err() const { return read_file(dir_ + "/stderr"); }

  // Finished trials of a study, read from the store while another process writes it.
  std::vector<TrialRecord> trials(const std::string& study) const { return cotune::testing::stored_trials(store_, study); }

  static size_t finished(const std::vector<TrialRecord>& ts) { return cotune::testing::count_finished(ts); }

  // Waits until the study has at least `n` finished trials (false when the process ended first).
  bool wait_for_trials(pid_t pid, const std::string& study, size_t n) {
    for (int i = 0; i < 6000; ++i) {
      if (finished(trials(study)) >= n) return true;
      if (waitpid(pid, nullptr, WNOHANG) == pid) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // Waits (up to 10 s) until the study has recorded a trial, started or not.
  bool wait_for_a_trial(const std::string& study) const {
    for (int i = 0; i < 500; ++i) {
      if (!trials(study).empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // After a resume: every configuration once, every finished trial of before unchanged, the budget met.
  void expect_complete(const std::vector<TrialRecord>& before, const std::string& study, size_t budget) {
    std::vector<TrialRecord> after = trials(study);
    EXPECT_EQ(after.size(), budget);
    EXPECT_EQ(finished(after), budget);
    std::set<std::string> keys;
    for (const TrialRecord& t : after) EXPECT_TRUE(keys.insert(t.config_key).second) << "trial " << t.seq << " repeated";
    for (const TrialRecord& t : before) {
      if (!is_finished(t.status)) continue;
      const TrialRecord& same = after.at(static_cast<size_t>(t.seq - 1));
      EXPECT_EQ(same.config_key, t.config_key);
      EXPECT_EQ(same.finished_at, t.finished_at) << "trial " << t.seq << " was measured again";
      EXPECT_EQ(same.metrics_json, t.metrics_json);
    }
  }

  std::string dir_, store_;
};

TEST_F(RunCli, RunShowAndExport) {
  std::string study = write_study("demo", 8, 2);
  ASSERT_EQ(run({"run", study, "--store", store_}), 0) << err();
  EXPECT_NE(out().find("best configurations"), std::string::npos) << out();
  // The launch arguments of the trial `export` launches, once: not every listed row's.
  const std::string summary = out();
  size_t printed = 0;
  for (size_t at = summary.find("--tensor-model-parallel-size"); at != std::string::npos;
       at = summary.find("--tensor-model-parallel-size", at + 1))
    ++printed;
  EXPECT_EQ(printed, 1u) << summary;
  EXPECT_NE(summary.find("(launch arguments of another row: cotune export demo --trial N --store " + store_), std::string::npos)
      << summary;
  EXPECT_NE(out().find("store: " + store_), std::string::npos) << "the store path";
  EXPECT_NE(err().find("trial 1 ok"), std::string::npos) << "one line per trial without a terminal:\n" << err();
  EXPECT_NE(err().find("-- 8/8 trials, 0 in flight"), std::string::npos) << "the last trial is done, not in flight:\n"
                                                                         << err();
  // A line per trial names its own configuration, not the best one's again.
  std::istringstream progress(err());
  for (std::string line; std::getline(progress, line);) {
    if (line.rfind("trial ", 0) != 0) continue;
    EXPECT_EQ(line.find("[tp="), line.rfind("[tp=")) << line;
    EXPECT_NE(line.find(" | best tokens_per_s "), std::string::npos) << line;
  }

  ASSERT_EQ(run({"show", "--store", store_}), 0) << err();
  EXPECT_NE(out().find("demo"), std::string::npos);
  EXPECT_NE(out().find("finished"), std::string::npos);
  EXPECT_NE(out().find("8 ok"), std::string::npos) << out();

  ASSERT_EQ(run({"show", "demo", "--store", store_}), 0) << err();
  EXPECT_NE(out().find("TRIAL"), std::string::npos);
  EXPECT_NE(out().find("tp="), std::string::npos);
  EXPECT_EQ(trial_rows(out()), (std::vector<long>{1, 2, 3, 4, 5, 6, 7, 8})) << out();
  EXPECT_EQ(out().find("not shown"), std::string::npos) << "8 trials fit under the default limit";

  // --limit: the latest N trials; the best table still covers them all.
  ASSERT_EQ(run({"show", "demo", "--store", store_, "--limit", "3"}), 0) << err();
  EXPECT_EQ(trial_rows(out()), (std::vector<long>{6, 7, 8})) << out();
  EXPECT_NE(out().find("(5 earlier trials not shown; --limit 0 shows all 8)"), std::string::npos) << out();
  EXPECT_NE(out().find("best configurations"), std::string::npos) << out();
  ASSERT_EQ(run({"show", "demo", "--store", store_, "--limit", "0"}), 0) << err();
  EXPECT_EQ(trial_rows(out()).size(), 8u) << out();

  ASSERT_EQ(run({"export", "demo", "--format", "json", "--store", store_}), 0) << err();
  json exported = json::parse(out());
  Store store(store_);
  auto best = store.best_trial(store.find_study("demo")->id);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(config_key(exported), best->config_key);

  ASSERT_EQ(run({"export", "demo", "--format", "megatron", "--store", store_}), 0) << err();
  EXPECT_NE(out().find("--pipeline-model-parallel-size"), std::string::npos) << out();

  EXPECT_EQ(run({"export", "nosuch", "--store", store_}), 2);
  EXPECT_NE(err().find("no study named 'nosuch'"), std::string::npos) << err();
  EXPECT_EQ(run({"export", "demo", "--format", "yaml", "--store", store_}), 2);
}

// Results as data: run --json writes the run's outcome and the study (show --json's document),
// export --json the chosen trial with its configuration and rendered text.
TEST_F(RunCli, RunAndExportWriteJson) {
  const std::string study = write_study("asdata", 5, 2, "random");
  ASSERT_EQ(run({"run", study, "--store", store_, "--json"}), 0) << err();
  const json doc = json::parse(out());
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["study"]["name"], "asdata");
  EXPECT_EQ(doc["trials"].size(), 5u);
  const json& r = doc["run"];
  EXPECT_EQ(r["status"], "finished");
  EXPECT_EQ(r["interrupted"], false);
  EXPECT_EQ(r["trials_this_run"], 5);
  EXPECT_EQ(r["counted_trials"], 5);
  EXPECT_TRUE(r["recommended"].is_number_integer()) << r.dump();
  EXPECT_TRUE(fs::exists(r["report"].get<std::string>())) << r.dump();
  // cotune report writes the same file by default.
  const std::string report = r["report"].get<std::string>();
  fs::remove(report);
  ASSERT_EQ(run({"report", "asdata", "--store", store_}), 0) << err();
  EXPECT_EQ(out(), "report written to " + report + "\n");
  EXPECT_TRUE(fs::exists(report));

  ASSERT_EQ(run({"export", "asdata", "--format", "megatron", "--json", "--store", store_}), 0) << err();
  const json e = json::parse(out());
  EXPECT_EQ(e["schema_version"], 1);
  EXPECT_EQ(e["study"], "asdata");
  EXPECT_EQ(e["trial"], r["recommended"]);
  EXPECT_EQ(e["format"], "megatron");
  EXPECT_TRUE(e["config"].contains("tp")) << e.dump();
  EXPECT_NE(e["text"].get<std::string>().find("--tensor-model-parallel-size"), std::string::npos);
}

// The bash completion script, sourced by a real bash: commands, options (from each command's
// --help), formats and the studies of the store on the line.
TEST_F(RunCli, BashCompletionCompletesCommandsOptionsFormatsAndStudies) {
  ASSERT_EQ(run({"run", write_study("completed", 2, 1, "random"), "--store", store_}), 0) << err();
  ASSERT_EQ(run({"completion", "bash"}), 0) << err();
  std::ofstream(dir_ + "/completion.sh") << out();
  auto complete = [&](const std::string& words, int cword) {
    const std::string script = "source completion.sh; COMP_WORDS=(" + std::string(COTUNE_CLI) + " " + words +
                               "); COMP_CWORD=" + std::to_string(cword) + "; _cotune; echo \"${COMPREPLY[*]}\"";
    std::ofstream(dir_ + "/probe.sh") << script;
    const pid_t pid = fork();
    if (pid == 0) {
      if (chdir(dir_.c_str()) != 0 || !freopen((dir_ + "/reply").c_str(), "w", stdout)) _exit(127);
      execl("/bin/bash", "bash", "probe.sh", static_cast<char*>(nullptr));
      _exit(127);
    }
    EXPECT_EQ(wait_for(pid), 0);
    std::string reply = read_file(dir_ + "/reply");
    while (!reply.empty() && reply.back() == '\n') reply.pop_back();
    return reply;
  };
  EXPECT_EQ(complete("ex", 1), "export export-history");
  EXPECT_EQ(complete("run --q", 2), "--quiet");
  EXPECT_EQ(complete("export x --format t", 4), "torchtitan torchrec");
  EXPECT_EQ(complete("import x.log --format m", 4), "megatron-log") << "import's own formats";
  EXPECT_EQ(complete("completion ", 2), "bash zsh");
  EXPECT_EQ(complete("show --store " + store_ + " comp", 4), "completed");

  ASSERT_EQ(run({"completion", "zsh"}), 0) << err();
  EXPECT_NE(out().find("bashcompinit"), std::string::npos);
  EXPECT_EQ(run({"completion", "fish"}), 2);
  EXPECT_NE(err().find("usage: cotune completion bash|zsh"), std::string::npos) << err();
}

TEST_F(RunCli, ShowsTheRecommendedConfigurationWhenItIsNotTheBestMeasured) {
  // Noise of 30 %: with these seeds a lifted measurement tops the table while the predictor's
  // estimate ranks another measured trial first (study_loop_test checks the ranking itself).
  std::string path = write_study("noisy", 30, 3, "random");
  json doc = json::parse(read_file(path));
  doc["executor"]["options"] = {{"noise", 0.3}, {"seed", 8}};
  doc["objective"]["constraints"] = json::array({{{"metric", "peak_mem_gib"}, {"max", 60}}});
  doc["seed"] = 1;
  std::ofstream(path) << doc.dump(2);
  ASSERT_EQ(run({"run", path, "--store", store_}), 0) << err();
  const std::string summary = out();
  const size_t at = summary.find("recommended (best by the predictor's denoised estimate):\n  trial ");
  ASSERT_NE(at, std::string::npos) << summary;
  EXPECT_LT(summary.find("best configurations"), at);
  EXPECT_NE(summary.find("estimated; tp=", at), std::string::npos) << summary;
  EXPECT_NE(summary.find("--tensor-model-parallel-size", at), std::string::npos) << "its launch arguments";
  // show says it too, with the launch arguments under it alone; --json gives its seq.
  ASSERT_EQ(run({"show", "noisy", "--store", store_}), 0) << err();
  const size_t shown = out().find("recommended (best by the predictor's denoised estimate; what cotune export launches): trial ");
  ASSERT_NE(shown, std::string::npos) << out();
  EXPECT_EQ(out().find("--tensor-model-parallel-size"), out().find("--tensor-model-parallel-size", shown)) << out();
  ASSERT_EQ(run({"show", "noisy", "--store", store_, "--json"}), 0) << err();
  EXPECT_TRUE(json::parse(out())["recommended"].is_number_integer()) << out();
  // Run again once finished: the same recommendation (what export launches), not the best measured.
  ASSERT_EQ(run({"run", path, "--store", store_}), 0) << err();
  const std::string again = out();
  EXPECT_NE(again.find("had already finished"), std::string::npos) << again;
  const std::string line = summary.substr(at, summary.find('\n', summary.find("  trial ", at)) - at);
  EXPECT_NE(again.find(line.substr(0, line.find(" measured"))), std::string::npos) << again;

  // A store of its own: the noisy study's trials would otherwise seed its predictor as history.
  doc["name"] = "exact";
  doc["executor"]["options"] = {{"noise", 0}};
  std::ofstream(path) << doc.dump(2);
  ASSERT_EQ(run({"run", path, "--store", dir_ + "/exact.db"}), 0) << err();
  EXPECT_EQ(out().find("recommended"), std::string::npos) << "without noise the best measured is the recommended:\n"
                                                          << out();
}

TEST_F(RunCli, SaysWhatTheTrialsMeasuredOfTheMachine) {
  // Trials "run" on a machine whose GEMMs reach 0.45 of peak (the catalogue says 0.68 for the H100):
  // the summary gives the constant the trials determine, near the machine's, and how to keep it.
  std::string path = write_study("slowgemm", 12, 2, "random");
  json doc = json::parse(read_file(path));
  doc["executor"]["options"] = {{"noise", 0}, {"hardware", {{"gemm_efficiency_max", 0.45}}}};
  std::ofstream(path) << doc.dump(2);
  ASSERT_EQ(run({"run", path, "--store", store_, "--json"}), 0) << err();
  const json run_doc = json::parse(out())["run"];
  ASSERT_TRUE(run_doc["prior_calibration"].contains("h100-sxm")) << run_doc.dump();
  const json& fit = run_doc["prior_calibration"]["h100-sxm"];
  EXPECT_EQ(fit["trials"], 12);
  EXPECT_GT(fit["mape_before"].get<double>(), 0.15);
  EXPECT_LT(fit["held_out_mape"].get<double>(), 0.03);
  bool gemm = false;
  for (const json& c : fit["constants"]) {
    if (c["name"] != "gemm_efficiency_max") continue;
    gemm = true;
    EXPECT_NEAR(c["fitted"].get<double>(), 0.45, 0.03) << c.dump();
    EXPECT_NEAR(c["catalogue"].get<double>(), 0.68, 1e-9) << c.dump();
    EXPECT_LE(c["low"].get<double>(), c["fitted"].get<double>());
    EXPECT_GE(c["high"].get<double>(), c["fitted"].get<double>());
    EXPECT_EQ(c["at_limit"], false) << c.dump();
  }
  EXPECT_TRUE(gemm) << fit.dump();

  // The summary says it; without in-study calibration it does not.
  doc["name"] = "again";
  std::ofstream(path) << doc.dump(2);
  ASSERT_EQ(run({"run", path, "--store", dir_ + "/again.db"}), 0) << err();
  const std::string summary = out();
  const size_t at = summary.find("the machine as this workload's measured runs say");
  ASSERT_NE(at, std::string::npos) << summary;
  EXPECT_NE(summary.find("h100-sxm, 12 runs: step-time error", at), std::string::npos) << summary;
  EXPECT_NE(summary.find("gemm_efficiency_max", at), std::string::npos) << summary;
  EXPECT_NE(summary.find("cotune export-history --space llm --workload-key ", at), std::string::npos) << summary;
  // Files named after the study, not a team's runs.csv.
  EXPECT_NE(summary.find("-o again-runs.csv && cotune calibrate --runs again-runs.csv --out again-calibration.json", at),
            std::string::npos)
      << summary;
  // Trials slower than any GEMM efficiency in its range explains: the fit stops at the end of the
  // range, and the summary says so, as calibrate --runs does.
  doc["name"] = "extreme";
  doc["executor"]["options"] = {{"noise", 0}, {"hardware", {{"gemm_efficiency_max", 0.02}, {"memory_efficiency", 0.02}}}};
  std::ofstream(path) << doc.dump(2);
  ASSERT_EQ(run({"run", path, "--store", dir_ + "/extreme.db"}), 0) << err();
  EXPECT_NE(out().find("stopped at the end of its range"), std::string::npos) << out();
  doc["executor"]["options"] = {{"noise", 0}, {"hardware", {{"gemm_efficiency_max", 0.45}}}};
  // One trial cannot tell constants apart, and the summary says why.
  doc["name"] = "single";
  doc["budget"] = {{"trials", 1}};
  std::ofstream(path) << doc.dump(2);
  ASSERT_EQ(run({"run", path, "--store", dir_ + "/single.db"}), 0) << err();
  EXPECT_NE(out().find("h100-sxm, 1 run: no constant can be fitted: needs at least two measured runs, got 1"),
            std::string::npos)
      << out();
  doc["budget"] = {{"trials", 12}};
  doc["name"] = "uncalibrated";
  doc["predictor"] = {{"name", "krr"}, {"calibrate", false}};
  std::ofstream(path) << doc.dump(2);
  ASSERT_EQ(run({"run", path, "--store", dir_ + "/uncalibrated.db", "--json"}), 0) << err();
  EXPECT_TRUE(json::parse(out())["run"]["prior_calibration"].empty()) << out();
}

TEST_F(RunCli, AStudyCalibratedByARelativePathReadsBackFromTheStore) {
  // "calibration" is relative to the study file. The run applies it and stores the workload with its
  // constants; show, export and report read the study back from the store, wherever they run and
  // even after the file is gone (they read the "calibration" path against nothing, "/", before). The
  // summary measures the machine against the calibration, not the catalogue; show names it.
  const std::string study_dir = dir_ + "/studies";
  std::filesystem::create_directories(study_dir);
  std::ofstream(study_dir + "/cal.json")
      << R"({"cotune_calibration": 1, "gpus": {"h100-sxm": {"constants": {"gemm_efficiency_max": 0.45}}}})";
  json doc = json::parse(read_file(write_study("calibrated", 6, 2, "random")));
  doc["calibration"] = "cal.json";
  doc["executor"]["options"] = {{"noise", 0}, {"hardware", {{"gemm_efficiency_max", 0.45}}}};
  const std::string path = study_dir + "/calibrated.json";
  std::ofstream(path) << doc.dump(2);
  ASSERT_EQ(run({"run", path, "--store", store_}), 0) << err();
  EXPECT_NE(out().find("with the constants of " + study_dir + "/cal.json"), std::string::npos) << out();
  std::filesystem::remove(study_dir + "/cal.json");
  ASSERT_EQ(run({"show", "calibrated", "--store", store_, "--json"}), 0) << err();
  const json shown = json::parse(out());
  EXPECT_EQ(shown["study"]["name"], "calibrated");
  EXPECT_EQ(shown["trials_total"], 6);
  ASSERT_EQ(run({"show", "calibrated", "--store", store_}), 0) << err();
  EXPECT_NE(out().find(R"(calibration cal.json: {"h100-sxm":{"gemm_efficiency_max":0.45}})"), std::string::npos)
      << "show says which constants the study's model ran with:\n" << out();
  EXPECT_EQ(run({"export", "calibrated", "--store", store_}), 0) << err();
  EXPECT_EQ(run({"report", "calibrated", "--store", store_, "-o", dir_ + "/report.html"}), 0) << err();
}

TEST_F(RunCli, OneRunOfAStudyAtATime) {
  // Trials that take 0.2 s each, one at a time: the first run is still going when the second starts.
  // (40 trials, 8 s at least: long enough under the sanitizers for the second run to start meanwhile.)
  std::string path = write_study("busy", 40, 1, "random");
  json doc = json::parse(read_file(path));
  doc["executor"] = {{"name", "process"},
                     {"options", {{"command", {"/bin/sh", "-c",
                                               "sleep 0.2; echo '{{\"tokens_per_s\": {tp}}}' > \"$COTUNE_RESULT_FILE\""}}}}};
  std::ofstream(path) << doc.dump(2);
  const pid_t first = spawn({"run", path, "--store", store_});
  ASSERT_TRUE(wait_for_trials(first, "busy", 2)) << "the first run ended early:\n" << err();
  // (Its own files: the second run must not write over the first's stdout and stderr.)
  const pid_t second = cotune::testing::spawn_cotune(dir_, {"run", path, "--store", store_}, dir_ + "/out2", dir_ + "/err2");
  EXPECT_EQ(wait_for(second), 2);
  const std::string refused = read_file(dir_ + "/err2");
  EXPECT_NE(refused.find("study 'busy' is being run by pid " + std::to_string(first)), std::string::npos) << refused;
  // A refused run makes none of its components (an executor may claim a GPU or a cluster): one
  // whose executor cannot even be created is told the same.
  json unmakeable = doc;
  unmakeable["executor"]["options"]["command"] = {"/nonexistent/cotune-prog"};
  const std::string other = dir_ + "/busy-unmakeable.json";
  std::ofstream(other) << unmakeable.dump(2);
  const pid_t third = cotune::testing::spawn_cotune(dir_, {"run", other, "--store", store_}, dir_ + "/out3", dir_ + "/err3");
  EXPECT_EQ(wait_for(third), 2);
  const std::string refused3 = read_file(dir_ + "/err3");
  EXPECT_NE(refused3.find("study 'busy' is being run by pid " + std::to_string(first)), std::string::npos) << refused3;
  EXPECT_EQ(refused3.find("not executable"), std::string::npos) << refused3;
  EXPECT_EQ(wait_for(first), 0) << err();
  // Each trial ran and was stored once, by the first run.
  std::vector<TrialRecord> ts = trials("busy");
  EXPECT_EQ(ts.size(), 40u);
  std::set<std::string> keys;
  for (const TrialRecord& t : ts) {
    EXPECT_EQ(t.status, TrialStatus::kOk) << t.seq << " " << t.error.value_or("");
    keys.insert(t.config_key);
  }
  EXPECT_EQ(keys.size(), ts.size());
  // Once it has finished, the study is free again.
  EXPECT_EQ(run({"run", path, "--store", store_}), 0) << err();
  EXPECT_NE(out().find("had already finished"), std::string::npos) << out();
}

TEST_F(RunCli, SigintEndsARunWhoseExecutorHangsInACall) {
  // testecho's poll here sleeps 10 minutes whatever its timeout: a plugin call that does not return.
  std::string path = write_echo_study("hung", 4, 2, {{"hang_poll_ms", 600000}});
  const pid_t pid = spawn({"run", path, "--store", store_});
  // Once a trial is recorded, the loop soon enters the executor's poll and stays there.
  ASSERT_TRUE(wait_for_a_trial("hung")) << err();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  EXPECT_EQ(cotune::testing::wait_exit_within(pid, std::chrono::seconds(15)), 128 + SIGINT) << err();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  EXPECT_LT(took, 5.0) << "the hung call kept the run alive";
  EXPECT_NE(err().find("a plugin call has not returned"), std::string::npos) << err();
  // Nothing is lost: the trials in flight are still recorded as in flight, for the next run.
  const std::vector<TrialRecord> ts = trials("hung");
  ASSERT_FALSE(ts.empty());
  for (const TrialRecord& t : ts)
    EXPECT_TRUE(t.status == TrialStatus::kRunning || t.status == TrialStatus::kPending) << to_string(t.status);
}

TEST_F(RunCli, MetricsTheStoreCannotHoldFailTheTrialAndAStudyWithoutAnswerExitsOne) {
  // An executor's metrics: not JSON, a number beyond a double, a string where a number belongs.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"oops not json", "not valid JSON"},
      {R"({"tokens_per_s": 1e999})", "not valid JSON"},
      {R"({"tokens_per_s": "fast"})", "reported as \"fast\", not a finite number"}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = "bad-metrics-" + std::to_string(i);
    const std::string path = write_echo_study(name, 2, 1, {{"metrics_text", cases[i].first}});
    EXPECT_EQ(run({"run", path, "--store", store_}), 1) << cases[i].first << ": " << err();
    EXPECT_NE(err().find("ended without measuring a feasible configuration"), std::string::npos) << err();
    const std::vector<TrialRecord> ts = trials(name);
    ASSERT_EQ(ts.size(), 2u) << cases[i].first;
    for (const TrialRecord& t : ts) {
      EXPECT_TRUE(is_finished(t.status)) << to_string(t.status);
      EXPECT_NE(t.error.value_or("").find(cases[i].second), std::string::npos) << t.error.value_or("");
    }
    // A trial that reported its objective as text is ok, infeasible: the summary says which.
    EXPECT_EQ(out().find("trials: 2 ok (2 of the ok ones infeasible)") != std::string::npos, i == 2) << out();
    // The finished study answers the same when run again.
    EXPECT_EQ(run({"run", path, "--store", store_}), 1) << err();
  }
  // A study that measured a feasible configuration exits 0.
  EXPECT_EQ(run({"run", write_study("good", 2, 1, "random"), "--store", store_}), 0) << err();
}

TEST_F(RunCli, AStatusNoAbiDefinesFailsTheTrialNotTheRun) {
  // A plugin's poll answers status 42: each such trial fails, naming the executor and the status;
  // before, the whole run stopped with the trials left interrupted.
  const std::string path = write_echo_study("status42", 4, 1, {{"status", 42}});
  EXPECT_EQ(run({"run", path, "--store", store_}), 1) << err();
  const std::vector<TrialRecord> ts = trials("status42");
  ASSERT_EQ(ts.size(), 3u) << "three alike failures stop the study";
  for (const TrialRecord& t : ts) {
    EXPECT_EQ(t.status, TrialStatus::kFailed) << to_string(t.status);
    EXPECT_NE(t.error.value_or("").find("the executor 'testecho' reported an unknown trial status 42"), std::string::npos)
        << t.error.value_or("");
  }
  // A metric under another name: the trial says what it did report.
  const std::string renamed = write_echo_study("renamed", 1, 1, {{"metrics_text", R"({"tokens_s": 5})"}});
  EXPECT_EQ(run({"run", renamed, "--store", store_}), 1) << err();
  ASSERT_EQ(trials("renamed").size(), 1u);
  const std::string why = trials("renamed").front().error.value_or("");
  EXPECT_NE(why.find("the objective metric 'tokens_per_s' was not reported (the trial reported: tokens_s)"),
            std::string::npos) << why;
}

TEST_F(RunCli, APluginThatFailsToStartIsNamedWithTheStudyFileField) {
  // A plugin whose constructor throws a std::exception (a bug, not bad options): exit 1, said with
  // the study file and the field it was made from, as bad options are (those exit 2).
  const std::string path = write_echo_study("nostart", 2, 1, {{"throw_in_create", true}});
  EXPECT_EQ(run({"run", path, "--store", store_}), 1) << err();
  EXPECT_NE(err().find("nostart.json: /executor/options: the plugin could not start: "
                       "org.cotune.test.executor.testecho: create refused: asked to"),
            std::string::npos)
      << err();
  // Options it refuses are the study file's: exit 2, said the same way.
  const std::string typo = write_echo_study("typo", 2, 1, {{"throw_in_creat", true}});
  EXPECT_EQ(run({"run", typo, "--store", store_}), 2) << err();
  EXPECT_NE(err().find("typo.json: /executor/options: "), std::string::npos) << err();
  // So is a command they name that does not exist (the process executor's NOT_FOUND).
  const std::string nocmd = write_study("nocmd", 2, 1, "random");
  json doc = json::parse(read_file(nocmd));
  doc["executor"] = {{"name", "process"}, {"options", {{"command", {"no-such-program-cotune"}}}}};
  std::ofstream(nocmd) << doc.dump(2);
  EXPECT_EQ(run({"run", nocmd, "--store", store_}), 2) << err();
  EXPECT_NE(err().find("nocmd.json: /executor/options: org.cotune.executor.process: process executor: command[0] 'no-such-program-cotune' is not in PATH"),
            std::string::npos) << err();
}

TEST_F(RunCli, TrialsThatFailedInAnotherStudyAreNoHistory) {
  // An executor under development fails three trials (status 3: COTUNE_STATUS_FAILED); a later study of the same workload neither
  // counts them as earlier runs nor leaves their configurations out of its search.
  const std::string broken = write_echo_study("broken", 3, 1, {{"status", 3}});
  EXPECT_EQ(run({"run", broken, "--store", store_}), 1) << err();
  ASSERT_EQ(trials("broken").size(), 3u);
  const std::string later = write_echo_study("later", 2, 1, json::object());
  ASSERT_EQ(run({"run", later, "--store", store_}), 0) << err();
  EXPECT_EQ(err().find("earlier runs of this workload"), std::string::npos) << err();
  // A measured trial of another study is history.
  const std::string third = write_echo_study("third", 1, 1, json::object());
  ASSERT_EQ(run({"run", third, "--store", store_}), 0) << err();
  EXPECT_NE(err().find("history: 2 earlier runs of this workload seed the predictor"), std::string::npos) << err();
}

TEST_F(RunCli, APluginCallPastItsDeadlineStopsTheStudyNamingThePluginAndTheCall) {
  std::string path = write_study("late", 4, 2, "random");
  json doc = json::parse(read_file(path));
  doc["executor"] = {{"name", "testecho"}, {"options", {{"hang_poll_ms", 600000}}}};
  doc["plugin_paths"] = {COTUNE_BINARY_DIR "/lib/cotune/test-plugins"};
  doc["deadlines"] = {{"executor", 1}};
  std::ofstream(path) << doc.dump(2);
  const pid_t pid = spawn({"run", path, "--store", store_});
  EXPECT_EQ(cotune::testing::wait_exit_within(pid, std::chrono::seconds(30)), 3) << err();
  EXPECT_NE(err().find("the executor 'org.cotune.test.executor.testecho' has been in its poll call"), std::string::npos) << err();
  EXPECT_NE(err().find("past its deadline of 1 s"), std::string::npos) << err();
  {
    Store store(store_);
    EXPECT_EQ(store.find_study("late")->status, StudyStatus::kStopped) << "nothing runs it any more";
  }
  const std::vector<TrialRecord> ts = trials("late");
  ASSERT_FALSE(ts.empty());
  for (const TrialRecord& t : ts)
    EXPECT_TRUE(t.status == TrialStatus::kRunning || t.status == TrialStatus::kPending) << to_string(t.status);
}

// `cotune run STUDY 2>&1 | head`: the reader goes away and writes to stdout and stderr fail. The
// run goes on to the end of its budget and leaves the study finished, not recorded as running.
TEST_F(RunCli, AClosedStdoutPipeDoesNotLeaveTheStudyRunning) {
  const std::string path = write_study("piped", 12, 1, "random");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = cotune::testing::spawn_cotune(dir_, {"run", path, "--store", store_}, dir_ + "/stdout",
                                                  dir_ + "/stderr", [&fds] {
                                                    ::dup2(fds[1], 1);
                                                    ::dup2(fds[1], 2);
                                                    ::close(fds[0]);
                                                    ::close(fds[1]);
                                                    return 0;
                                                  });
  ::close(fds[0]);  // no reader: every write to the run's stdout fails
  ::close(fds[1]);
  EXPECT_EQ(cotune::testing::wait_exit_within(pid, std::chrono::seconds(120)), 0);
  Store store(store_);
  const std::optional<StudyRecord> study = store.find_study("piped");
  ASSERT_TRUE(study);
  EXPECT_EQ(study->status, StudyStatus::kFinished) << to_string(study->status);
  EXPECT_EQ(finished(trials("piped")), 12u);
}

TEST_F(RunCli, CotuneStoreSetsTheDefaultStoreOfEveryCommand) {
  const std::string path = write_study("elsewhere", 2, 1, "random");
  const std::string store = dir_ + "/team.db";
  auto with_env = [&store] { return ::setenv("COTUNE_STORE", store.c_str(), 1); };
  auto run_env = [&](const std::vector<std::string>& args) {
    return cotune::testing::wait_exit(
        cotune::testing::spawn_cotune(dir_, args, dir_ + "/stdout", dir_ + "/stderr", with_env));
  };
  ASSERT_EQ(run_env({"run", path}), 0) << err();
  EXPECT_TRUE(fs::exists(store));
  EXPECT_FALSE(fs::exists(dir_ + "/cotune.db")) << "the default store was used instead";
  ASSERT_EQ(run_env({"show", "elsewhere"}), 0) << err();
  EXPECT_NE(out().find("elsewhere"), std::string::npos) << out();
  ASSERT_EQ(run_env({"export", "elsewhere", "--format", "megatron"}), 0) << err();
  // --store still wins.
  EXPECT_EQ(run_env({"show", "elsewhere", "--store", dir_ + "/missing.db"}), 1);
}

TEST_F(RunCli, SimulatedTrialsLeaveNoEmptyDirectories) {
  ASSERT_EQ(run({"run", write_study("tidy", 4, 2, "random"), "--store", store_}), 0) << err();
  EXPECT_FALSE(fs::exists(dir_ + "/cotune-runs")) << "empty trial directories were left";
}

// A misspelt metric in the objective or a constraint is refused before any trial runs (it would
// otherwise run the whole budget with every trial infeasible), with the name it resembles.
TEST_F(RunCli, AMisspeltMetricIsRefusedBeforeAnyTrial) {
  const std::string path = write_study("typo", 6, 1, "random");
  json doc = json::parse(read_file(path));
  // Writes the study file as `doc` now stands and runs it.
  auto run_doc = [&] {
    std::ofstream(path) << doc.dump(2);
    return run({"run", path, "--store", store_});
  };
  doc["objective"]["metric"] = "tokens_per_sec";
  EXPECT_EQ(run_doc(), 2) << err();
  EXPECT_NE(err().find("/objective/metric: the executor 'sim' reports no metric \"tokens_per_sec\" (did you mean "
                       "\"tokens_per_s\"?)"),
            std::string::npos)
      << err();
  EXPECT_TRUE(trials("typo").empty()) << "no trial may run";

  // A table of step times asked for a throughput: the step time ranks one workload alike.
  std::ofstream(dir_ + "/steps.csv") << "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,"
                                        "step_time_s\n1,1,32,1,1,1,1,1,full,false,32,h100-sxm,256,1.2\n";
  doc["objective"]["metric"] = "tokens_per_s";
  doc["executor"] = {{"name", "replay"}, {"options", {{"file", dir_ + "/steps.csv"}}}};
  EXPECT_EQ(run_doc(), 2) << err();
  EXPECT_NE(err().find("reports no metric \"tokens_per_s\"; it reports step_time_s, replay_rows (for one workload, "
                       "step_time_s minimized ranks the configurations as tokens_per_s maximized does)"),
            std::string::npos)
      << err();
  doc["executor"] = {{"name", "sim"}, {"options", {{"noise", 0.05}}}};

  // A constraint, with an executor that reports what its jobs write: checked against the space.
  doc["objective"] = {{"metric", "val_loss"},
                      {"direction", "minimize"},
                      {"constraints", json::array({{{"metric", "peak_mem_gb"}, {"max", 70}}})}};
  doc["executor"] = {{"name", "process"},
                     {"options", {{"command", {"/bin/sh", "-c", "printf '{{\"val_loss\": 2}}' > \"$COTUNE_RESULT_FILE\""}}}}};
  EXPECT_EQ(run_doc(), 2) << err();
  EXPECT_NE(err().find("/objective/constraints/0/metric: \"peak_mem_gb\" is not a metric of the space 'llm' (did you "
                       "mean \"peak_mem_gib\"?)"),
            std::string::npos)
      << err();
  EXPECT_TRUE(trials("typo").empty());

  // A metric of the jobs' own, far from the space's names, runs.
  doc["objective"].erase("constraints");
  doc["budget"] = {{"trials", 2}};
  EXPECT_EQ(run_doc(), 0) << err();
  EXPECT_EQ(finished(trials("typo")), 2u);

  // One the jobs never write: the study stops after three trials instead of spending its budget.
  doc["name"] = "unwritten";
  doc["objective"]["metric"] = "accuracy";
  doc["budget"] = {{"trials", 10}};
  EXPECT_EQ(run_doc(), 1) << err();
  EXPECT_NE(err().find("3 trials in a row finished without reporting the objective metric 'accuracy'"),
            std::string::npos)
      << err();
  EXPECT_EQ(finished(trials("unwritten")), 3u);

  // The jobs print their metric, but the executor's metrics_regex never matches it: the same.
  doc["name"] = "unmatched";
  doc["objective"]["metric"] = "step_time_s";
  doc["executor"] = {{"name", "process"},
                     {"options",
                      {{"command", {"/bin/echo", "step_time 1.5"}},
                       {"result_file", false},
                       {"metrics_regex", {{"step_time_s", "step time: ([0-9.]+)"}}}}}};
  EXPECT_EQ(run_doc(), 1) << err();
  EXPECT_NE(err().find("3 trials in a row finished without reporting the objective metric 'step_time_s'"),
            std::string::npos)
      << err();
  EXPECT_NE(err().find("The last trial: metric 'step_time_s': /step time: ([0-9.]+)/ matched no line of"),
            std::string::npos)
      << err();
  const std::vector<TrialRecord> unmatched = trials("unmatched");
  ASSERT_EQ(unmatched.size(), 3u);
  for (const TrialRecord& t : unmatched) EXPECT_EQ(t.status, TrialStatus::kFailed);

  // A bound the model expects no configuration to meet, and the first trials do break: three trials.
  doc["name"] = "unmeetable";
  doc["objective"] = {{"metric", "tokens_per_s"},
                      {"direction", "maximize"},
                      {"constraints", json::array({{{"metric", "peak_mem_gib"}, {"max", 1}}})}};
  doc["executor"] = {{"name", "sim"}, {"options", {{"noise", 0.05}}}};
  EXPECT_EQ(run_doc(), 1) << err();
  EXPECT_NE(err().find("3 trials in a row broke peak_mem_gib"), std::string::npos) << err();
  EXPECT_NE(err().find("check the bound"), std::string::npos) << err();
  EXPECT_EQ(finished(trials("unmeetable")), 3u);
  doc["objective"] = {{"metric", "step_time_s"}, {"direction", "minimize"}};

  // A job that fails every configuration alike (a broken launcher): three trials, not the budget.
  doc["name"] = "broken";
  doc["executor"] = {{"name", "process"},
                     {"options", {{"command", {"/bin/sh", "-c", "echo 'launcher: no such partition' >&2; exit 3"}}}}};
  EXPECT_EQ(run_doc(), 1) << err();
  EXPECT_NE(err().find("3 trials in a row failed alike, and none of this run succeeded: "), std::string::npos) << err();
  EXPECT_NE(err().find("launcher: no such partition"), std::string::npos) << err();
  EXPECT_NE(err().find("trial 3 failed"), std::string::npos) << "the last trial is announced before the stop:\n" << err();
  EXPECT_EQ(finished(trials("broken")), 3u);
}

// One file named from two directories is one source: the second import adds nothing.
TEST_F(RunCli, AFileImportedUnderAnotherSpellingOfItsPathIsAlreadyInTheStore) {
  fs::create_directories(dir_ + "/team/sub");
  std::ofstream(dir_ + "/team/runs.csv") << "preset,global_batch,gpu,gpus,tp,pp,dp,micro_batch,zero,recompute,tokens_per_s\n"
                                            "llama3-8b,256,h100-sxm,32,1,1,32,1,1,selective,1e5\n";
  ASSERT_EQ(run({"import", dir_ + "/team/runs.csv", "--space", "llm", "--store", store_}), 0) << err();
  EXPECT_NE(out().find("1 imported"), std::string::npos) << out();
  // The workload each key stands for, whole numbers as integers.
  EXPECT_NE(out().find("\"cluster\":{\"gpu\":\"h100-sxm\",\"nodes\":4}"), std::string::npos) << out();
  EXPECT_EQ(out().find(".0,"), std::string::npos) << out();
  const pid_t pid = cotune::testing::spawn_cotune(dir_ + "/team/sub", {"import", "../runs.csv", "--space", "llm", "--store",
                                                                      store_},
                                                  dir_ + "/stdout", dir_ + "/stderr");
  ASSERT_EQ(wait_for(pid), 0) << err();
  EXPECT_NE(out().find("0 imported, 1 already in the store"), std::string::npos) << out();
}

// Runs imported before the study: one better than any the study measures is named at the end, with
// the file and row it came from (the study does not measure it again).
TEST_F(RunCli, NamesABetterRunOfTheImportedHistory) {
  // The study's workload as a team's table says it, with a throughput no simulated trial reaches.
  std::ofstream(dir_ + "/better.csv") << "preset,global_batch,gpu,gpus,gpus_per_node,tp,pp,dp,micro_batch,zero,"
                                         "recompute,tokens_per_s\n"
                                         "llama3-8b,256,h100-sxm,32,8,1,1,32,1,1,selective,1e9\n";
  ASSERT_EQ(run({"import", dir_ + "/better.csv", "--space", "llm", "--store", store_}), 0) << err();
  ASSERT_EQ(run({"run", write_study("second", 4, 1, "random"), "--store", store_}), 0) << err();
  EXPECT_NE(out().find("the store's imported history holds a better measurement of this workload: "), std::string::npos)
      << out();
  EXPECT_NE(out().find("better.csv row 2, tokens_per_s 1.000e+09, {\"tp\":1,"), std::string::npos) << out();
  // The study's workload key (what show prints) exports the imported run too, beside its trials.
  ASSERT_EQ(run({"show", "second", "--store", store_, "--json"}), 0) << err();
  const std::string key = json::parse(out())["study"]["workload_key"].get<std::string>();
  ASSERT_EQ(run({"export-history", "--workload-key", key, "--store", store_}), 0) << err();
  EXPECT_NE(out().find("better.csv,2,"), std::string::npos) << out();  // its source and row
  EXPECT_NE(out().find("study:second"), std::string::npos) << out();
}

// `cotune show --json`: the documented fields, with their types (docs/show-json.md).
TEST_F(RunCli, ShowJsonWritesTheDocumentedSchema) {
  ASSERT_EQ(run({"run", write_study("data", 4, 1, "random"), "--store", store_}), 0) << err();
  ASSERT_EQ(run({"show", "--store", store_, "--json"}), 0) << err();
  const json list = json::parse(out());
  EXPECT_EQ(list["schema_version"], 1);
  ASSERT_EQ(list["studies"].size(), 1u);
  const json& s = list["studies"][0];
  EXPECT_EQ(s["name"], "data");
  EXPECT_EQ(s["status"], "finished");
  EXPECT_EQ(s["trials"], 4);
  EXPECT_EQ(s["trials_by_status"]["ok"], 4);
  EXPECT_EQ(s["metric"], "tokens_per_s");
  EXPECT_TRUE(s["best"].is_number());

  ASSERT_EQ(run({"show", "data", "--store", store_, "--json", "--limit", "3"}), 0) << err();
  const json one = json::parse(out());
  EXPECT_EQ(one["schema_version"], 1);
  EXPECT_EQ(one["study"]["name"], "data");
  EXPECT_EQ(one["study"]["executor"], "sim");
  EXPECT_EQ(one["study"]["objectives"][0]["metric"], "tokens_per_s");
  EXPECT_EQ(one["trials_total"], 4);
  ASSERT_EQ(one["trials"].size(), 3u) << "--limit applies";
  EXPECT_EQ(one["trials"][0]["seq"], 2) << "the latest trials, oldest first";
  for (const json& t : one["trials"]) {
    EXPECT_EQ(t["status"], "ok");
    EXPECT_TRUE(t["config"].is_object());
    EXPECT_TRUE(t["config"].contains("tp"));
    EXPECT_TRUE(t["metrics"]["tokens_per_s"].is_number());
    EXPECT_EQ(t["objective"], t["metrics"]["tokens_per_s"]);
    EXPECT_TRUE(t["predicted"].is_number());
    EXPECT_TRUE(t["note"].is_null());
  }
  ASSERT_FALSE(one["best"].empty());
  EXPECT_TRUE(one["best"][0].is_number_integer());
  ASSERT_TRUE(one.contains("recommended"));
  EXPECT_TRUE(one["recommended"].is_null() || one["recommended"].is_number_integer()) << one["recommended"];
}

// `cotune plugins --json`: every component found, and every library refused with why.
TEST_F(RunCli, PluginsJsonListsComponentsAndRefusals) {
  fs::create_directories(dir_ + "/more");
  std::ofstream(dir_ + "/more/libcotune-broken.so") << "not a shared library";
  ASSERT_EQ(run({"plugins", "--json", "--path", COTUNE_BINARY_DIR "/lib/cotune/test-plugins", "--path", dir_ + "/more"}), 0)
      << err();
  const json doc = json::parse(out());
  EXPECT_EQ(doc["schema_version"], 1);
  bool sim = false, echo = false;
  for (const json& c : doc["components"]) {
    EXPECT_TRUE(c["kind"].is_string() && c["id"].is_string() && c["abi"].is_string() && c["file"].is_string()) << c;
    sim |= c["id"] == "org.cotune.executor.sim";
    echo |= c["id"] == "org.cotune.test.executor.testecho";
  }
  EXPECT_TRUE(sim && echo) << doc.dump(2);
  bool broken = false;
  for (const json& r : doc["refused"])
    broken |= r["file"].get<std::string>().find("libcotune-broken.so") != std::string::npos && !r["reason"].get<std::string>().empty();
  EXPECT_TRUE(broken) << doc["refused"].dump(2);
}

// plugins check puts a searcher through propose/observe on a built-in space: the bundled ones pass,
// one that proposes the same configuration again is unusable.
TEST_F(RunCli, PluginsCheckExercisesASearcher) {
  for (const char* s : {"random", "reinforce", "evolution", "exhaustive"}) {
    const std::string lib = std::string(COTUNE_PLUGIN_DIR) + "/libcotune-searcher-" + s + ".so";
    ASSERT_EQ(run({"plugins", "check", lib}), 0) << s << "\n" << out() << err();
    EXPECT_NE(out().find("propose/observe ok on a built-in space"), std::string::npos) << out();
  }
  const std::string repeat = COTUNE_BINARY_DIR "/lib/cotune/test-plugins/libcotune-searcher-testrepeat.so";
  EXPECT_EQ(run({"plugins", "check", repeat}), 1) << out();
  EXPECT_NE(out().find("FAILED: propose returned a configuration already proposed"), std::string::npos) << out();
  EXPECT_NE(out().find(": unusable"), std::string::npos) << out();
  // cotune run drops what such a searcher proposes again, and says so once a run.
  const std::string path = write_study("repeats", 5, 1, "testrepeat");
  json doc = json::parse(read_file(path));
  doc["plugin_paths"] = {COTUNE_BINARY_DIR "/lib/cotune/test-plugins"};
  std::ofstream(path) << doc.dump(2);
  run({"run", path, "--store", store_});
  const std::string said = err();
  const size_t first = said.find("the searcher 'testrepeat' proposed a configuration already measured or proposed");
  EXPECT_NE(first, std::string::npos) << said;
  EXPECT_NE(said.find("cotune plugins check refuses one that does not"), std::string::npos) << said;
  EXPECT_EQ(said.find("the searcher 'testrepeat' proposed", first + 1), std::string::npos) << "said once:\n" << said;
}

// plugins check with a workload exercises what a study calls on a space: a well-formed space
// passes; one whose features, parameters or workload a study would trip over is unusable, and the
// check names the defect.
TEST_F(RunCli, PluginsCheckRefusesASpaceAStudyWouldTripOver) {
  const std::string lib = COTUNE_BINARY_DIR "/lib/cotune/test-plugins/libcotune-space-testgrid.so";
  const std::string workload = dir_ + "/workload.json";
  std::ofstream(workload) << "{}";
  ASSERT_EQ(run({"plugins", "check", lib, "--workload", workload}), 0) << out() << err();
  EXPECT_NE(out().find("featurize(64 configurations) into 6 features: ok"), std::string::npos) << out();
  const std::vector<std::pair<std::string, std::string>> defects = {
      {"features", "featurize(64 configurations) into 7 features: FAILED: value 7 of configuration 1 was not written"},
      {"duplicate_name", "FAILED: parameter 6 has the name of parameter 1 ('a')"},
      {"default", "FAILED: parameter 5 'e' has the default 0, outside its domain"},
      {"nothing_valid", "FAILED: sample() gave no configuration"},
      {"features_overrun", "into 6 features: FAILED: it wrote past the 384 values its 6 feature names ask for"},
      {"featurize_error", "into 6 features: FAILED: featurize answered an error: "}};
  for (const auto& [defect, said] : defects) {
    EXPECT_EQ(run({"plugins", "check", lib, "--workload", workload, "--options", "{\"defect\": \"" + defect + "\"}"}), 1)
        << defect << "\n" << out();
    EXPECT_NE(out().find(said), std::string::npos) << defect << "\n" << out();
    EXPECT_NE(out().find(": unusable"), std::string::npos) << out();
  }
  // Options that are not JSON are refused as such, before any plugin reads them.
  EXPECT_EQ(run({"plugins", "check", lib, "--workload", workload, "--options", "defect=features"}), 2) << out() << err();
  EXPECT_NE(err().find("--options: expected a JSON object, got 'defect=features'"), std::string::npos) << err();
  // A library no plugin directory would find by its name passes, and is told so.
  fs::copy_file(lib, dir_ + "/grid.so");
  EXPECT_EQ(run({"plugins", "check", dir_ + "/grid.so"}), 0) << out();
  EXPECT_NE(out().find("note: a plugin directory is searched for libcotune-*.so files only: as 'grid.so'"),
            std::string::npos) << out();
}

// A space that needs a workload field the study file lacks (cotune::json_number's NOT_FOUND) is a
// bad study file: exit 2, naming the file, /workload and the field.
TEST_F(RunCli, AWorkloadFieldTheSpaceNeedsIsNamedWithTheStudyFile) {
  const std::string path = write_grid_study("needs", {{"name", "testgrid"}, {"options", {{"needs", "/global_batch_size"}}}});
  EXPECT_EQ(run({"run", path, "--store", store_}), 2) << err();
  EXPECT_NE(err().find(path + ": /workload or /space/options: the space 'testgrid' refused them:"), std::string::npos) << err();
  EXPECT_NE(err().find("/global_batch_size"), std::string::npos) << err();
}

// A space that does not lower has no analytic prior: the run says so, and show and the report say
// the prior the study file asks for is not used, rather than naming it as if it were.
TEST_F(RunCli, ShowSaysAPriorTheSpaceCannotGiveIsNotUsed) {
  const std::string path = write_grid_study("nolower", "testgrid");
  json doc = json::parse(read_file(path));
  doc["predictor"] = {{"name", "krr"}, {"prior", "analytic"}};
  std::ofstream(path) << doc.dump(2);
  ASSERT_EQ(run({"run", path, "--store", store_}), 0) << err();
  const std::string why = "not used: the space 'testgrid' does not lower configurations to step traces";
  ASSERT_EQ(run({"show", "nolower", "--store", store_}), 0) << err();
  EXPECT_NE(out().find("predictor krr (prior analytic, " + why + ")"), std::string::npos) << out();
  ASSERT_EQ(run({"report", "nolower", "--store", store_, "--out", dir_ + "/r.html"}), 0) << err();
  EXPECT_NE(read_file(dir_ + "/r.html").find("krr (prior analytic, not used: the space "), std::string::npos);
}

// A process executor whose command names a parameter the space lacks stops the run before any
// trial: exit 2, the study file, the option and the parameter it most likely means.
TEST_F(RunCli, ACommandPlaceholderTheSpaceLacksStopsTheRunBeforeAnyTrial) {
  const std::string path = write_grid_study("placeholder", "testgrid");
  json doc = json::parse(read_file(path));
  doc["executor"] = {{"name", "process"}, {"options", {{"command", {"/bin/echo", "{a}", "--b={bb}"}}}}};
  std::ofstream(path) << doc.dump(2);
  EXPECT_EQ(run({"run", path, "--store", store_}), 2) << err();
  EXPECT_NE(err().find(path + ": /executor/options: "), std::string::npos) << err();
  EXPECT_NE(err().find("command[2]: placeholder {bb} names no parameter of the space (did you mean {b}?)"),
            std::string::npos)
      << err();
  EXPECT_EQ(err().find("trial 1"), std::string::npos) << err();
}

// An objective the performance model does not estimate (a table's own column) has no analytic
// prior either: show says so.
TEST_F(RunCli, ShowSaysTheAnalyticPriorIsNotUsedForAMetricTheModelDoesNotEstimate) {
  std::string table = read_file(COTUNE_SOURCE_DIR "/examples/replay/runs.csv");
  const size_t column = table.find(",tflops_per_gpu,");
  ASSERT_NE(column, std::string::npos);
  table.replace(column, std::string(",tflops_per_gpu,").size(), ",throughput_score,");
  std::ofstream(dir_ + "/runs.csv") << table;
  json doc = json::parse(read_file(COTUNE_SOURCE_DIR "/examples/replay/study.json"));
  doc["name"] = "own-metric";
  doc["executor"]["options"] = {{"file", dir_ + "/runs.csv"}, {"metrics", {{"throughput_score", "throughput_score"}}}};
  doc["objective"] = {{"metric", "throughput_score"}, {"direction", "maximize"}};
  doc["budget"] = {{"trials", 4}, {"max_unavailable", 200}};
  const std::string path = dir_ + "/own-metric.json";
  std::ofstream(path) << doc.dump(2);
  ASSERT_EQ(run({"run", path, "--store", store_}), 0) << err();
  ASSERT_EQ(run({"show", "own-metric", "--store", store_}), 0) << err();
  EXPECT_NE(out().find("(prior analytic, not used: the performance model does not estimate the metric "
                       "'throughput_score')"),
            std::string::npos)
      << out();
}

// A plugin name nothing answers to is the study file's mistake: its field, the closest name and the
// names there are.
TEST_F(RunCli, AMisspeltPluginNameIsNamedWithItsFieldAndTheClosestName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"space", "/space: no space plugin named 'lmm' (did you mean \"llm\"?) (available: "},
      {"searcher", "/searcher: no searcher plugin named 'reinforc' (did you mean \"reinforce\"?) (available: "},
      {"executor", "/executor: no executor plugin named 'simm' (did you mean \"sim\"?) (available: "},
      {"predictor", "/predictor: no predictor plugin named 'krrr' (did you mean \"krr\"?) (available: "}};
  for (const auto& [field, said] : cases) {
    const std::string path = write_study("misspelt-" + field, 2, 1);
    json doc = json::parse(read_file(path));
    if (field == "space") doc["space"] = "lmm";
    if (field == "searcher") doc["searcher"] = "reinforc";
    if (field == "executor") doc["executor"]["name"] = "simm";
    if (field == "predictor") doc["predictor"] = "krrr";
    std::ofstream(path) << doc.dump(2);
    EXPECT_EQ(run({"run", path, "--store", store_}), 2) << field << "\n" << err();
    EXPECT_NE(err().find(path + ": " + said), std::string::npos) << err();
  }
}

TEST_F(RunCli, PluginsCheckCreatesAnExecutorWithTheOptionsGiven) {
  // The replay executor needs its table: without options its refusal is a usable answer; with
  // them it is created, and a refusal of the options given fails the check.
  const std::string lib = std::string(COTUNE_PLUGIN_DIR) + "/libcotune-executor-replay.so";
  ASSERT_EQ(run({"plugins", "check", lib}), 0) << out() << err();
  EXPECT_NE(out().find("create answered an error object (options needed)"), std::string::npos) << out();
  std::ofstream(dir_ + "/runs.csv") << "tp,step_time_s\n1,2.5\n";
  ASSERT_EQ(run({"plugins", "check", lib, "--options", json({{"file", dir_ + "/runs.csv"}}).dump()}), 0) << out() << err();
  EXPECT_NE(out().find("create/destroy ok, capacity 64"), std::string::npos) << out();
  // What the host found of the optional entry points (a C++ member of another signature is not).
  EXPECT_NE(out().find("optional entry points: attach yes (a restarted host re-attaches to running jobs), "
                       "candidates yes, metrics yes, check_study no"),
            std::string::npos)
      << out();
  EXPECT_EQ(run({"plugins", "check", lib, "--options", json({{"file", dir_ + "/missing.csv"}}).dump()}), 1) << out();
  EXPECT_NE(out().find("FAILED: "), std::string::npos) << out();
  EXPECT_NE(out().find("missing.csv"), std::string::npos) << out();
}

TEST_F(RunCli, PluginsCheckSubmitsOneTrialToAnExecutorWithSubmit) {
  // --submit: the executor runs one trial of a built-in space to its end, and an answer no host can
  // use fails the check, rather than a study's trials.
  const std::string echo = COTUNE_BINARY_DIR "/lib/cotune/test-plugins/libcotune-executor-testecho.so";
  ASSERT_EQ(run({"plugins", "check", echo, "--submit"}), 0) << out() << err();
  EXPECT_NE(out().find("submit/poll ok: one trial of the built-in space ({\"a\": "), std::string::npos) << out();
  EXPECT_NE(out().find("ended ok in "), std::string::npos) << out();
  EXPECT_NE(out().find("metrics: config, tokens_per_s"), std::string::npos) << out();
  EXPECT_EQ(run({"plugins", "check", echo, "--submit", "--options", R"({"status": 42})"}), 1) << out();
  EXPECT_NE(out().find("FAILED: poll answered status 42, which no ABI defines"), std::string::npos) << out();
  EXPECT_EQ(run({"plugins", "check", echo, "--submit", "--options", R"({"metrics_text": "oops"})"}), 1) << out();
  EXPECT_NE(out().find("FAILED: poll answered metrics that are not a JSON object: oops"), std::string::npos) << out();
  EXPECT_EQ(run({"plugins", "check", echo, "--submit", "--submit-timeout", "0.3", "--options", R"({"delay_ms": 30000})"}),
            1)
      << out();
  EXPECT_NE(out().find("did not end within 0.3 s; it was cancelled"), std::string::npos) << out();
  // A poll that answers an error object fails the check (a study's trial would fail).
  EXPECT_EQ(run({"plugins", "check", echo, "--submit", "--options", R"({"fail_poll": true})"}), 1) << out();
  EXPECT_NE(out().find("FAILED: poll answered an error object (a study's trial would fail): "
                       "org.cotune.test.executor.testecho: poll: lost track of the job (asked to)"),
            std::string::npos)
      << out();
  // A poll that does not return cannot be cancelled: the check stops, failed, naming the call.
  EXPECT_EQ(run({"plugins", "check", echo, "--submit", "--submit-timeout", "0.3", "--options", R"({"hang_poll_ms": 60000})"}),
            1)
      << out();
  EXPECT_NE(out().find("FAILED: org.cotune.test.executor.testecho's poll call did not return within 5.3 s"),
            std::string::npos)
      << out();
  // An error object from submit is an answer the host handles: the replay executor's table knows
  // nothing of the built-in space.
  std::ofstream(dir_ + "/runs.csv") << "tp,step_time_s\n1,2.5\n";
  ASSERT_EQ(run({"plugins", "check", std::string(COTUNE_PLUGIN_DIR) + "/libcotune-executor-replay.so", "--submit",
                 "--options", json({{"file", dir_ + "/runs.csv"}}).dump()}),
            0)
      << out();
  EXPECT_NE(out().find("submit answered an error object (the study's trial would be unavailable)"), std::string::npos)
      << out();
  // Without --submit nothing is submitted; an executor that needs step traces is not submitted to.
  ASSERT_EQ(run({"plugins", "check", echo, "--options", R"({"status": 42})"}), 0) << out();
  ASSERT_EQ(run({"plugins", "check", std::string(COTUNE_PLUGIN_DIR) + "/libcotune-executor-sim.so", "--submit"}), 0) << out();
  EXPECT_NE(out().find("submit skipped: the executor needs step traces"), std::string::npos) << out();
}

TEST_F(RunCli, PluginsCheckExercisesASpaceOnAWorkload) {
  std::ofstream(dir_ + "/w.json") << R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 256},
                                         "cluster": {"gpu": "h100-sxm", "nodes": 2}})";
  ASSERT_EQ(run({"plugins", "check", std::string(COTUNE_PLUGIN_DIR) + "/libcotune-space-llm.so", "--workload",
                 dir_ + "/w.json"}),
            0)
      << out() << err();
  EXPECT_NE(out().find("every sampled configuration is valid and reads back from its JSON, and lowered to a step "
                       "trace (64)"),
            std::string::npos)
      << out();
  // testlower's lower() refuses half of its configurations: the check finds it.
  EXPECT_EQ(run({"plugins", "check", COTUNE_BINARY_DIR "/lib/cotune/test-plugins/libcotune-space-testlower.so",
                 "--workload", dir_ + "/w.json"}),
            1)
      << out();
  EXPECT_NE(out().find("mode=broken: org.cotune.test.space.testlower: testlower refuses mode 'broken' by design"),
            std::string::npos)
      << out();
  EXPECT_NE(out().find(": unusable"), std::string::npos) << out();
  // A workload the space refuses fails the check.
  std::ofstream(dir_ + "/typo.json") << R"({"model": {"preset": "llama3-8b"}, "training": {"global_bach": 256},
                                            "cluster": {"gpu": "h100-sxm", "nodes": 2}})";
  EXPECT_EQ(run({"plugins", "check", std::string(COTUNE_PLUGIN_DIR) + "/libcotune-space-llm.so", "--workload",
                 dir_ + "/typo.json"}),
            1)
      << out();
  EXPECT_NE(out().find("FAILED: create refused the workload: "), std::string::npos) << out();
  EXPECT_NE(out().find("workload/training/global_ba"), std::string::npos) << out();
}

TEST_F(RunCli, SaysWhenAnotherStudyOfTheWorkloadMeasuredBetter) {
  // A study does not measure again what the store has measured for its workload: a second study of
  // it (a new name) can end below the first one's best, and the summary says where the better one is.
  ASSERT_EQ(run({"run", write_study("first", 6, 1, "random"), "--store", store_}), 0) << err();
  json doc = json::parse(read_file(write_study("second", 1, 1, "random")));
  doc["seed"] = 11;
  std::ofstream(dir_ + "/second.json") << doc.dump(2);
  ASSERT_EQ(run({"run", dir_ + "/second.json", "--store", store_}), 0) << err();
  auto best = [&](const std::string& study) {
    double b = 0;
    for (const TrialRecord& t : trials(study)) b = std::max(b, t.objective.value_or(0));
    return b;
  };
  // With these seeds the second study's one trial is below the first's best: the message is due.
  ASSERT_GT(best("second"), 0);
  ASSERT_GT(best("first"), best("second"));
  const bool said = out().find("the store holds a better measurement of this workload: study 'first'") != std::string::npos;
  EXPECT_EQ(said, best("first") > best("second")) << out();
  EXPECT_EQ(out().find("cotune export first --trial") != std::string::npos, said) << out();
}

TEST_F(RunCli, AStudyWithNothingLeftToMeasureNamesTheStoresBest) {
  // Two studies of one table of runs, the second optimising the step time: the first measured every
  // configuration the table holds, so the second runs none. The summary names the first one's best
  // (the step time derived from the table's throughput); the study itself has no trial to export.
  std::ofstream(dir_ + "/runs.csv") << "tp,pp,dp,cp,ep,micro_batch,vpp,zero,recompute,sp,gpus,gpu,global_batch,"
                                       "seq_len,tokens_per_s\n"
                                       "1,1,32,1,1,1,1,1,selective,false,32,h100-sxm,256,8192,400000\n"
                                       "2,1,16,1,1,1,1,1,selective,true,32,h100-sxm,256,8192,500000\n"
                                       "1,1,32,1,1,1,1,1,selective,false,32,h100-sxm,512,8192,450000\n";
  json doc = json::parse(read_file(write_study("throughput", 5, 1, "random")));
  doc["executor"] = {{"name", "replay"}, {"options", {{"file", dir_ + "/runs.csv"}}}};
  std::ofstream(dir_ + "/throughput.json") << doc.dump(2);
  ASSERT_EQ(run({"run", dir_ + "/throughput.json", "--store", store_}), 0) << err();
  doc["name"] = "step";
  doc["objective"] = {{"metric", "step_time_s"}, {"direction", "minimize"}};
  std::ofstream(dir_ + "/step.json") << doc.dump(2);
  EXPECT_EQ(run({"run", dir_ + "/step.json", "--store", store_}), 1) << err();
  EXPECT_NE(err().find("study 'step' ran no trial: the store had measured every configuration"), std::string::npos)
      << err();
  EXPECT_NE(out().find("trials: no trials"), std::string::npos) << out();
  EXPECT_NE(out().find("the store holds a better measurement of this workload: study 'throughput', trial "),
            std::string::npos)
      << out();
  EXPECT_NE(out().find("step_time_s 4.194"), std::string::npos) << out();  // 256 x 8192 / 500,000

  // A study whose trials all came back unavailable did run trials: that is said as a failure to
  // measure, not as a store that had measured everything.
  doc["name"] = "nothing";
  doc["executor"]["options"] = {{"file", dir_ + "/runs.csv"}, {"restrict_search", false}, {"where", {{"global_batch", 512}}}};
  doc["budget"] = {{"trials", 5}, {"max_unavailable", 2}};
  std::ofstream(dir_ + "/nothing.json") << doc.dump(2);
  EXPECT_EQ(run({"run", dir_ + "/nothing.json", "--store", store_}), 1) << err();
  EXPECT_NE(err().find("ended without measuring a feasible configuration"), std::string::npos) << err();
}

TEST_F(RunCli, StoreDeleteRemovesAStudyNoRunIsWorkingOn) {
  ASSERT_EQ(run({"run", write_study("gone", 3, 1, "random"), "--store", store_}), 0) << err();
  ASSERT_EQ(run({"run", write_study("kept", 2, 1, "random"), "--store", store_}), 0) << err();
  // A run working on a study keeps it.
  std::string path = write_echo_study("busy", 2, 1, {{"delay_ms", 60000}});
  const pid_t busy = spawn({"run", path, "--store", store_});
  ASSERT_TRUE(wait_for_a_trial("busy")) << err();
  const std::vector<std::string> refused = {"store", "delete", "busy", "--store", store_};
  const int refused_status = wait_for(cotune::testing::spawn_cotune(dir_, refused, dir_ + "/out2", dir_ + "/err2"));
  EXPECT_EQ(refused_status, 2) << read_file(dir_ + "/err2");
  EXPECT_NE(read_file(dir_ + "/err2").find("is being run by pid " + std::to_string(busy)), std::string::npos)
      << read_file(dir_ + "/err2");
  ASSERT_EQ(::kill(busy, SIGKILL), 0);
  EXPECT_EQ(wait_for(busy), 128 + SIGKILL);

  ASSERT_EQ(run({"store", "delete", "gone", "--store", store_}), 0) << err();
  EXPECT_NE(out().find("deleted study 'gone'"), std::string::npos) << out();
  EXPECT_NE(out().find("3 trial(s)"), std::string::npos) << out();
  Store store(store_);
  EXPECT_FALSE(store.find_study("gone").has_value());
  EXPECT_TRUE(store.find_study("kept").has_value());
  EXPECT_EQ(trials("kept").size(), 2u);
  // The killed run's study has no live holder now: it can go too.
  EXPECT_EQ(run({"store", "delete", "busy", "--store", store_}), 0) << err();
  EXPECT_EQ(run({"store", "delete", "gone", "--store", store_}), 2);
  EXPECT_NE(err().find("no study named 'gone'"), std::string::npos) << err();
  // The name is free again: a new study of that name starts from nothing.
  ASSERT_EQ(run({"run", write_study("gone", 1, 1, "random"), "--store", store_}), 0) << err();
  EXPECT_EQ(trials("gone").size(), 1u);
}

TEST_F(RunCli, AConfigurationTheSpaceCannotLowerFailsItsTrialNotTheStudy) {
  // testlower's lower() refuses half of its eight configurations.
  json doc = {{"name", "lowering"},
              {"workload", json::object()},
              {"space", "testlower"},
              {"searcher", "random"},
              {"executor", "sim"},
              {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
              {"budget", {{"trials", 8}}},
              {"parallel", 1},
              {"plugin_paths", {COTUNE_BINARY_DIR "/lib/cotune/test-plugins"}}};
  std::ofstream(dir_ + "/lowering.json") << doc.dump(2);
  ASSERT_EQ(run({"run", dir_ + "/lowering.json", "--store", store_}), 0) << err();
  int ok = 0, failed = 0;
  for (const TrialRecord& t : trials("lowering")) {
    const bool broken = json::parse(t.config_json)["mode"] == "broken";
    EXPECT_EQ(t.status, broken ? TrialStatus::kFailed : TrialStatus::kOk) << t.config_json;
    const bool said = t.error.value_or("").find("could not lower this configuration to a step trace: ") != std::string::npos;
    EXPECT_EQ(said, broken) << t.error.value_or("");
    ok += t.status == TrialStatus::kOk;
    failed += t.status == TrialStatus::kFailed;
  }
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(failed, 4);
  // Run on with a larger budget: the failed trials are read back (their GPUs asked of the space,
  // which refuses them again), and the study ends with nothing left to measure.
  doc["budget"]["trials"] = 10;
  std::ofstream(dir_ + "/lowering.json") << doc.dump(2);
  EXPECT_EQ(run({"run", dir_ + "/lowering.json", "--store", store_}), 0) << err();
  EXPECT_EQ(trials("lowering").size(), 8u);
}

TEST_F(RunCli, ALibraryOfTheStudysPluginPathsThatIsNotUsedIsSaid) {
  // A rebuilt copy of a plugin whose id an earlier directory already provides is refused: the study
  // says so instead of running the other build silently.
  fs::create_directories(dir_ + "/rebuilt");
  fs::copy_file(COTUNE_BINARY_DIR "/lib/cotune/test-plugins/libcotune-executor-testecho.so",
                dir_ + "/rebuilt/libcotune-executor-testecho.so");
  std::string path = write_study("dup", 1, 1, "random");
  json doc = json::parse(read_file(path));
  doc["executor"] = "testecho";
  doc["plugin_paths"] = {COTUNE_BINARY_DIR "/lib/cotune/test-plugins", dir_ + "/rebuilt"};
  std::ofstream(path) << doc.dump(2);
  ASSERT_EQ(run({"run", path, "--store", store_}), 0) << err();
  EXPECT_NE(err().find("/plugin_paths: " + dir_ + "/rebuilt/libcotune-executor-testecho.so is not used: component id "
                       "'org.cotune.test.executor.testecho' is already provided by"),
            std::string::npos)
      << err();
}

TEST_F(RunCli, TwoPluginsOfOneNameAreAmbiguousNotFirstFound) {
  // Another team's executor named "testecho" beside ours: the short name is refused, naming both ids
  // and files; the id picks one.
  std::string path = write_study("ambiguous", 1, 1, "random");
  json doc = json::parse(read_file(path));
  doc["executor"] = "testecho";
  doc["plugin_paths"] = {COTUNE_BINARY_DIR "/lib/cotune/test-plugins", COTUNE_BINARY_DIR "/lib/cotune/test-plugins/other-team"};
  std::ofstream(path) << doc.dump(2);
  EXPECT_EQ(run({"run", path, "--store", store_}), 2) << err();
  EXPECT_NE(err().find("/executor: executor plugin name 'testecho' is ambiguous"), std::string::npos) << err();
  EXPECT_NE(err().find("org.cotune.test.executor.testecho ("), std::string::npos) << err();
  EXPECT_NE(err().find("com.example.executor.testecho (" COTUNE_BINARY_DIR), std::string::npos) << err();
  doc["executor"] = "com.example.executor.testecho";
  std::ofstream(path) << doc.dump(2);
  EXPECT_EQ(run({"run", path, "--store", store_}), 0) << err();
}

TEST_F(RunCli, APluginThatCrashesInProcessIsNamed) {
  // An executor run in the host's process that aborts in poll takes the run down (the signal's exit
  // status, as before), and the last line says whose call it was and how to keep the host alive.
  const std::string path = write_echo_study("crash", 2, 1, {{"abort_poll", true}});
  EXPECT_EQ(run({"run", path, "--store", store_}), 128 + SIGABRT) << err();
  EXPECT_NE(err().find("cotune: SIGABRT in the executor plugin org.cotune.test.executor.testecho during its poll call"),
            std::string::npos)
      << err();
  EXPECT_NE(err().find("\"isolation\": \"process\""), std::string::npos) << err();
}

TEST_F(RunCli, AStoreThisUserMayNotWriteIsReadNotRefused) {
  // Another user's store (a file and directory this user may not write, no -wal or -shm beside it):
  // show reads it; a run that must write says why it cannot. Run as nobody when the test is root,
  // whom permissions do not stop.
  const std::string path = write_study("owned", 2, 1, "random");
  fs::create_directories(dir_ + "/theirs");
  ASSERT_EQ(run({"run", path, "--store", dir_ + "/theirs/s.db"}), 0) << err();
  ASSERT_FALSE(fs::exists(dir_ + "/theirs/s.db-wal")) << "the run left its WAL behind";
  ::chmod(dir_.c_str(), 0755);
  ::chmod(path.c_str(), 0644);
  ::chmod((dir_ + "/theirs/s.db").c_str(), 0444);
  ::chmod((dir_ + "/theirs").c_str(), 0555);
  const auto as_another_user = []() -> int { return ::geteuid() == 0 ? ::setuid(65534) : 0; };
  const auto run_as = [&](const std::vector<std::string>& args) {
    return wait_for(cotune::testing::spawn_cotune(dir_, args, dir_ + "/stdout", dir_ + "/stderr", as_another_user));
  };
  EXPECT_EQ(run_as({"show", "--store", dir_ + "/theirs/s.db"}), 0) << err();
  EXPECT_NE(out().find("owned"), std::string::npos) << out();
  json other = json::parse(read_file(path));
  other["name"] = "other";
  std::ofstream(dir_ + "/other.json") << other.dump();
  ::chmod((dir_ + "/other.json").c_str(), 0644);
  EXPECT_EQ(run_as({"run", dir_ + "/other.json", "--store", dir_ + "/theirs/s.db"}), 1) << err();
  EXPECT_NE(err().find("store " + dir_ + "/theirs/s.db: attempt to write a readonly database (this user may not write "
                       "the store file or its directory, so it was opened read-only"),
            std::string::npos)
      << err();
  // A new store in a directory this user may not write: said so, not "no such file".
  EXPECT_EQ(run_as({"run", dir_ + "/other.json", "--store", dir_ + "/theirs/new.db"}), 1) << err();
  EXPECT_NE(err().find("cannot create it: the directory " + dir_ + "/theirs is not writable"), std::string::npos) << err();
  ::chmod((dir_ + "/theirs").c_str(), 0755);
}

TEST_F(RunCli, APluginDirectoryThatIsNotOneIsSaid) {
  // COTUNE_PLUGIN_PATH naming a directory that does not exist left a study's plugins unloaded with
  // only "no executor plugin named": the refusal now names the path.
  std::string path = write_study("missing-dir", 1, 1, "random");
  json doc = json::parse(read_file(path));
  doc["executor"] = "no-such-executor";
  std::ofstream(path) << doc.dump(2);
  const char* had = std::getenv("COTUNE_PLUGIN_PATH");
  const std::string before = had != nullptr ? had : "";
  ::setenv("COTUNE_PLUGIN_PATH", (dir_ + "/plugns").c_str(), 1);
  const int rc = run({"run", path, "--store", store_});
  if (had != nullptr) ::setenv("COTUNE_PLUGIN_PATH", before.c_str(), 1);
  else ::unsetenv("COTUNE_PLUGIN_PATH");
  EXPECT_EQ(rc, 2) << err();
  EXPECT_NE(err().find("refused " + dir_ + "/plugns: no such directory (named by COTUNE_PLUGIN_PATH)"), std::string::npos)
      << err();
}

TEST_F(RunCli, AFifoAsStudyFileIsRefusedNotWaitedOn) {
  const std::string fifo = dir_ + "/study.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const pid_t pid = spawn({"run", fifo, "--store", store_});
  const int status = cotune::testing::wait_exit_within(pid, std::chrono::seconds(20));
  EXPECT_EQ(status, 2) << "it blocked on the FIFO or failed otherwise: " << err();
  EXPECT_NE(err().find("not a regular file"), std::string::npos) << err();
}

TEST_F(RunCli, BadStudyFileExitsWithStatusTwo) {
  std::ofstream(dir_ + "/bad.json") << R"({"name": "x", "workload": {}, "objective": {"metric": "mfu",
      "direction": "maximize"}})";
  EXPECT_EQ(run({"run", dir_ + "/bad.json", "--store", store_}), 2);
  EXPECT_NE(err().find("/budget"), std::string::npos) << err();
  // An executor refusing its options is the study file's error too: the file, the field, exit 2.
  json doc = json::parse(read_file(write_study("opts", 2, 1)));
  doc["executor"] = {{"name", "sim"}, {"options", {{"noise", "lots"}}}};
  std::ofstream(dir_ + "/opts.json") << doc.dump(2);
  EXPECT_EQ(run({"run", dir_ + "/opts.json", "--store", store_}), 2);
  EXPECT_NE(err().find("opts.json: /executor/options: "), std::string::npos) << err();
  EXPECT_NE(err().find("noise"), std::string::npos) << err();
}

TEST_F(RunCli, ARunKilledButNotYetReapedDoesNotHoldItsStudy) {
  // Its parent has not waited for it yet: a zombie, which kill(pid, 0) still finds.
  std::string path = write_echo_study("zombie", 2, 1, {{"delay_ms", 1500}});
  const pid_t first = spawn({"run", path, "--store", store_});
  ASSERT_TRUE(wait_for_a_trial("zombie")) << err();
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  bool zombie = false;
  for (int i = 0; i < 250 && !zombie; ++i) {
    zombie = read_file("/proc/" + std::to_string(first) + "/stat").find(") Z ") != std::string::npos;
    if (!zombie) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(zombie) << "the killed run should wait for its parent here";
  // The next run takes the study over at once instead of calling the dead run its holder.
  EXPECT_EQ(run({"run", path, "--store", store_}), 0) << err();
  EXPECT_EQ(err().find("is being run by pid"), std::string::npos) << err();
  EXPECT_EQ(wait_for(first), 128 + SIGKILL);
}

TEST_F(RunCli, ResumesAfterKillNineWithNothingLostOrRepeated) {
  const size_t budget = 120;
  std::string study = write_study("killed", static_cast<int>(budget), 1);
  pid_t pid = spawn({"run", study, "--store", store_});
  ASSERT_TRUE(wait_for_trials(pid, "killed", 6)) << "the study ended before it could be killed:\n" << err();
  kill(pid, SIGKILL);
  ASSERT_EQ(wait_for(pid), 128 + SIGKILL);
  std::vector<TrialRecord> before = trials("killed");
  ASSERT_LT(finished(before), budget) << "the study finished before the kill";
  // The store still says running; show reads the dead run's lease and says what happened.
  ASSERT_EQ(Store(store_).find_study("killed")->status, StudyStatus::kRunning);
  ASSERT_EQ(run({"show", "killed", "--store", store_}), 0) << err();
  EXPECT_NE(out().find("study killed (interrupted)"), std::string::npos) << out();
  EXPECT_NE(out().find("its run (pid " + std::to_string(pid) + " on "), std::string::npos) << out();
  EXPECT_EQ(out().find(" running "), std::string::npos) << "no trial of a dead run is in flight:\n" << out();
  ASSERT_EQ(run({"show", "--store", store_, "--json"}), 0) << err();
  EXPECT_EQ(json::parse(out())["studies"][0]["status"], "interrupted") << out();

  ASSERT_EQ(run({"run", study, "--store", store_}), 0) << err();
  EXPECT_NE(err().find("resuming study 'killed'"), std::string::npos) << err();
  expect_complete(before, "killed", budget);
}

TEST_F(RunCli, SigintStopsWithStatus130AndTheStudyResumes) {
  const size_t budget = 120;
  std::string study = write_study("interrupted", static_cast<int>(budget), 2);
  pid_t pid = spawn({"run", study, "--store", store_});
  ASSERT_TRUE(wait_for_trials(pid, "interrupted", 4)) << err();
  kill(pid, SIGINT);
  ASSERT_EQ(wait_for(pid), 130) << err();
  EXPECT_NE(out().find("resume: cotune run"), std::string::npos) << out();
  std::vector<TrialRecord> before = trials("interrupted");
  {
    Store store(store_);
    EXPECT_EQ(store.find_study("interrupted")->status, StudyStatus::kStopped);
  }
  ASSERT_LT(finished(before), budget);

  ASSERT_EQ(run({"run", study, "--store", store_}), 0) << err();
  expect_complete(before, "interrupted", budget);
}

}  // namespace
}  // namespace cotune::core
