// Calibration of the performance model: on runs the model itself generates with known constants it
// recovers them; too few, degenerate or uninformative runs are refused with the runs named; the
// calibration file round-trips and a bad one names the field; `cotune calibrate` and
// `simulate --calibration` through the real binary.
#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/history/csv.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_process.hpp"

using namespace cotune::core;
using cotune::core::perf::CalibrationOptions;
using cotune::core::perf::CalibrationRun;
using cotune::core::perf::TraceCopy;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

constexpr const char* kPlugin = COTUNE_PLUGIN_DIR "/libcotune-space-llm.so";

struct CliResult {
  int status = -1;
  std::string out, err;
};

CliResult run_cli(const std::string& dir, const std::vector<std::string>& args) {
  using namespace cotune::testing;
  CliResult r;
  r.status = wait_exit(spawn_cotune(dir, args, dir + "/out.txt", dir + "/err.txt"));
  r.out = read_file(dir + "/out.txt");
  r.err = read_file(dir + "/err.txt");
  return r;
}

json workload(double nodes, const json& calibration = json(), const std::string& kernels = "") {
  json w = {{"model", {{"hidden", 2048}, {"layers", 16}, {"heads", 16}, {"vocab", 32000}, {"seq_len", 2048}}},
            {"training", {{"global_batch", 256}, {"dtype", "bf16"}}},
            {"cluster", {{"gpu", "h100-sxm"}, {"nodes", nodes}}}};
  if (!kernels.empty()) w["training"]["kernels"] = kernels;
  if (!calibration.is_null()) w["cluster"]["calibration"] = {{"h100-sxm", calibration}};
  return w;
}

class Calibration : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(registry_.load_file(kPlugin)); }

  // Runs over layouts of 8 to 32 GPUs: traces on the catalogue's constants, "measured" step times
  // from the model with `truth` applied.
  std::vector<CalibrationRun> runs(const json& truth, size_t limit = 40, const std::string& kernels = "") {
    std::vector<CalibrationRun> out;
    for (double nodes : {1.0, 2.0, 4.0})
      for (double tp : {1.0, 2.0, 4.0, 8.0})
        for (double pp : {1.0, 2.0})
          for (double mb : {1.0, 4.0}) {
            if (out.size() >= limit) return out;
            const json config = {{"tp", tp}, {"pp", pp}, {"micro_batch", mb}, {"sp", tp > 1}, {"zero", 1}};
            if (tp * pp > nodes * 8) continue;
            auto base = registry_.make_space("llm", workload(nodes, json(), kernels).dump(), "{}");
            auto real = registry_.make_space("llm", workload(nodes, truth, kernels).dump(), "{}");
            const std::vector<double> v = base->parse(config.dump());
            if (!base->valid(v.data())) continue;
            cotune_sim_result r{};
            r.struct_size = sizeof r;
            perf::simulate(real->lower(v.data()), &r);
            out.push_back({"run " + std::to_string(out.size() + 1), TraceCopy(base->lower(v.data())), r.step_time_s});
          }
    return out;
  }
  // The step time of a layout on a machine whose GEMMs reach 0.5 of peak: the model's own, with that
  // constant.
  double at_half_gemm(double tp, double pp, double mb, double gpus) {
    return step_time_with(tp, pp, mb, gpus, {{"gemm_efficiency_max", 0.5}});
  }
  // ... with these constants (null: the catalogue's).
  double step_time_with(double tp, double pp, double mb, double gpus, const json& constants) {
    auto s = registry_.make_space("llm", workload(std::ceil(gpus / 8), constants).dump(), "{}");
    const auto v = s->parse(json{{"tp", tp}, {"pp", pp}, {"micro_batch", mb}, {"sp", tp > 1}, {"zero", 1}, {"gpus", gpus},
                                 {"dp", gpus / (tp * pp)}}.dump());
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    perf::simulate(s->lower(v.data()), &r);
    return r.step_time_s;
  }
  // RUNS.csv of six H100 runs of that machine (lines 2-7), header included.
  static constexpr const char* kRunsHeader =
      "hidden,layers,heads,vocab,seq_len,global_batch,gpu,gpus,tp,pp,micro_batch,sp,zero,step_time_s\n";
  void write_half_gemm_runs(std::ostream& csv, const json& constants = {{"gemm_efficiency_max", 0.5}}) {
    csv << kRunsHeader;
    for (auto [tp, pp, mb, gpus] : std::vector<std::array<double, 4>>{
             {1, 1, 1, 8}, {2, 1, 2, 8}, {4, 2, 1, 16}, {8, 1, 4, 16}, {2, 2, 1, 32}, {1, 1, 4, 8}})
      csv << "2048,16,16,32000,2048,256,h100-sxm," << gpus << "," << tp << "," << pp << "," << mb << ","
          << (tp > 1 ? "true" : "false") << ",1," << step_time_with(tp, pp, mb, gpus, constants) << "\n";
  }
  Registry registry_;
};

TEST_F(Calibration, RecoversTheConstantsTheRunsWereMadeWith) {
  const json truth = {{"gemm_efficiency_max", 0.55}, {"host_launch_us", 25}, {"network_efficiency", {{"node", 0.5}}}};
  const auto rs = runs(truth);
  ASSERT_GE(rs.size(), 20u);
  CalibrationOptions options;
  options.fit = {"gemm_efficiency_max", "host_launch_us", "network_efficiency.node"};
  options.prior_sigma = 3;  // let the runs speak
  const auto result = perf::calibrate(rs, options);
  ASSERT_EQ(result.fitted.size(), 3u);
  EXPECT_EQ(result.gpu, "h100-sxm");
  EXPECT_NEAR(result.fitted[0].value, 0.55, 0.01) << result.fitted[0].name;
  EXPECT_NEAR(result.fitted[1].value, 25, 0.5) << result.fitted[1].name;
  EXPECT_NEAR(result.fitted[2].value, 0.5, 0.01) << result.fitted[2].name;
  EXPECT_NEAR(result.fitted[0].before, 0.68, 1e-9);  // the catalogue's
  for (const auto& f : result.fitted) {
    EXPECT_LE(f.low, f.value);
    EXPECT_GE(f.high, f.value);
  }
  EXPECT_GT(result.before.mape, 0.05);
  EXPECT_LT(result.after.mape, 0.001);
  EXPECT_EQ(result.folds, 5u);
  EXPECT_LT(result.held_out.mape, 0.01);
  // The file says it as GPU-description fields, and applying it reproduces the measurements.
  const json c = result.constants();
  EXPECT_NEAR(c["network_efficiency"]["node"].get<double>(), 0.5, 0.01);
  const std::vector<double> again = perf::calibrated_step_times(rs, c);
  for (size_t i = 0; i < rs.size(); ++i) EXPECT_NEAR(again[i] / rs[i].measured_step_s, 1.0, 0.002) << rs[i].label;
}

TEST_F(Calibration, SaysWhenAFitStopsAtTheEndOfTheConstantsRange) {
  // Step times half the model's: no GEMM efficiency up to 1 explains them, so the fit stops at the
  // top of its range and says so; a fit inside its range does not.
  auto rs = runs(json::object(), 20);
  ASSERT_GE(rs.size(), 10u);
  for (auto& r : rs) r.measured_step_s /= 2;
  CalibrationOptions options;
  options.fit = {"gemm_efficiency_max"};
  options.prior_sigma = 3;
  auto result = perf::calibrate(rs, options);
  ASSERT_EQ(result.fitted.size(), 1u);
  EXPECT_TRUE(result.fitted[0].at_limit) << result.fitted[0].value;
  const auto inside = perf::calibrate(runs({{"gemm_efficiency_max", 0.55}}, 20), options);
  EXPECT_FALSE(inside.fitted[0].at_limit) << inside.fitted[0].value;
}

// A PyTorch-native trainer's attention (SDPA) runs at a share of the fused kernels' rate; the
// constant fitted on its runs is the GPU's own, which applied to them (or to fused runs) is right.
TEST_F(Calibration, RunsOfSdpaAttentionFitTheGpusOwnAttentionEfficiency) {
  const auto rs = runs({{"attention_efficiency", 0.45}}, 24, "compiled");
  ASSERT_GE(rs.size(), 12u);
  CalibrationOptions options;
  options.fit = {"attention_efficiency"};
  options.prior_sigma = 3;
  const auto result = perf::calibrate(rs, options);
  ASSERT_EQ(result.fitted.size(), 1u);
  EXPECT_NEAR(result.fitted[0].before, 0.55, 1e-9);  // the catalogue's, not the SDPA share of it
  EXPECT_NEAR(result.fitted[0].value, 0.45, 0.005);
  const std::vector<double> again = perf::calibrated_step_times(rs, result.constants());
  for (size_t i = 0; i < rs.size(); ++i) EXPECT_NEAR(again[i] / rs[i].measured_step_s, 1.0, 0.002) << rs[i].label;
}

TEST_F(Calibration, ByDefaultFitsWhatTheRunsDetermineAndSaysWhatNot) {
  const auto rs = runs({{"gemm_efficiency_max", 0.6}}, 12);
  const auto result = perf::calibrate(rs, CalibrationOptions{});
  EXPECT_LT(result.after.mape, result.before.mape);
  EXPECT_LE(result.fitted.size(), rs.size() - 1);
  // bf16 runs on one node say nothing of fp8, fp4 or the island network.
  std::string not_fitted;
  for (const auto& n : result.not_fitted) not_fitted += n + "\n";
  EXPECT_THAT(not_fitted, HasSubstr("gemm_efficiency_fp8: no run's step time depends on it"));
  EXPECT_THAT(not_fitted, HasSubstr("latency_us.island"));
  for (const auto& f : result.fitted) EXPECT_NE(f.name, "gemm_efficiency_fp8");
}

TEST_F(Calibration, FitsOnlyAsManyConstantsAsLowerTheCrossValidatedError) {
  // Eight runs made with a slower GEMM: the one most telling constant explains them; the others
  // would fit nothing but their rounding. Cross-validation keeps the count small, and the fit
  // predicts runs it did not see as well as fitting every constant does.
  const auto all = runs({{"gemm_efficiency_max", 0.5}}, 40);
  ASSERT_GE(all.size(), 24u);
  const std::vector<CalibrationRun> train(all.begin(), all.begin() + 8), test(all.begin() + 8, all.end());
  const auto chosen = perf::calibrate(train, CalibrationOptions{});
  CalibrationOptions every;
  every.select = false;
  const auto full = perf::calibrate(train, every);
  ASSERT_GE(chosen.selection_error.size(), 3u) << "no choice was made";
  EXPECT_LT(chosen.fitted.size(), full.fitted.size());
  EXPECT_GE(chosen.fitted.size(), 1u);
  // The error with no constant fitted is the catalogue's (0.68 against 0.5: about 30 %); one
  // constant removes most of it.
  EXPECT_GT(chosen.selection_error[0], 0.2);
  EXPECT_LT(chosen.selection_error[1], 0.1);
  std::string not_fitted;
  for (const auto& n : chosen.not_fitted) not_fitted += n + "\n";
  EXPECT_THAT(not_fitted, HasSubstr("did not lower the cross-validated error"));
  auto held_out = [&](const perf::CalibrationResult& r) {
    const std::vector<double> t = perf::calibrated_step_times(test, r.constants());
    double e = 0;
    for (size_t i = 0; i < test.size(); ++i) e += std::fabs(t[i] / test[i].measured_step_s - 1);
    return e / double(test.size());
  };
  EXPECT_LT(held_out(chosen), 0.03);
  EXPECT_LE(held_out(chosen), held_out(full) + 0.005);

  // Runs the catalogue already explains, measured with a scatter of up to 2 %: fitting any constant
  // only fits the scatter (cross-validated error 1.35 % with none, 1.5-1.8 % with 1-8), so none is.
  const auto exact = runs(json::object(), 10);
  std::vector<CalibrationRun> noisy = exact;
  const double scatter[] = {0.02, -0.01, -0.02, 0.015, 0.0, -0.015, 0.01, 0.02, -0.02, 0.005};
  for (size_t i = 0; i < noisy.size(); ++i) noisy[i].measured_step_s *= 1 + scatter[i % 10];
  const auto none = perf::calibrate(noisy, CalibrationOptions{});
  EXPECT_TRUE(none.fitted.empty()) << none.fitted.front().name;
}

TEST_F(Calibration, AGainWithinTheRunsScatterFitsNoMoreConstants) {
  // Runs the catalogue explains, measured with 5 % log-normal noise (a fixed draw): with these, the
  // lowest held-out error comes with some constants fitted, by a margin inside the runs' scatter;
  // the one-standard-error rule keeps fewer, and what it fits stays near the catalogue.
  std::vector<CalibrationRun> rs = runs(json::object(), 24);
  ASSERT_GE(rs.size(), 20u);
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0, 0.05);
  for (CalibrationRun& r : rs) r.measured_step_s *= std::exp(noise(rng));
  const auto result = perf::calibrate(rs, CalibrationOptions{});
  ASSERT_GE(result.selection_error.size(), 3u);
  const size_t lowest = static_cast<size_t>(
      std::min_element(result.selection_error.begin(), result.selection_error.end()) - result.selection_error.begin());
  EXPECT_GT(lowest, result.fitted.size()) << "the draw no longer tempts a fit: choose another seed";
  for (const auto& f : result.fitted) EXPECT_NEAR(f.value / f.before, 1.0, 0.05) << f.name;
}

TEST_F(Calibration, FromOneRunTheUnderdeterminedFitSharesItsErrorByDependence) {
  // One run made with a slower GEMM (0.5 against the catalogue's 0.68). It cannot determine three
  // constants, and is refused as a plain fit; as the most probable constants given it (what a study
  // does from its first trial on) the error goes mostly to the constant the run depends on most, and
  // the other runs of the same machine come closer too.
  const auto rs = runs({{"gemm_efficiency_max", 0.5}}, 12);
  ASSERT_GE(rs.size(), 8u);
  CalibrationOptions options;
  options.candidates = {"gemm_efficiency_max", "host_launch_us", "network_efficiency.node"};
  options.held_out = false;
  try {
    perf::calibrate({rs[0]}, options);
    ADD_FAILURE() << "one run fitted three constants";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("needs at least two measured runs, got 1"));
  }
  options.underdetermined = true;
  const auto one = perf::calibrate({rs[0]}, options);
  EXPECT_GT(one.before.mape, 0.15);
  EXPECT_LT(one.after.mape, 0.05);
  ASSERT_FALSE(one.fitted.empty());
  double gemm_move = 0, other_move = 0;
  for (const auto& f : one.fitted) {
    const double move = std::fabs(std::log(f.value / f.before));
    if (f.name == "gemm_efficiency_max") {
      EXPECT_LT(f.value, 0.65);
      gemm_move = move;
    } else {
      other_move = std::max(other_move, move);
    }
  }
  EXPECT_GT(gemm_move, 2 * other_move);
  const std::vector<CalibrationRun> others(rs.begin() + 1, rs.end());
  const std::vector<double> before = perf::calibrated_step_times(others, json::object());
  const std::vector<double> after = perf::calibrated_step_times(others, one.constants());
  double e_before = 0, e_after = 0;
  for (size_t i = 0; i < others.size(); ++i) {
    e_before += std::fabs(std::log(before[i] / others[i].measured_step_s));
    e_after += std::fabs(std::log(after[i] / others[i].measured_step_s));
  }
  EXPECT_LT(e_after, 0.2 * e_before) << "mean |log error| " << e_after / double(others.size());

  // Two runs fit one constant, but leave none to hold out: no held-out figure rather than a zero.
  const auto two = perf::calibrate({rs[0], rs[1]}, CalibrationOptions{});
  EXPECT_EQ(two.folds, 0u);
  EXPECT_EQ(two.held_out.mape, 0.0);
}

TEST_F(Calibration, MixtureOfExpertsRunsMoveTheGroupedGemmsNotTheDenseOnes) {
  // A machine whose grouped GEMMs (the experts) reach 0.3 of a dense GEMM's efficiency (the H100
  // catalogue says 0.55), its dense
  // GEMMs what the catalogue says. Three mixture-of-experts runs of it are slower than modelled;
  // the dense GEMMs' efficiency would explain them as well as the grouped GEMMs', but only the
  // grouped one is theirs alone: it is fitted, near 0.3, and a dense model's runs on the same
  // calibration keep their step times.
  auto timed = [&](const json& model, const json& config, const json& truth) {
    json w = workload(1, truth);
    w["model"] = model;
    json base = w;
    base["cluster"].erase("calibration");
    auto s = registry_.make_space("llm", base.dump(), "{}");
    auto real = registry_.make_space("llm", w.dump(), "{}");
    const std::vector<double> v = s->parse(config.dump());
    EXPECT_TRUE(s->valid(v.data())) << config.dump();
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    perf::simulate(real->lower(v.data()), &r);
    return CalibrationRun{config.dump(), TraceCopy(s->lower(v.data())), r.step_time_s};
  };
  const json moe = {{"hidden", 2048}, {"layers", 16}, {"heads", 16}, {"vocab", 32000}, {"seq_len", 2048},
                    {"experts", 8}, {"top_k", 2}, {"expert_ffn_hidden", 4096}, {"gated_mlp", true}};
  const json truth = {{"grouped_gemm_efficiency", 0.3}};
  std::vector<CalibrationRun> moe_runs;
  for (const json& c : {json{{"ep", 8}, {"micro_batch", 1}}, json{{"ep", 4}, {"micro_batch", 2}},
                        json{{"ep", 2}, {"tp", 2}, {"sp", true}, {"micro_batch", 1}}})
    moe_runs.push_back(timed(moe, c, truth));
  const auto result = perf::calibrate(moe_runs, CalibrationOptions{});
  EXPECT_GT(result.before.mape, 0.1);
  EXPECT_LT(result.after.mape, 0.01);
  bool grouped = false;
  for (const auto& f : result.fitted) {
    if (f.name == "grouped_gemm_efficiency") {
      grouped = true;
      EXPECT_NEAR(f.value, 0.3, 0.015);
    } else {
      EXPECT_NEAR(f.value / f.before, 1.0, 0.02) << f.name;
    }
  }
  EXPECT_TRUE(grouped) << result.constants().dump();
  const json dense = workload(1)["model"];
  const CalibrationRun dense_run = timed(dense, {{"tp", 2}, {"sp", true}, {"micro_batch", 2}}, json::object());
  EXPECT_NEAR(perf::calibrated_step_times({dense_run}, result.constants())[0] / dense_run.measured_step_s, 1.0, 0.005);
}

TEST_F(Calibration, RefusesRunsThatCannotDetermineWhatIsAsked) {
  const auto rs = runs({{"gemm_efficiency_max", 0.6}}, 6);
  auto error_of = [&](const std::vector<CalibrationRun>& r, const CalibrationOptions& o) {
    try {
      perf::calibrate(r, o);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_of({rs[0]}, {}), HasSubstr("needs at least two measured runs, got 1"));
  // The same configuration three times: nothing to tell constants apart by.
  std::vector<CalibrationRun> same = {rs[0], rs[0], rs[0]};
  same[1].label = "run 7", same[2].label = "run 9";
  EXPECT_THAT(error_of(same, {}), HasSubstr("the runs (run 1, run 7, run 9) time alike in the model (one configuration"));
  CalibrationOptions fp8;
  fp8.fit = {"gemm_efficiency_fp8"};
  EXPECT_THAT(error_of(rs, fp8), HasSubstr("gemm_efficiency_fp8 cannot be fitted from these runs: no run's step time "
                                           "depends on it (run 1, run 2"));
  CalibrationOptions many;
  many.fit = {"gemm_efficiency_max", "gemm_half_efficiency_gflops", "memory_efficiency", "attention_efficiency"};
  EXPECT_THAT(error_of({rs[0], rs[1], rs[2]}, many), HasSubstr("4 constants need at least 5 distinct runs; these runs "
                                                              "have 3 (run 1, run 2, run 3)"));
  CalibrationOptions unknown;
  unknown.fit = {"gemm_efficiency"};
  EXPECT_THAT(error_of(rs, unknown), HasSubstr("unknown constant 'gemm_efficiency' (expected gemm_efficiency_max"));
  std::vector<CalibrationRun> unmeasured = rs;
  unmeasured[2].measured_step_s = 0;
  EXPECT_THAT(error_of(unmeasured, {}), HasSubstr("run 3 has no positive measured step time"));
}

TEST_F(Calibration, TheFileRoundTripsAndABadOneNamesTheField) {
  const auto rs = runs({{"gemm_efficiency_max", 0.6}}, 8);
  const json file = perf::calibration_file({perf::calibrate(rs, CalibrationOptions{})}, "runs.csv");
  cotune::testing::ScratchDir scratch("calfile");
  const std::string path = scratch.file("cal.json");
  std::ofstream(path) << file.dump(2);
  const json per_gpu = perf::read_calibration_file(path);
  EXPECT_EQ(per_gpu["h100-sxm"], file["gpus"]["h100-sxm"]["constants"]);

  auto error_of = [&](const json& j) {
    std::ofstream(path) << j.dump();
    try {
      perf::read_calibration_file(path);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_of({{"gpus", {}}}), HasSubstr("not a calibration file"));
  EXPECT_THAT(error_of({{"cotune_calibration", 2}, {"gpus", {{"h100-sxm", {{"constants", {}}}}}}}),
              HasSubstr("cotune_calibration: version 2 is not one this cotune reads"));
  EXPECT_THAT(error_of({{"cotune_calibration", 1}, {"gpus", {{"h100-sxm", {{"constants", {{"gemm_efficiency_max", 2}}}}}}}}),
              HasSubstr("/gpus/h100-sxm/constants/gemm_efficiency_max: 2 is out of range [0.001, 1.0]"));
  EXPECT_THAT(error_of({{"cotune_calibration", 1}, {"gpus", {{"h100-sxm", {{"constants", {{"speed", 2}}}}}}}}),
              HasSubstr("/gpus/h100-sxm/constants/speed: unknown GPU field"));
  // A field the format does not have would read as applied: refused, with the name it resembles.
  EXPECT_THAT(error_of({{"cotune_calibration", 1}, {"gpu", file["gpus"]}}),
              HasSubstr(path + "/gpu: unknown field (did you mean \"gpus\"?) (expected cotune_calibration, source, gpus)"));
  json extra = file;
  extra["gpus"]["h100-sxm"]["constantss"] = {{"gemm_efficiency_max", 0.4}};
  EXPECT_THAT(error_of(extra), HasSubstr(path + "/gpus/h100-sxm/constantss: unknown field (did you mean \"constants\"?)"));
  extra = file;
  extra["note"] = "tuned by hand";
  EXPECT_THAT(error_of(extra), HasSubstr(path + "/note: unknown field"));
  // What `calibrate --gpu` writes reads back: the file the H200's microbenchmarks fitted.
  const json gpu_file = perf::read_calibration_file(COTUNE_SOURCE_DIR "/docs/benchmarks/cuda/h200-calibrated-2026-11-26.json");
  EXPECT_FALSE(gpu_file.empty());
  try {
    perf::read_calibration_file(scratch.path());
    ADD_FAILURE() << "a directory was read as a calibration file";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(scratch.path() + ": a directory, not a calibration file"));
  }
}

// Through the real binary: calibrate a CSV of runs, then simulate with the file.
TEST_F(Calibration, CommandLineCalibratesAndSimulateAppliesIt) {
  cotune::testing::ScratchDir scratch("calibrate");
  const std::string dir = scratch.path();
  // Step times as if GEMMs ran at 0.5 of peak.
  std::ofstream csv(dir + "/runs.csv");
  write_half_gemm_runs(csv);
  csv.close();
  CliResult r = run_cli(dir, {"calibrate", "--runs", dir + "/runs.csv", "--out", dir + "/cal.json", "--fit",
                             "gemm_efficiency_max"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("h100-sxm: 6 runs"));
  EXPECT_THAT(r.out, HasSubstr("gemm_efficiency_max"));
  EXPECT_THAT(r.out, HasSubstr("held out (5-fold"));
  const json cal = json::parse(std::ifstream(dir + "/cal.json"));
  EXPECT_NEAR(cal["gpus"]["h100-sxm"]["constants"]["gemm_efficiency_max"].get<double>(), 0.5, 0.01);

  // --rows: each run's measured step time beside the model's, before and after the fit.
  r = run_cli(dir, {"calibrate", "--runs", dir + "/runs.csv", "--out", dir + "/cal2.json", "--fit",
                    "gemm_efficiency_max", "--rows", dir + "/rows.csv"});
  ASSERT_EQ(r.status, 0) << r.err;
  const cotune::core::CsvTable rows = cotune::core::read_csv_file(dir + "/rows.csv");
  EXPECT_EQ(rows.header, (std::vector<std::string>{"run", "gpu", "measured_step_time_s", "model_step_time_s",
                                                   "calibrated_step_time_s", "model_error", "calibrated_error",
                                                   "configuration"}));
  for (const auto& row : rows.rows) {
    const std::vector<std::string>& cell = row.fields;
    ASSERT_EQ(cell.size(), 8u);
    EXPECT_EQ(cell[1], "h100-sxm");
    EXPECT_LT(std::stod(cell[5]), -0.1) << "the catalogue's faster GEMMs: the model is too fast, " << cell[0];
    EXPECT_LT(std::fabs(std::stod(cell[6])), 0.02) << cell[0];
    EXPECT_NEAR(std::stod(cell[3]) / std::stod(cell[2]) - 1, std::stod(cell[5]), 1e-4);
    // The run named by its layout as well as its line.
    const json config = json::parse(cell[7]);
    EXPECT_TRUE(config.contains("tp") && config.contains("micro_batch")) << cell[7];
  }
  EXPECT_EQ(rows.rows.size(), 6u);
  EXPECT_EQ(rows.rows[0].fields[0], "line 2");
  // A run's own name, where a column holds one, comes beside its line.
  {
    std::ifstream in(dir + "/runs.csv");
    std::ofstream named(dir + "/named.csv");
    std::string line;
    for (int i = 0; std::getline(in, line); ++i) named << line << (i == 0 ? ",name" : ",\"gpt, tp" + std::to_string(i) + "\"") << "\n";
  }
  r = run_cli(dir, {"calibrate", "--runs", dir + "/named.csv", "--out", dir + "/cal4.json", "--fit",
                    "gemm_efficiency_max", "--rows", dir + "/named_rows.csv"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(cotune::core::read_csv_file(dir + "/named_rows.csv").rows[0].fields[0], "line 2 (gpt, tp1)");

  // --json: the calibration and each fit's figures as one document.
  r = run_cli(dir, {"calibrate", "--runs", dir + "/runs.csv", "--fit", "gemm_efficiency_max", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["calibration"]["gpus"]["h100-sxm"]["constants"], cal["gpus"]["h100-sxm"]["constants"]);
  ASSERT_EQ(doc["fits"].size(), 1u);
  EXPECT_EQ(doc["fits"][0]["gpu"], "h100-sxm");
  EXPECT_EQ(doc["fits"][0]["runs"], 6);
  EXPECT_EQ(doc["fits"][0]["fitted"][0]["name"], "gemm_efficiency_max");
  EXPECT_LT(doc["fits"][0]["after"]["mape"].get<double>(), doc["fits"][0]["before"]["mape"].get<double>());
  EXPECT_EQ(doc["fits"][0]["folds"], 5);

  // simulate --batch with the file reproduces the "measured" times; without it, the catalogue's.
  std::ofstream(dir + "/one.csv") << "hidden,layers,heads,vocab,seq_len,global_batch,gpus,tp,sp,zero\n"
                                     "2048,16,16,32000,2048,256,8,2,true,1\n";
  r = run_cli(dir, {"simulate", "--batch", dir + "/one.csv", "--calibration", dir + "/cal.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const double calibrated = std::stod(r.out.substr(r.out.find("ok,") + 3));
  r = run_cli(dir, {"simulate", "--batch", dir + "/one.csv"});
  const double catalogue = std::stod(r.out.substr(r.out.find("ok,") + 3));
  EXPECT_NEAR(calibrated / at_half_gemm(2, 1, 1, 8), 1.0, 0.01);
  EXPECT_LT(catalogue, calibrated);
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  // A file with no constants for the GPU simulated changes nothing, and says so.
  std::ofstream(dir + "/a100.csv") << "hidden,layers,heads,vocab,seq_len,global_batch,gpu,gpus,tp,sp,zero\n"
                                      "2048,16,16,32000,2048,256,a100-80gb,8,2,true,1\n"
                                      "2048,16,16,32000,2048,256,a100-80gb,8,1,false,1\n";
  r = run_cli(dir, {"simulate", "--batch", dir + "/a100.csv", "--calibration", dir + "/cal.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: the calibration has no constants for a100-80gb (first on line 2); the "
                               "catalogue's are used for it"));
  EXPECT_EQ(r.err.find("warning"), r.err.rfind("warning")) << "once per GPU:\n" << r.err;
  // An entry where nothing was fitted changes nothing either.
  std::ofstream(dir + "/empty.json") << R"({"cotune_calibration": 1, "gpus": {"h100-sxm": {"constants": {}}}})";
  r = run_cli(dir, {"simulate", "--batch", dir + "/one.csv", "--calibration", dir + "/empty.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: the calibration has no constants for h100-sxm (first on line 2)"));
  std::ofstream(dir + "/w.json") << workload(1.0).dump();
  std::ofstream(dir + "/c.json") << R"({"tp": 2, "sp": true})";
  json a100 = workload(1.0);
  a100["cluster"]["gpu"] = "a100-80gb";
  std::ofstream(dir + "/a100.json") << a100.dump();
  r = run_cli(dir, {"simulate", "--workload", dir + "/a100.json", "--config", dir + "/c.json", "--calibration",
                    dir + "/cal.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("cal.json' has no constants for a100-80gb (it has some for h100-sxm); the catalogue's are used"));
  EXPECT_EQ(r.out.find("calibration "), std::string::npos) << "nothing applied, nothing named:\n" << r.out;
  r = run_cli(dir, {"simulate", "--workload", dir + "/w.json", "--config", dir + "/c.json", "--calibration",
                    dir + "/cal.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  // The answer names what calibrated it.
  EXPECT_THAT(r.out, HasSubstr("calibration     " + dir + "/cal.json: {\"gemm_efficiency_max\":0.5"));
  r = run_cli(dir, {"simulate", "--workload", dir + "/w.json", "--config", dir + "/c.json", "--calibration",
                    dir + "/cal.json", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json simulated = json::parse(r.out);
  EXPECT_EQ(simulated["calibration"]["file"], dir + "/cal.json");
  EXPECT_EQ(simulated["calibration"]["constants"], cal["gpus"]["h100-sxm"]["constants"]);

  // A bad cell names its line and column, a layout the space refuses its line; such a row is left out,
  // and the one run left cannot be fitted alone (exit 2, as nothing is written).
  std::ofstream(dir + "/bad.csv") << "hidden,layers,heads,global_batch,gpus,tp,step_time_s\n"
                                     "2048,16,16,256,8,1,1.5\n2048,16,16,256,8,x,1.5\n";
  r = run_cli(dir, {"calibrate", "--runs", dir + "/bad.csv"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("bad.csv: line 3: column tp: expected a number, got 'x'"));
  std::ofstream(dir + "/badstep.csv") << "hidden,layers,heads,global_batch,gpus,tp,step_time_s\n"
                                         "2048,16,16,256,8,1,1.5\n2048,16,16,256,8,2,fast\n";
  r = run_cli(dir, {"calibrate", "--runs", dir + "/badstep.csv"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("badstep.csv: line 3: column step_time_s: "));
  std::ofstream(dir + "/refused.csv") << "hidden,layers,heads,global_batch,gpus,tp,step_time_s\n"
                                         "2048,16,16,256,8,32,1.5\n";
  r = run_cli(dir, {"calibrate", "--runs", dir + "/refused.csv"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("refused.csv: line 2"));
  r = run_cli(dir, {"calibrate", "--runs", dir + "/runs.csv", "--fit", "gemm_efficiency_fp8"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("gemm_efficiency_fp8 cannot be fitted from these runs"));
  // More runs than the library's message lists: the whole list stands in for the shortened one, once.
  std::ofstream many(dir + "/many.csv");
  many << "preset,gpu,gpus,global_batch,micro_batch,zero,recompute,step_time_s\n";
  for (int i = 1; i <= 10; ++i) many << "llama3-8b,h100-sxm,8," << 16 * i << ",1,1,full," << 0.5 * i << "\n";
  many.close();
  r = run_cli(dir, {"calibrate", "--runs", dir + "/many.csv", "--fit", "gemm_efficiency_fp8"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("no run's step time depends on it (line 2, line 3, line 4, line 5, line 6, line 7, "
                               "line 8, line 9, line 10, line 11)\n"));
  EXPECT_THAT(r.err, Not(HasSubstr(" more")));
  // A held-out error needs two folds at least; 0 asks for none.
  r = run_cli(dir, {"calibrate", "--runs", dir + "/runs.csv", "--folds", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("calibrate: --folds: expected 0 (no held-out error) or at least 2 folds, got 1"));
  r = run_cli(dir, {"calibrate", "--runs", dir + "/runs.csv", "--folds", "-3"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("got -3"));
}

// Runs the catalogue's constants already time exactly: no fit does better, the file sets nothing,
// and calibrate says that applying it changes no answer rather than inviting its use.
TEST_F(Calibration, CommandLineSaysWhenTheFileItWritesChangesNothing) {
  cotune::testing::ScratchDir scratch("calibrate-nothing");
  const std::string dir = scratch.path();
  std::ofstream csv(dir + "/runs.csv");
  write_half_gemm_runs(csv, json());
  csv.close();
  CliResult r = run_cli(dir, {"calibrate", "--runs", dir + "/runs.csv", "--out", dir + "/cal.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("it sets no constant"), HasSubstr("changes no answer")));
  EXPECT_THAT(r.out, Not(HasSubstr("apply it with")));
  EXPECT_TRUE(json::parse(std::ifstream(dir + "/cal.json"))["gpus"]["h100-sxm"]["constants"].empty());
  // simulate with it says it sets nothing (not that it has constants for no GPU).
  std::ofstream(dir + "/w.json") << R"({"model": {"hidden": 2048, "layers": 16, "heads": 16, "vocab": 32000, "seq_len": 2048},
                                       "training": {"global_batch": 256}, "cluster": {"gpu": "h100-sxm", "nodes": 1}})";
  std::ofstream(dir + "/c.json") << R"({"tp": 2})";
  r = run_cli(dir, {"simulate", "--workload", dir + "/w.json", "--config", dir + "/c.json", "--calibration",
                    dir + "/cal.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("sets no constants (its runs determined none); the catalogue's are used"));
  // A file that does set a constant is offered for use.
  std::ofstream half(dir + "/half.csv");
  write_half_gemm_runs(half);
  half.close();
  r = run_cli(dir, {"calibrate", "--runs", dir + "/half.csv", "--out", dir + "/cal2.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("apply it with"), Not(HasSubstr("it sets no constant"))));
  EXPECT_THAT(r.out, Not(HasSubstr("moved by a factor")));  // 0.68 -> 0.5 is a machine's difference
  // Runs whose GEMMs reach a quarter of the peak fit, and the summary doubts them: an efficiency that
  // moves by a factor of 2.7 is more often a misread column than the hardware.
  std::ofstream quarter(dir + "/quarter.csv");
  write_half_gemm_runs(quarter, {{"gemm_efficiency_max", 0.25}});
  quarter.close();
  r = run_cli(dir, {"calibrate", "--runs", dir + "/quarter.csv", "--out", dir + "/cal3.json", "--fit",
                    "gemm_efficiency_max"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("warning: gemm_efficiency_max moved by a factor of 2.7 from the catalogue's (0.68 -> "));
}

// What a user is most likely to get wrong on the command line is refused or said, not ignored: an
// option of the other mode, --fit with --all-constants, a --map name misspelt, a unit off by 1,000
// (the fit cannot find the machine), too few runs to hold any out, and simulate's --out without --batch.
TEST_F(Calibration, CommandLineRefusesWhatItWouldIgnoreAndSaysWhatItCannotDo) {
  cotune::testing::ScratchDir scratch("calibrate-misuse");
  const std::string dir = scratch.path();
  std::ostringstream runs;
  write_half_gemm_runs(runs);
  std::ofstream(dir + "/runs.csv") << runs.str();
  const std::string csv = dir + "/runs.csv";
  CliResult r = run_cli(dir, {"calibrate", "--runs", csv, "--fit", "gemm_efficiency_max", "--all-constants"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("--fit names the constants to fit and --all-constants fits every one"));
  r = run_cli(dir, {"calibrate", "--runs", csv, "--base", "h100-sxm"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("--base goes with --gpu"));
  r = run_cli(dir, {"calibrate", "--gpu", "--base", "h100-sxm", "--fit", "gemm_efficiency_max"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("--fit goes with --runs"));
  r = run_cli(dir, {"calibrate", "--runs", csv, "--gpu"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("not both"));
  r = run_cli(dir, {"calibrate", "--runs", csv, "--map", "micro_batch=micro_bach"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("--map 'micro_batch=micro_bach': 'micro_bach' is neither a column of the llm space's "
                               "table schema nor a recognised metric (did you mean \"micro_batch\"?)"));
  // Seconds in a millisecond column: a model 1,000 times off, which no constant explains.
  std::string ms = runs.str();
  ms.replace(ms.find("step_time_s\n"), 12, "step_time_ms\n");
  std::ofstream(dir + "/ms.csv") << ms;
  r = run_cli(dir, {"calibrate", "--runs", dir + "/ms.csv", "--out", dir + "/ms.json"});
  EXPECT_THAT(r.out, HasSubstr("warning: after the fit the model is still"));
  EXPECT_THAT(r.out, HasSubstr("check the measured column's unit"));
  r = run_cli(dir, {"calibrate", "--runs", csv, "--out", dir + "/cal.json", "--fit", "gemm_efficiency_max"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("warning: after the fit")));
  // Two runs: a fit, and no fold to hold out, which the summary says.
  const std::string text = runs.str();
  size_t third = text.find('\n');
  for (int i = 0; i < 2; ++i) third = text.find('\n', third + 1);  // the header and two runs
  std::ofstream(dir + "/two.csv") << text.substr(0, third + 1);
  r = run_cli(dir, {"calibrate", "--runs", dir + "/two.csv", "--out", dir + "/two.json", "--fit", "gemm_efficiency_max"});
  EXPECT_THAT(r.out, HasSubstr("h100-sxm: 2 runs")) << r.err;
  EXPECT_THAT(r.out, HasSubstr("held out: none (2 runs are too few to hold any out"));
  std::ofstream(dir + "/w.json") << R"({"model": {"hidden": 2048, "layers": 16, "heads": 16, "vocab": 32000, "seq_len": 2048},
                                       "training": {"global_batch": 256}, "cluster": {"gpu": "h100-sxm", "nodes": 1}})";
  std::ofstream(dir + "/c.json") << R"({"tp": 2})";
  r = run_cli(dir, {"simulate", "--workload", dir + "/w.json", "--config", dir + "/c.json", "--out", dir + "/x.csv"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("--out writes a --batch result"));
}

// A study whose calibration file has no constants for its GPU runs on the catalogue's: it says so
// before the first trial, and the summary does not name the file as what it started from.
TEST_F(Calibration, AStudyWarnsOfACalibrationWithoutItsGpu) {
  cotune::testing::ScratchDir scratch("calibrate-study");
  const std::string dir = scratch.path();
  std::ostringstream runs;
  write_half_gemm_runs(runs);
  std::ofstream(dir + "/runs.csv") << runs.str();
  CliResult r = run_cli(dir, {"calibrate", "--runs", dir + "/runs.csv", "--out", dir + "/cal.json", "--fit",
                             "gemm_efficiency_max"});
  ASSERT_EQ(r.status, 0) << r.err;
  json cal = json::parse(std::ifstream(dir + "/cal.json"));
  cal["gpus"]["a100-80gb"] = cal["gpus"]["h100-sxm"];
  cal["gpus"].erase("h100-sxm");
  std::ofstream(dir + "/a100.json") << cal.dump(2);
  const json study = {{"name", "cal-elsewhere"},
                      {"workload", {{"model", {{"preset", "llama3-8b"}}},
                                    {"training", {{"global_batch", 64}}},
                                    {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 1}}}}},
                      {"calibration", "a100.json"},
                      {"executor", "sim"},
                      {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
                      {"budget", {{"trials", 3}}}};
  std::ofstream(dir + "/study.json") << study.dump(2);
  r = run_cli(dir, {"run", dir + "/study.json", "--store", dir + "/s.db"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("study.json: /calibration: '" + dir + "/a100.json' has no constants for h100-sxm (it has "
                               "some for a100-80gb); the performance model uses the catalogue's"));
  EXPECT_THAT(r.out, Not(HasSubstr("with the constants of " + dir + "/a100.json")));
  EXPECT_THAT(r.out, HasSubstr("the catalogue's constants (" + dir + "/a100.json has none for it)"));
  // With its GPU, nothing to say.
  cal = json::parse(std::ifstream(dir + "/cal.json"));
  std::ofstream(dir + "/a100.json") << cal.dump(2);
  json again = study;
  again["name"] = "cal-here";
  std::ofstream(dir + "/study.json") << again.dump(2);
  r = run_cli(dir, {"run", dir + "/study.json", "--store", dir + "/s.db"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("has no constants")));
}

TEST_F(Calibration, CommandLineNamesTheColumnsItDoesNotRead) {
  // A misspelt parameter column leaves the parameter at its default: the runs would calibrate the
  // model to layouts that did not run. calibrate and simulate --batch say which columns they do not
  // read, with the column each most likely misspells.
  cotune::testing::ScratchDir scratch("calibrate-columns");
  const std::string dir = scratch.path();
  std::ostringstream runs;
  write_half_gemm_runs(runs);
  std::string text = runs.str();
  text.replace(text.find("micro_batch"), 11, "micro_bach");
  std::ofstream(dir + "/typo.csv") << text;
  CliResult r = run_cli(dir, {"calibrate", "--runs", dir + "/typo.csv", "--fit", "gemm_efficiency_max"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("typo.csv: columns not read (neither a column of the llm space's table schema nor a "
                               "recognised metric): micro_bach (did you mean \"micro_batch\"?)"));
  // The counts the replay executor answers with (export-history writes them) are no parameter.
  std::string replayed = runs.str();
  replayed.replace(replayed.find("step_time_s\n"), 12, "replay_rows,step_time_s\n");
  for (size_t at = replayed.find('\n') + 1, next; (next = replayed.find('\n', at)) != std::string::npos; at = next + 1) {
    const size_t comma = replayed.rfind(',', next);
    replayed.insert(comma + 1, "2,");
    next += 2;
  }
  std::ofstream(dir + "/replayed.csv") << replayed;
  r = run_cli(dir, {"calibrate", "--runs", dir + "/replayed.csv", "--fit", "gemm_efficiency_max"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("columns not read")));
  std::ofstream(dir + "/batch.csv") << "hidden,layers,heads,vocab,seq_len,global_batch,gpu,gpus,tp,micro_bach,run_name\n"
                                       "2048,16,16,32000,2048,256,h100-sxm,8,2,4,first\n";
  r = run_cli(dir, {"simulate", "--batch", dir + "/batch.csv"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: " + dir + "/batch.csv: columns not read, copied through: micro_bach (did you "
                               "mean \"micro_batch\"?) (a parameter whose column is misspelt takes its default)"));
  // A column that names nothing like the schema's (a run's name), or a measurement under a name the
  // history reads (a RUNS.csv's step_time_ms), is copied through unremarked.
  std::ofstream(dir + "/clean.csv") << "hidden,layers,heads,vocab,seq_len,global_batch,gpu,gpus,tp,run_name,step_time_ms\n"
                                       "2048,16,16,32000,2048,256,h100-sxm,8,2,first,1500\n";
  r = run_cli(dir, {"simulate", "--batch", dir + "/clean.csv"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // One whose cells look like settings (numbers, true/false, a framework's name) is named once the
  // rows are read: unread, what it meant took its default. An id column is an id.
  std::ofstream(dir + "/settings.csv") << "hidden,layers,heads,vocab,seq_len,global_batch,gpu,gpus,tp,run_id,"
                                          "per_device_train_batch_size,bf16,framework,notes\n"
                                          "2048,16,16,32000,2048,256,h100-sxm,8,2,7,4,True,torchtitan,a note\n";
  r = run_cli(dir, {"simulate", "--batch", dir + "/settings.csv"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("note: " + dir + "/settings.csv: columns not read, copied through, whose cells look "
                               "like settings: per_device_train_batch_size, bf16, framework (a framework: the format "
                               "column?); a setting"));
  EXPECT_THAT(r.err, Not(HasSubstr("run_id")));
}

TEST_F(Calibration, CommandLineFitsWhatItCanAndNamesWhatItLeftOut) {
  cotune::testing::ScratchDir scratch("calibrate-partial");
  const std::string dir = scratch.path();
  // Six H100 runs made with GEMMs at 0.5 of peak; beside them rows that cannot be runs (a layout the
  // space refuses, a run with no measurement, a GPU the catalogue lacks) and one lone A100 run.
  std::ofstream csv(dir + "/runs.csv");
  write_half_gemm_runs(csv);
  csv << "2048,16,16,32000,2048,256,h100-sxm,8,32,1,1,true,1,1.5\n"      // line 8: tp 32 on 8 GPUs
      << "2048,16,16,32000,2048,256,h100-sxm,8,2,1,1,true,1,\n"          // line 9: no measurement
      << "2048,16,16,32000,2048,256,h100-pcie,8,2,1,1,true,1,1.5\n"      // line 10: not in the catalogue
      << "2048,16,16,32000,2048,256,a100-80gb,8,2,1,1,true,1,3.0\n";     // line 11: the only A100 run
  csv.close();
  std::ofstream(dir + "/cal.json") << "kept unless a new file is written\n";

  CliResult r = run_cli(dir, {"calibrate", "--runs", dir + "/runs.csv", "--out", dir + "/cal.json", "--fit",
                             "gemm_efficiency_max"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("runs.csv: line 8: gpus (8) is not divisible by tp*pp*cp (32); the run is left out"));
  EXPECT_THAT(r.err, HasSubstr("runs.csv: line 9: no measured value"));
  EXPECT_THAT(r.err, HasSubstr("runs.csv: line 10: column gpu"));
  EXPECT_THAT(r.err, HasSubstr("(a100-80gb): not calibrated: calibrate: needs at least two measured runs, got 1 (line 11)"));
  EXPECT_THAT(r.err, HasSubstr("3 run(s) left out and 1 GPU type(s) not calibrated"));
  EXPECT_THAT(r.out, HasSubstr("h100-sxm: 6 runs"));
  const json cal = json::parse(std::ifstream(dir + "/cal.json"));
  EXPECT_NEAR(cal["gpus"]["h100-sxm"]["constants"]["gemm_efficiency_max"].get<double>(), 0.5, 0.01);
  EXPECT_FALSE(cal["gpus"].contains("a100-80gb"));

  // A misspelt --fit is the option's fault, said before the runs are read (these have no measurement).
  std::ofstream(dir + "/unmeasured.csv") << "hidden,layers,heads,global_batch,gpus,tp\n2048,16,16,256,8,1\n";
  r = run_cli(dir, {"calibrate", "--runs", dir + "/unmeasured.csv", "--fit", "gemm_efficency_max"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--fit: unknown constant 'gemm_efficency_max' (did you mean \"gemm_efficiency_max\"?)"));
  EXPECT_THAT(r.err, Not(HasSubstr("line 2")));
  // A refusal that names the runs at fault names them once, and the final error only sums it up.
  r = run_cli(dir, {"calibrate", "--runs", dir + "/runs.csv", "--fit", "block_scaled_gemm_efficiency"});
  EXPECT_EQ(r.status, 2) << r.err;
  const size_t h100 = r.err.find("(h100-sxm): not calibrated: ");
  ASSERT_NE(h100, std::string::npos) << r.err;
  const std::string refusal = r.err.substr(h100, r.err.find('\n', h100) - h100);
  EXPECT_THAT(refusal, HasSubstr("no run's step time depends on it (line 2"));
  EXPECT_EQ(refusal.find("line 2"), refusal.rfind("line 2")) << refusal;
  EXPECT_THAT(r.err, HasSubstr("nothing calibrated (2 GPU type(s) refused, above)"));

  r = run_cli(dir, {"calibrate", "--runs", dir + "/runs.csv", "--fit", "gemm_efficiency_max", "--json"});
  EXPECT_EQ(r.status, 1) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["left_out"].size(), 3u);
  EXPECT_EQ(doc["left_out"][0]["line"], 8);
  EXPECT_EQ(doc["left_out"][2]["line"], 10);
  ASSERT_EQ(doc["not_calibrated"].size(), 1u);
  EXPECT_EQ(doc["not_calibrated"][0]["gpu"], "a100-80gb");
  EXPECT_EQ(doc["fits"].size(), 1u);

  // The file read as import reads it: a measured column of another name through --map, failed runs
  // left out by their status.
  std::string text = cotune::testing::read_file(dir + "/runs.csv");
  text.replace(text.find("step_time_s"), 11, "iteration (ms)");
  std::istringstream lines(text);
  std::ostringstream mapped;
  std::string line;
  for (int n = 0; std::getline(lines, line); ++n) {
    if (n == 0) {
      mapped << line << ",status\n";
      continue;
    }
    const size_t comma = line.rfind(',');
    const std::string value = line.substr(comma + 1);
    mapped << line.substr(0, comma + 1) << (value.empty() ? "" : std::to_string(std::stod(value) * 1000))
           << (n == 2 ? ",failed\n" : ",ok\n");
  }
  std::ofstream(dir + "/mapped.csv") << mapped.str();
  r = run_cli(dir, {"calibrate", "--runs", dir + "/mapped.csv", "--map", "iteration (ms)=step_time_ms", "--fit",
                    "gemm_efficiency_max", "--json"});
  EXPECT_EQ(r.status, 1) << r.err;
  const json via_map = json::parse(r.out);
  EXPECT_EQ(via_map["fits"][0]["runs"], 5) << "six H100 runs, one of them failed";
  EXPECT_EQ(via_map["left_out"][0]["line"], 3);
  EXPECT_THAT(via_map["left_out"][0]["reason"].get<std::string>(), HasSubstr("status failed"));
  EXPECT_NEAR(via_map["calibration"]["gpus"]["h100-sxm"]["constants"]["gemm_efficiency_max"].get<double>(), 0.5, 0.01);

  // simulate's own output reads like runs, but its step times are the model's: refused, saying so.
  std::ofstream(dir + "/layouts.csv") << "hidden,layers,heads,global_batch,gpus,tp\n2048,16,16,256,8,1\n2048,16,16,256,8,2\n";
  ASSERT_EQ(run_cli(dir, {"simulate", "--batch", dir + "/layouts.csv", "--out", dir + "/sim.csv"}).status, 0);
  r = run_cli(dir, {"calibrate", "--runs", dir + "/sim.csv"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("sim.csv: this is the output of cotune simulate --batch"));

  // Nothing that can be fitted: refused as before, and an earlier file at --out is left as it was.
  std::ofstream(dir + "/none.csv") << "hidden,layers,heads,global_batch,gpus,tp,step_time_s\n"
                                      "2048,16,16,256,8,1,1.5\n";
  std::ofstream(dir + "/old.json") << "{}\n";
  r = run_cli(dir, {"calibrate", "--runs", dir + "/none.csv", "--out", dir + "/old.json"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("none.csv (h100-sxm): not calibrated: calibrate: needs at least two measured runs, got 1 "
                               "(line 2)"));
  EXPECT_THAT(r.err, HasSubstr("none.csv: nothing calibrated (1 GPU type(s) refused, above)"));
  EXPECT_EQ(cotune::testing::read_file(dir + "/old.json"), "{}\n");
}

}  // namespace

TEST_F(Calibration, CommandLineSaysWhichRunsDoNotFitAsRead) {
  // A run that finished but, as its cells read, cannot fit in memory has a cell misread or left
  // unstated: the fit would be to another layout. It is fitted as read, and the lines are named.
  cotune::testing::ScratchDir scratch("calibrate-memory");
  const std::string dir = scratch.path();
  std::ostringstream runs;
  write_half_gemm_runs(runs);
  std::ofstream(dir + "/fits.csv") << runs.str();
  CliResult r = run_cli(dir, {"calibrate", "--runs", dir + "/fits.csv", "--fit", "gemm_efficiency_max"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("do not fit in memory")));
  // The same runs and one of Llama-3 70B on 8 H100 without ZeRO or recomputation (about 1.9 TiB a GPU).
  std::ofstream(dir + "/over.csv") << "preset,gpu,gpus,global_batch,micro_batch,zero,recompute,step_time_s\n"
                                      "llama3-8b,h100-sxm,8,64,1,1,full,2.0\n"
                                      "llama3-70b,h100-sxm,8,64,4,0,none,30\n"
                                      "llama3-8b,h100-sxm,8,128,1,1,full,4.1\n";
  r = run_cli(dir, {"calibrate", "--runs", dir + "/over.csv", "--fit", "gemm_efficiency_max"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("over.csv: 1 run(s) measured although, as read, they do not fit in memory (line 3: "
                               "out of memory: needs"));
  EXPECT_THAT(r.err, HasSubstr("they are fitted as read"));
  EXPECT_THAT(r.out, HasSubstr("\"runs\": 3"));
}

TEST_F(Calibration, CommandLineSaysWhyARunWithOnlyTflopsIsLeftOut) {
  // TFLOP/s count FLOPs as the source did: a run that gives only those is left out, saying so.
  cotune::testing::ScratchDir scratch("calibrate-tflops");
  const std::string dir = scratch.path();
  std::ofstream(dir + "/tf.csv") << "preset,gpu,gpus,global_batch,micro_batch,zero,recompute,step_time_s,tflops_per_gpu\n"
                                    "llama3-8b,h100-sxm,8,64,1,1,full,2.0,\n"
                                    "llama3-8b,h100-sxm,8,64,1,1,full,,400\n"
                                    "llama3-8b,h100-sxm,8,128,1,1,full,4.1,\n";
  const CliResult r = run_cli(dir, {"calibrate", "--runs", dir + "/tf.csv", "--fit", "gemm_efficiency_max"});
  EXPECT_EQ(r.status, 1) << r.err;  // a row left out
  EXPECT_THAT(r.err, HasSubstr("tf.csv: line 3: only TFLOP/s (tflops_per_gpu): a step time or tokens per second is "
                               "needed"));
  EXPECT_THAT(r.out, HasSubstr("\"runs\": 2"));
}
