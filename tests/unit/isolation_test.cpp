// "isolation": "process": every kind of component answers from its child process exactly as it does
// in the host's own, a whole study gives the same trials either way, and a plugin that aborts in a
// call stops the study with a message naming it, the call and the signal, with nothing lost.
#include <cotune/core/abi/isolation.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store/store.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/cli_process.hpp"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace cotune::core {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using cotune::testing::read_file;

const char* kWorkload = R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 256},
                            "cluster": {"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8}})";

Registry plugins() {
  Registry r;
  r.load_directories({COTUNE_PLUGIN_DIR, COTUNE_BINARY_DIR "/lib/cotune/test-plugins"});
  return r;
}

TEST(Isolation, ASpaceAnswersFromItsProcessAsInTheHosts) {
  const Registry reg = plugins();
  auto here = reg.make_space("llm", kWorkload);
  auto there = reg.make_space("llm", kWorkload, "{}", Isolation::kProcess);
  ASSERT_EQ(there->num_params(), here->num_params());
  for (size_t i = 0; i < here->num_params(); ++i) {
    EXPECT_EQ(there->params()[i].name, here->params()[i].name);
    EXPECT_EQ(there->params()[i].domain(), here->params()[i].domain());
    EXPECT_EQ(there->params()[i].choices, here->params()[i].choices);
  }
  EXPECT_EQ(there->feature_names(), here->feature_names());
  EXPECT_TRUE(there->can_lower());
  EXPECT_EQ(there->metrics(), here->metrics());

  const size_t d = here->num_params(), n = 16;
  std::vector<double> a(n * d), b(n * d);
  ASSERT_EQ(here->sample(7, n, a.data()), n);
  ASSERT_EQ(there->sample(7, n, b.data()), n);
  EXPECT_EQ(a, b) << "the same seed draws the same configurations";
  std::vector<int32_t> va(n), vb(n);
  here->check(a.data(), n, va.data());
  there->check(a.data(), n, vb.data());
  EXPECT_EQ(va, vb);
  std::vector<double> fa(n * here->feature_names().size()), fb(fa.size());
  here->featurize(a.data(), n, fa.data());
  there->featurize(a.data(), n, fb.data());
  EXPECT_EQ(fa, fb);

  // The step trace crosses intact: the performance model times both the same.
  cotune_sim_result ra{}, rb{};
  ra.struct_size = rb.struct_size = sizeof ra;
  ASSERT_EQ(host_services()->simulate_trace(&here->lower(a.data()), &ra), nullptr);
  ASSERT_EQ(host_services()->simulate_trace(&there->lower(a.data()), &rb), nullptr);
  EXPECT_EQ(ra.step_time_s, rb.step_time_s);
  EXPECT_EQ(ra.peak_memory_bytes, rb.peak_memory_bytes);
  EXPECT_EQ(there->lower(a.data()).num_ops, here->lower(a.data()).num_ops);

  EXPECT_TRUE(there->set_target("megatron"));
  EXPECT_TRUE(here->set_target("megatron"));
  EXPECT_EQ(there->render(a.data(), COTUNE_RENDER_MEGATRON), here->render(a.data(), COTUNE_RENDER_MEGATRON));
  const std::string rendered = here->render(a.data(), COTUNE_RENDER_JSON);
  EXPECT_EQ(there->parse(rendered), here->parse(rendered));
  EXPECT_EQ(there->key(a.data()), here->key(a.data()));

  // The plugin's own errors come back as they are, code and message.
  try {
    there->set_target("megatron@no-such-version");
    FAIL() << "an unknown target is refused";
  } catch (const PluginError& e) {
    EXPECT_EQ(e.code(), COTUNE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("no-such-version"), std::string::npos) << e.what();
  }
}

TEST(Isolation, APredictorAndAnExecutorAnswerFromTheirProcessesAsInTheHosts) {
  const Registry reg = plugins();
  const size_t n = 24, d = 3;
  std::vector<double> x(n * d), y(n);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < d; ++j) x[i * d + j] = std::sin(0.7 * static_cast<double>(i) + static_cast<double>(j));
    y[i] = 5 + x[i * d] * 2 - x[i * d + 2];
  }
  auto here = reg.make_predictor("krr");
  auto there = reg.make_predictor("krr", "{}", Isolation::kProcess);
  here->fit(x.data(), n, d, y.data());
  there->fit(x.data(), n, d, y.data());
  std::vector<double> ma(n), mb(n), sa(n), sb(n);
  here->predict(x.data(), n, d, ma.data(), sa.data());
  there->predict(x.data(), n, d, mb.data(), sb.data());
  EXPECT_EQ(ma, mb);
  EXPECT_EQ(sa, sb);
  EXPECT_EQ(there->describe_fit(), here->describe_fit());
  ASSERT_TRUE(there->can_save());
  auto restored = reg.make_predictor("krr", "{}", Isolation::kProcess);
  restored->load(there->save());
  std::vector<double> mc(n);
  restored->predict(x.data(), n, d, mc.data());
  EXPECT_EQ(mc, ma);

  // The sim executor times a lowered configuration: the trace and the result cross both ways.
  auto space = reg.make_space("llm", kWorkload);
  std::vector<double> config(space->num_params());
  ASSERT_EQ(space->sample(3, 1, config.data()), 1u);
  const std::string config_json = space->render(config.data(), COTUNE_RENDER_JSON);
  cotune_trial trial{};
  trial.struct_size = sizeof trial;
  trial.trial_id = {"iso/1", 5};
  trial.config_json = {config_json.data(), config_json.size()};
  trial.workload_json = {kWorkload, std::strlen(kWorkload)};
  trial.workdir = {"/tmp", 4};
  trial.trace = &space->lower(config.data());
  trial.params = space->raw_params();
  trial.num_params = space->num_params();
  trial.config = config.data();
  auto run = [&](Executor& e) {
    auto job = e.submit(trial);
    TrialResult r;
    for (int i = 0; i < 1000 && !r.finished(); ++i) r = job->poll(100);
    return r;
  };
  auto ex_here = reg.make_executor("sim");
  auto ex_there = reg.make_executor("sim", "{}", Isolation::kProcess);
  EXPECT_EQ(ex_there->capacity(), ex_here->capacity());
  const TrialResult ra = run(*ex_here), rb = run(*ex_there);
  EXPECT_EQ(rb.status, COTUNE_STATUS_OK) << rb.error;
  EXPECT_EQ(rb.status, ra.status);
  EXPECT_EQ(rb.metrics_json, ra.metrics_json);
}

TEST(Isolation, ACallIntoADeadProcessIsAnErrorNamingThePluginTheCallAndTheSignal) {
  const Registry reg = plugins();
  char tmpl[] = "/tmp/cotune-iso-abort-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const json options = {{"abort_once_file", tmpl}};
  auto ex = reg.make_executor("testecho", options.dump(), Isolation::kProcess);
  auto space = reg.make_space("llm", kWorkload);
  std::vector<double> config(space->num_params());
  ASSERT_EQ(space->sample(3, 1, config.data()), 1u);
  cotune_trial trial{};
  trial.struct_size = sizeof trial;
  trial.trial_id = {"iso/1", 5};
  trial.config_json = {"{}", 2};
  trial.params = space->raw_params();
  trial.num_params = space->num_params();
  trial.config = config.data();
  auto job = ex->submit(trial);
  try {
    job->poll(0);
    FAIL() << "the plugin aborted in poll";
  } catch (const PluginError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("org.cotune.test.executor.testecho"), std::string::npos) << what;
    EXPECT_NE(what.find("SIGABRT"), std::string::npos) << what;
    EXPECT_NE(what.find("during its poll call"), std::string::npos) << what;
  }
  // The job went with its process; the executor's next call starts it again.
  EXPECT_THROW(job->poll(0), PluginError);
  EXPECT_GE(ex->capacity(), 1);
  auto again = ex->submit(trial);
  TrialResult r;
  for (int i = 0; i < 100 && !r.finished(); ++i) r = again->poll(100);
  EXPECT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
}

class IsolationCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cotune-iso-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    store_ = dir_ + "/cotune.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_study(const std::string& name, const json& changes) {
    json doc = {{"name", name},
                {"workload", json::parse(kWorkload)},
                {"searcher", "reinforce"},
                {"executor", {{"name", "sim"}, {"options", {{"noise", 0.05}}}}},
                {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
                {"budget", {{"trials", 10}}},
                {"parallel", 2},
                {"plugin_paths", {COTUNE_BINARY_DIR "/lib/cotune/test-plugins"}}};
    for (const auto& [key, value] : changes.items()) doc[key] = value;
    const std::string path = dir_ + "/" + name + ".json";
    std::ofstream(path) << doc.dump(2);
    return path;
  }

  int run(const std::vector<std::string>& args) {
    return cotune::testing::wait_exit(cotune::testing::spawn_cotune(dir_, args, dir_ + "/stdout", dir_ + "/stderr"));
  }
  std::string err() const { return read_file(dir_ + "/stderr"); }
  std::vector<TrialRecord> trials(const std::string& study) const { return cotune::testing::stored_trials(store_, study); }

  std::string dir_, store_;
};

TEST_F(IsolationCli, AStudyWithEveryPluginIsolatedRunsTheSameTrials) {
  const json isolated = {{"space", {{"name", "llm"}, {"isolation", "process"}}},
                         {"predictor", {{"name", "krr"}, {"isolation", "process"}}},
                         {"searcher", {{"name", "reinforce"}, {"isolation", "process"}}},
                         {"executor", {{"name", "sim"}, {"options", {{"noise", 0.05}}}, {"isolation", "process"}}}};
  // One study name in two stores: the sim executor's noise is seeded by the trial's id.
  const std::string here = dir_ + "/here.db", there = dir_ + "/there.db";
  ASSERT_EQ(run({"run", write_study("same", json::object()), "--store", here}), 0) << err();
  ASSERT_EQ(run({"run", write_study("same", isolated), "--store", there}), 0) << err();
  const std::vector<TrialRecord> a = cotune::testing::stored_trials(here, "same");
  const std::vector<TrialRecord> b = cotune::testing::stored_trials(there, "same");
  ASSERT_EQ(a.size(), 10u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].config_key, a[i].config_key) << "trial " << i + 1;
    EXPECT_EQ(b[i].metrics_json, a[i].metrics_json) << "trial " << i + 1;
    EXPECT_EQ(b[i].predicted, a[i].predicted) << "trial " << i + 1;
  }
}

TEST_F(IsolationCli, AnExecutorThatAbortsFailsItsTrialsInFlightAndTheStudyGoesOn) {
  // The executor's process aborts in one poll (the flag file exists once); without isolation that
  // would end cotune with it.
  const std::string flag = dir_ + "/abort-once";
  std::ofstream(flag) << "1";
  const json aborting = {{"executor", {{"name", "testecho"}, {"options", {{"abort_once_file", flag}}}, {"isolation", "process"}}}};
  ASSERT_EQ(run({"run", write_study("crashy", aborting), "--store", store_}), 0) << err();
  EXPECT_NE(err().find("started again"), std::string::npos) << err();
  const std::vector<TrialRecord> ts = trials("crashy");
  size_t ok = 0, failed = 0;
  for (const TrialRecord& t : ts) {
    if (t.status == TrialStatus::kOk) ++ok;
    if (t.status != TrialStatus::kFailed) continue;
    ++failed;
    const std::string error = t.error.value_or("");
    EXPECT_NE(error.find("org.cotune.test.executor.testecho"), std::string::npos) << error;
    EXPECT_NE(error.find("SIGABRT"), std::string::npos) << error;
    EXPECT_NE(error.find("during its poll call"), std::string::npos) << error;
  }
  EXPECT_GE(failed, 1u) << "the trials in flight when it aborted";
  EXPECT_EQ(ok + failed, 10u) << "the budget counts both, and the study went on to its end";
  Store store(store_);
  EXPECT_EQ(store.find_study("crashy")->status, StudyStatus::kFinished);
}

TEST_F(IsolationCli, AnExecutorThatAbortsInEveryPollStopsTheStudyAsAnyRepeatedFailure) {
  // Each trial's failure names the executor process's pid, a new one each time: the failures are
  // still alike, and the study stops after three rather than spend its budget on them.
  const json aborting = {{"executor", {{"name", "testecho"}, {"options", {{"abort_poll", true}}}, {"isolation", "process"}}},
                         {"parallel", 1},
                         {"budget", {{"trials", 20}}}};
  EXPECT_EQ(run({"run", write_study("always", aborting), "--store", store_}), 1) << err();
  EXPECT_NE(err().find("3 trials in a row failed alike"), std::string::npos) << err();
  const std::vector<TrialRecord> ts = trials("always");
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_NE(ts[0].error.value_or("").find("pid"), std::string::npos) << ts[0].error.value_or("");
  EXPECT_NE(ts[0].error, ts[1].error) << "each names its own process";
}

TEST_F(IsolationCli, AnUnknownIsolationIsRefusedNamingTheField) {
  const std::string path = write_study("bad", {{"searcher", {{"name", "random"}, {"isolation", "thread"}}}});
  EXPECT_EQ(run({"run", path, "--store", store_}), 2);
  EXPECT_NE(err().find("/searcher/isolation"), std::string::npos) << err();
  EXPECT_NE(err().find("process"), std::string::npos) << err();
}

}  // namespace
}  // namespace cotune::core
