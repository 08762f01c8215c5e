// `cotune predictor eval`: the evaluation engine on data whose answer is known by construction, and
// the command end to end on a CSV made by `cotune simulate --batch`, through the real plugins.
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/history/predictor_eval.hpp>
#include <cotune/core/registry.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

using namespace cotune::core;
using nlohmann::json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

struct CliRun {
  int status;
  std::string out;
};

CliRun cli(const std::string& args, bool with_stderr = true) {
  const std::string cmd = std::string(COTUNE_CLI) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  CliRun r{-1, ""};
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const Registry& registry() {
  static Registry r = [] {
    Registry reg;
    reg.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-llm.so");
    reg.load_file(COTUNE_PLUGIN_DIR "/libcotune-predictor-krr.so");
    return reg;
  }();
  return r;
}

const char* kWorkload = R"({"model": {"hidden": 2048, "layers": 16, "heads": 16, "vocab": 32000, "seq_len": 2048},
  "training": {"global_batch": 256, "dtype": "bf16"},
  "cluster": {"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8}})";

double model_step_time(const Space& space, const double* config) {
  cotune_sim_result r{};
  r.struct_size = sizeof r;
  perf::simulate(space.lower(config), &r);
  return r.step_time_s;
}

// Valid configurations of the workload, measured as `scale(group) x` the model's step time, grouped
// by pipeline degree.
std::vector<EvalSample> samples(const Space& space, size_t n, double (*scale)(double pp)) {
  const size_t p = space.num_params();
  std::vector<double> configs(4 * n * p);
  const size_t got = space.sample(7, 4 * n, configs.data());
  std::vector<EvalSample> out;
  for (size_t i = 0; i < got && out.size() < n; ++i) {
    const double* c = configs.data() + i * p;
    if (!space.valid(c)) continue;
    EvalSample s;
    s.space = &space;
    s.config.assign(c, c + p);
    s.measured = scale(c[1]) * model_step_time(space, c);
    s.group = "pp=" + std::to_string(c[1]);
    out.push_back(std::move(s));
  }
  return out;
}

double twice(double) { return 2.0; }

// Options for the step time these samples measure (lower is better).
EvalOptions step_time_options() {
  EvalOptions o;
  o.target = "step_time_s";
  o.minimize = true;
  return o;
}
double per_stage(double pp) { return 1.0 + 0.1 * pp; }

TEST(PredictorEval, PriorWithAConstantBiasIsExact) {
  auto space = registry().make_space("llm", kWorkload);
  const std::vector<EvalSample> data = samples(*space, 40, twice);
  ASSERT_GE(data.size(), 20u);
  EvalOptions o = step_time_options();
  o.train_rows = 5;
  o.repeats = 3;
  o.grouped = true;
  const EvalResult r = evaluate_predictor(registry(), data, o);
  // The residual log(2) is the same for every row, so the prediction is 2 x the model: exact.
  EXPECT_EQ(r.prior, Prior::kAnalytic);
  EXPECT_EQ(r.rows, data.size());
  EXPECT_EQ(r.train_rows, 5u);
  EXPECT_EQ(r.test_rows, data.size() - 5);
  EXPECT_EQ(r.kendall_tau.count, 3u);
  EXPECT_NEAR(r.kendall_tau.mean, 1.0, 1e-12);
  EXPECT_NEAR(r.spearman_rho.mean, 1.0, 1e-12);
  EXPECT_NEAR(r.mape.mean, 0.0, 1e-9);
  EXPECT_NEAR(r.r_squared.mean, 1.0, 1e-9);
  EXPECT_NEAR(r.group_top1.mean, 1.0, 1e-12);
  EXPECT_NEAR(r.group_top3.mean, 1.0, 1e-12);
  EXPECT_GE(r.groups, 1u);
}

TEST(PredictorEval, LearnsAResidualAndIsReproducible) {
  auto space = registry().make_space("llm", kWorkload);
  const std::vector<EvalSample> data = samples(*space, 60, per_stage);
  EvalOptions o = step_time_options();
  o.train_frac = 0.5;
  o.repeats = 2;
  o.seed = 3;
  const EvalResult a = evaluate_predictor(registry(), data, o);
  const EvalResult b = evaluate_predictor(registry(), data, o);
  EXPECT_EQ(a.kendall_tau.mean, b.kendall_tau.mean);
  EXPECT_EQ(a.mape.mean, b.mape.mean);
  EXPECT_GT(a.kendall_tau.mean, 0.9);
  EXPECT_LT(a.mape.mean, 10.0);

  o.prior = Prior::kNone;
  const EvalResult c = evaluate_predictor(registry(), data, o);
  EXPECT_EQ(c.prior, Prior::kNone);
  EXPECT_TRUE(std::isfinite(c.kendall_tau.mean));
  EXPECT_LE(std::fabs(c.kendall_tau.mean), 1.0);
}

TEST(PredictorEval, RooflinePriorFitsItsRatesOnTheTrainingRowsOnly) {
  // The data is the model's step time x (1 + 0.1 pp): the roofline rates, learned from 12 rows,
  // rank the held-out rows far better than the features alone (Kendall's tau 0.74 against 0.58 when
  // written).
  auto space = registry().make_space("llm", kWorkload);
  const std::vector<EvalSample> data = samples(*space, 60, per_stage);
  EvalOptions o = step_time_options();
  o.train_rows = 12;
  o.repeats = 4;
  o.prior = Prior::kNone;
  const EvalResult none = evaluate_predictor(registry(), data, o);
  o.prior = Prior::kRoofline;
  const EvalResult roofline = evaluate_predictor(registry(), data, o);
  EXPECT_EQ(roofline.prior, Prior::kRoofline);
  EXPECT_EQ(roofline.dropped, 0u);
  EXPECT_EQ(roofline.kendall_tau.count, 4u);
  EXPECT_GT(roofline.kendall_tau.mean, none.kendall_tau.mean + 0.1)
      << "roofline " << roofline.kendall_tau.mean << ", features alone " << none.kendall_tau.mean;
  // Reproducible: the rates come from each repeat's own split.
  EXPECT_EQ(evaluate_predictor(registry(), data, o).kendall_tau.mean, roofline.kendall_tau.mean);
}

TEST(PredictorEval, ClearErrors) {
  auto space = registry().make_space("llm", kWorkload);
  const std::vector<EvalSample> data = samples(*space, 10, twice);
  EvalOptions o;
  o.target = "step_time_s";
  o.train_rows = data.size() - 1;
  try {
    evaluate_predictor(registry(), data, o);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("at least 2 to test on"));
  }
  o.train_rows = 0;
  o.train_frac = 1.5;
  EXPECT_THROW(evaluate_predictor(registry(), data, o), UserError);
  o.train_frac = 0.5;
  EXPECT_THROW(evaluate_predictor(registry(), {}, o), UserError);
  o.target = "made_up_metric";
  const EvalResult r = evaluate_predictor(registry(), data, o);
  EXPECT_EQ(r.prior, Prior::kNone);
  EXPECT_THAT(r.prior_note, HasSubstr("does not estimate the metric 'made_up_metric'"));
}

class PredictorEvalCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(COTUNE_BINARY_DIR) / "test-tmp" / ("predictor_eval_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(PredictorEvalCli, EndToEndOnSimulatedRuns) {
  const std::string in = (dir_ / "grid.csv").string(), out = (dir_ / "runs.csv").string();
  {
    std::ofstream f(in);
    f << "hidden,layers,heads,global_batch,gpus,tp,pp,micro_batch,recompute\n";
    for (int gpus : {8, 16})
      for (int tp : {1, 2, 4, 8})
        for (int pp : {1, 2})
          for (int mb : {1, 2})
            for (const char* rc : {"none", "selective", "full"})
              f << "1024,8,16,64," << gpus << "," << tp << "," << pp << "," << mb << "," << rc << "\n";
  }
  CliRun sim = cli("simulate --batch " + in + " --out " + out);
  ASSERT_TRUE(sim.status == 0 || sim.status == 1) << sim.out;  // 1: some rows not ok (kept, skipped by eval)

  CliRun r = cli("predictor eval --space llm --data " + out +
                  " --target step_time_s --minimize --predictor krr --train-frac 0.5 --repeats 3 --seed 1"
                  " --group-by \"gpus, pp\" --json",
              false);
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["prior"], "analytic");
  EXPECT_EQ(j["direction"], "minimize");
  EXPECT_GE(j["rows"].get<int>(), 40);
  EXPECT_EQ(j["train_rows"].get<int>() + j["test_rows"].get<int>(), j["rows"].get<int>());
  EXPECT_GT(j["kendall_tau"]["mean"].get<double>(), 0.95);  // the data is the model: the prior explains it
  EXPECT_LT(j["mape_percent"]["mean"].get<double>(), 1.0);
  EXPECT_EQ(j["group_by"], json::array({"gpus", "pp"}));
  EXPECT_GE(j["group_top1"]["mean"].get<double>(), 0.0);
  EXPECT_LE(j["group_top1"]["mean"].get<double>(), 1.0);
  EXPECT_GE(j["group_top3"]["mean"].get<double>(), j["group_top1"]["mean"].get<double>());

  CliRun curve = cli("predictor eval --space llm --data " + out +
                      " --target step_time_s --minimize --predictor krr --prior none --repeats 1 --learning-curve --json",
                  false);
  ASSERT_EQ(curve.status, 0) << curve.out;
  const json c = json::parse(curve.out);
  EXPECT_EQ(c["prior"], "none");
  ASSERT_EQ(c["learning_curve"].size(), 6u);
  EXPECT_DOUBLE_EQ(c["learning_curve"][0]["train_frac"].get<double>(), 0.05);
  EXPECT_LT(c["learning_curve"][0]["train_rows"].get<int>(), c["learning_curve"][5]["train_rows"].get<int>());

  CliRun text = cli("predictor eval --space llm --data " + out + " --target step_time_s --predictor krr --repeats 1");
  EXPECT_EQ(text.status, 0) << text.out;
  EXPECT_THAT(text.out, HasSubstr("kendall_tau"));

  CliRun bad = cli("predictor eval --space llm --data " + out + " --target no_such_metric --predictor krr");
  EXPECT_EQ(bad.status, 2);
  EXPECT_THAT(bad.out, HasSubstr("--target 'no_such_metric'"));
  // A target one letter off names the metric the rows carry.
  CliRun typo = cli("predictor eval --space llm --data " + out + " --target step_time_sec --predictor krr");
  EXPECT_EQ(typo.status, 2);
  EXPECT_THAT(typo.out, HasSubstr("(did you mean \"step_time_s\"?); the rows measure "));
  // A calibration the prior does not use is refused, not ignored.
  CliRun unused = cli("predictor eval --space llm --data " + out +
                      " --target step_time_s --predictor krr --prior none --calibration nosuch.json");
  EXPECT_EQ(unused.status, 2);
  EXPECT_THAT(unused.out, HasSubstr("--calibration sets the analytic prior's constants; with --prior none"));
  // The JSON counts the rows left out as the text does: the simulated oom rows are not ok.
  std::ifstream simulated(out);
  int oom_rows = 0;
  for (std::string line; std::getline(simulated, line);) oom_rows += line.find(",oom,") != std::string::npos ? 1 : 0;
  EXPECT_EQ(j["left_out_not_ok"].get<int>(), oom_rows) << j.dump();
  EXPECT_EQ(j["left_out_without_target"].get<int>(), 0) << j.dump();
  CliRun bad_group = cli("predictor eval --space llm --data " + out + " --target step_time_s --predictor krr --group-by x");
  EXPECT_EQ(bad_group.status, 2);
  EXPECT_THAT(bad_group.out, HasSubstr("has no column 'x'"));
}

}  // namespace
