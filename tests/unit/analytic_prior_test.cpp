// The priors through the real llm space and krr predictor plugins. Analytic: with no data the
// surrogate answers the performance model's estimate, and measurements correct a biased model.
// Roofline: rates of the trace's roofline terms learned from a few measurements rank held-out
// configurations far better than the features alone.
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/history/ranking_metrics.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/run/search_context.hpp>
#include <cotune/core/model/surrogate.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <unordered_set>

namespace cotune::core {
namespace {

const char* kWorkload = R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 256},
                            "cluster": {"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8}})";

class AnalyticPrior : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.load_directories({COTUNE_PLUGIN_DIR});
    space_ = registry_.make_space("llm", kWorkload);
    ASSERT_TRUE(space_->can_lower());
    predictor_ = registry_.make_predictor("krr", surrogate_predictor_options("{}", "test"));
    configs_.resize(200 * space_->num_params());
    n_ = space_->sample(7, 200, configs_.data());
    ASSERT_GE(n_, 60u) << "the test workload needs a space with some room";
  }

  const double* config(size_t i) const { return configs_.data() + i * space_->num_params(); }

  cotune_sim_result model(const double* c) const {
    const cotune_trace& trace = space_->lower(c);
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    perf::simulate(trace, &r);
    return r;
  }
  double model_step_time(const double* c) const { return model(c).step_time_s; }

  // The step time of configuration i on a machine whose H100 has these GPU-description constants
  // instead of the catalogue's (the space of `machine_`, made by on_machine()).
  void on_machine(const nlohmann::json& constants) {
    nlohmann::json w = nlohmann::json::parse(kWorkload);
    w["cluster"]["calibration"] = {{"h100-sxm", constants}};
    machine_ = registry_.make_space("llm", w.dump());
  }
  double measured(size_t i) const {
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    perf::simulate(machine_->lower(config(i)), &r);
    return r.step_time_s;
  }

  // Kendall's tau between predicted and true values on configurations [from, n_) of a surrogate
  // fitted on [0, from) of `metric`.
  double held_out_tau(Surrogate& s, size_t from, double (*metric)(const cotune_sim_result&)) const {
    std::vector<double> y(from);
    for (size_t i = 0; i < from; ++i) y[i] = metric(model(config(i)));
    s.fit(configs_.data(), from, y.data());
    std::vector<double> predicted(n_ - from), truth(n_ - from);
    s.predict(config(from), n_ - from, predicted.data(), nullptr);
    for (size_t i = from; i < n_; ++i) truth[i - from] = metric(model(config(i)));
    return kendall_tau(predicted, truth);
  }

  Registry registry_;
  std::unique_ptr<Space> space_, machine_;
  std::unique_ptr<Predictor> predictor_;
  std::vector<double> configs_;
  size_t n_ = 0;
};

TEST_F(AnalyticPrior, WithoutDataAnswersTheModelsEstimate) {
  Surrogate s(*space_, *predictor_, "step_time_s", Prior::kAnalytic, config(0));
  ASSERT_TRUE(s.uses_prior()) << s.prior_note();
  EXPECT_TRUE(s.informed());
  std::vector<double> value(n_), log_std(n_);
  s.predict(configs_.data(), n_, value.data(), log_std.data());
  for (size_t i = 0; i < n_; ++i) {
    EXPECT_NEAR(value[i], model_step_time(config(i)), 1e-12 * value[i]) << "config " << i;
    EXPECT_EQ(log_std[i], 0.0);
  }
}

TEST_F(AnalyticPrior, MeasurementsCorrectABiasedModel) {
  // The "hardware" is 30% slower than the model everywhere, and another 25% slower with tensor
  // parallelism above 2: a bias that depends on the configuration.
  const size_t tp = 0;
  ASSERT_EQ(space_->params()[tp].name, "tp");
  auto measured = [&](const double* c) { return model_step_time(c) * 1.3 * (c[tp] > 2 ? 1.25 : 1.0); };
  const size_t train = n_ / 2;
  std::vector<double> y(train);
  for (size_t i = 0; i < train; ++i) y[i] = measured(config(i));

  Surrogate s(*space_, *predictor_, "step_time_s", Prior::kAnalytic, config(0));
  double before = 0, after = 0;
  std::vector<double> prior_only(n_ - train);
  s.predict(config(train), n_ - train, prior_only.data(), nullptr);
  // The score version searchers key their cached scores on: new with every fit, never 0, and
  // never another surrogate's.
  const uint64_t unfitted = s.version();
  EXPECT_NE(unfitted, 0u);
  s.fit(configs_.data(), train, y.data());
  EXPECT_NE(s.version(), unfitted);
  Surrogate other(*space_, *predictor_, "step_time_s", Prior::kAnalytic, config(0));
  EXPECT_NE(other.version(), s.version());
  EXPECT_NE(other.version(), unfitted);
  EXPECT_EQ(s.fitted_rows(), train);
  std::vector<double> corrected(n_ - train);
  s.predict(config(train), n_ - train, corrected.data(), nullptr);
  for (size_t i = train; i < n_; ++i) {
    double truth = std::log(measured(config(i)));
    before += std::fabs(std::log(prior_only[i - train]) - truth);
    after += std::fabs(std::log(corrected[i - train]) - truth);
  }
  before /= double(n_ - train);
  after /= double(n_ - train);
  EXPECT_GT(before, 0.25) << "the biased model is off by at least log(1.3)";
  EXPECT_LT(after, 0.05) << "held-out mean |log error| after learning the residual";
}

TEST_F(AnalyticPrior, OneMeasurementScalesTheModel) {
  Surrogate s(*space_, *predictor_, "step_time_s", Prior::kAnalytic, config(0));
  double y = model_step_time(config(0)) * 2;
  s.fit(config(0), 1, &y);
  double v = 0;
  s.predict(config(1), 1, &v, nullptr);
  EXPECT_NEAR(v, 2 * model_step_time(config(1)), 1e-9 * v);
}

TEST_F(AnalyticPrior, WithoutPriorNothingIsKnownBeforeData) {
  Surrogate s(*space_, *predictor_, "step_time_s", Prior::kNone);
  EXPECT_FALSE(s.uses_prior());
  EXPECT_FALSE(s.informed());
  double v = 0;
  s.predict(config(0), 1, &v, nullptr);
  EXPECT_TRUE(std::isnan(v));
  // The searcher then sees equal scores for every valid configuration.
  std::unordered_set<std::string> seen;
  SearchContext ctx(*space_, s, Direction::kMinimize, seen);
  double score = 1;
  ctx.score(config(0), 1, &score, nullptr);
  EXPECT_EQ(score, 0.0);
}

TEST_F(AnalyticPrior, ModelThatCannotEstimateTheMetricTurnsThePriorOff) {
  Surrogate s(*space_, *predictor_, "loss", Prior::kAnalytic, config(0));
  EXPECT_FALSE(s.uses_prior());
  EXPECT_NE(s.prior_note().find("loss"), std::string::npos);
}

TEST_F(AnalyticPrior, ScoresAreHigherForBetterAndMinusInfinityForInvalid) {
  Surrogate s(*space_, *predictor_, "step_time_s", Prior::kAnalytic, config(0));
  std::unordered_set<std::string> seen{space_->key(config(1))};
  SearchContext ctx(*space_, s, Direction::kMinimize, seen);
  double scores[2], stds[2];
  ctx.score(configs_.data(), 2, scores, stds);
  EXPECT_DOUBLE_EQ(scores[0], -std::log(model_step_time(config(0))));
  EXPECT_EQ(scores[0] > scores[1], model_step_time(config(0)) < model_step_time(config(1)));

  std::vector<double> bad(config(0), config(0) + space_->num_params());
  bad[0] = 3;  // tp 3 does not divide anything
  double bad_score = 0;
  ctx.score(bad.data(), 1, &bad_score, nullptr);
  EXPECT_EQ(bad_score, -std::numeric_limits<double>::infinity());

  int32_t flags[2];
  ctx.seen(configs_.data(), 2, flags);
  EXPECT_EQ(flags[0], 0);
  EXPECT_EQ(flags[1], 1);
  EXPECT_EQ(surrogate_predictor_options(R"({"gamma": 0.5})", "x"), R"({"gamma":0.5,"log":false})");
  EXPECT_THROW(surrogate_predictor_options(R"({"log": true})", "x"), UserError);
}

TEST_F(AnalyticPrior, RooflinePriorKnowsNothingBeforeTwoMeasurements) {
  Surrogate s(*space_, *predictor_, "step_time_s", Prior::kRoofline, config(0));
  ASSERT_TRUE(s.uses_prior()) << s.prior_note();
  EXPECT_EQ(s.prior(), Prior::kRoofline);
  ASSERT_NE(s.cost_model(), nullptr);
  EXPECT_FALSE(s.informed());
  double v = 0;
  s.predict(config(0), 1, &v, nullptr);
  EXPECT_TRUE(std::isnan(v));
  EXPECT_FALSE(s.estimate(config(0)).has_value());

  const double y = model_step_time(config(0));
  s.fit(config(0), 1, &y);  // one measurement: a constant, no rates yet
  EXPECT_FALSE(s.cost_model()->fitted());
  s.predict(config(1), 1, &v, nullptr);
  EXPECT_NEAR(v, y, 1e-9 * y);
}

TEST_F(AnalyticPrior, RooflinePriorRanksFromAFewMeasurements) {
  // Twelve measurements: the features alone leave krr guessing; the roofline terms with learned
  // rates follow the performance model much more closely.
  auto step_time = [](const cotune_sim_result& r) { return r.step_time_s; };
  auto tokens = [](const cotune_sim_result& r) { return r.tokens_per_s; };
  Surrogate roofline(*space_, *predictor_, "step_time_s", Prior::kRoofline, config(0));
  const double with_terms = held_out_tau(roofline, 12, step_time);
  EXPECT_EQ(roofline.cost_model()->exponent(), 1) << "step time grows with time";
  ASSERT_TRUE(roofline.estimate(config(13)).has_value());

  auto none_predictor = registry_.make_predictor("krr", surrogate_predictor_options("{}", "test"));
  Surrogate none(*space_, *none_predictor, "step_time_s", Prior::kNone);
  const double features_alone = held_out_tau(none, 12, step_time);
  // (0.74 against 0.57 when written; the performance model's efficiencies and overlap are what the
  // terms leave to krr's residual.)
  EXPECT_GT(with_terms, 0.65) << "held-out Kendall's tau; features alone: " << features_alone;
  EXPECT_GT(with_terms, features_alone + 0.1) << "features alone: " << features_alone;

  auto throughput_predictor = registry_.make_predictor("krr", surrogate_predictor_options("{}", "test"));
  Surrogate throughput(*space_, *throughput_predictor, "tokens_per_s", Prior::kRoofline, config(0));
  EXPECT_GT(held_out_tau(throughput, 12, tokens), 0.65);
  EXPECT_EQ(throughput.cost_model()->exponent(), -1) << "tokens/s falls as time grows";
}

TEST_F(AnalyticPrior, RooflinePriorNeedsASpaceThatLowers) {
  // The testgrid fixture has features but no step traces: no roofline terms to learn rates for.
  ASSERT_TRUE(registry_.load_file(COTUNE_BINARY_DIR "/lib/cotune/test-plugins/libcotune-space-testgrid.so"));
  auto grid = registry_.make_space("testgrid", "{}", "{}");
  ASSERT_FALSE(grid->can_lower());
  std::vector<double> probe(grid->num_params());
  ASSERT_EQ(grid->sample(1, 1, probe.data()), 1u);
  Surrogate s(*grid, *predictor_, "loss", Prior::kRoofline, probe.data());
  EXPECT_FALSE(s.uses_prior());
  EXPECT_EQ(s.prior(), Prior::kNone);
  EXPECT_EQ(s.cost_model(), nullptr);
  EXPECT_NE(s.prior_note().find("does not lower"), std::string::npos) << s.prior_note();
}

TEST_F(AnalyticPrior, AnotherProcessTakesTheFitWhole) {
  // What a worker saves after a refit (the predictor's state, the in-study constants, the rows it
  // learnt) another worker's surrogate takes instead of fitting: it then predicts what the first
  // does, to the last bit.
  nlohmann::json machine = nlohmann::json::parse(kWorkload);
  machine["cluster"]["calibration"] = {{"h100-sxm", {{"gemm_efficiency_max", 0.5}}}};
  auto real = registry_.make_space("llm", machine.dump());
  constexpr size_t kTrain = 12;
  std::vector<double> y(kTrain);
  for (size_t i = 0; i < kTrain; ++i) {
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    perf::simulate(real->lower(config(i)), &r);
    y[i] = r.step_time_s;
  }
  Surrogate first(*space_, *predictor_, "step_time_s", Prior::kAnalytic, config(0));
  first.calibrate_prior(true);
  first.fit(configs_.data(), kTrain, y.data());
  const std::string state = first.save_state(kTrain);
  ASSERT_FALSE(state.empty());

  auto their_predictor = registry_.make_predictor("krr", surrogate_predictor_options("{}", "test"));
  Surrogate second(*space_, *their_predictor, "step_time_s", Prior::kAnalytic, config(0));
  EXPECT_EQ(second.state_rows(state), kTrain);
  ASSERT_TRUE(second.load_state(state));
  EXPECT_EQ(second.prior_constants(), first.prior_constants());
  EXPECT_FALSE(second.prior_constants().empty());
  std::vector<double> a(n_ - kTrain), b(n_ - kTrain), sa(n_ - kTrain), sb(n_ - kTrain);
  first.predict(config(kTrain), n_ - kTrain, a.data(), sa.data());
  second.predict(config(kTrain), n_ - kTrain, b.data(), sb.data());
  EXPECT_EQ(a, b);
  EXPECT_EQ(sa, sb);

  // What it cannot take it refuses, unchanged: another format, another metric, the roofline
  // prior (whose rates are not saved).
  Surrogate other_metric(*space_, *their_predictor, "tokens_per_s", Prior::kAnalytic, config(0));
  EXPECT_FALSE(other_metric.state_rows(state));
  EXPECT_FALSE(other_metric.load_state(state));
  EXPECT_FALSE(second.state_rows("not a state"));
  Surrogate roofline(*space_, *their_predictor, "step_time_s", Prior::kRoofline, config(0));
  roofline.fit(configs_.data(), kTrain, y.data());
  EXPECT_TRUE(roofline.save_state(kTrain).empty());
  EXPECT_FALSE(roofline.state_rows(state));
}

}  // namespace
}  // namespace cotune::core

namespace cotune::core {
namespace {

// In-study calibration: measurements from a machine whose GEMMs reach 0.45 of peak (the catalogue
// says 0.68) and whose host needs 30 us a kernel. Fitted on 8 measurements, the analytic prior's
// constants move to the machine's, and its estimates of the other configurations come far closer
// than the uncalibrated prior's (the predictor alone corrects the same bias only where it has data).
TEST_F(AnalyticPrior, InStudyCalibrationMovesTheModelToTheMachineMeasured) {
  on_machine({{"gemm_efficiency_max", 0.45}, {"host_launch_us", 30}});
  constexpr size_t kTrain = 8;
  std::vector<double> y(kTrain);
  for (size_t i = 0; i < kTrain; ++i) y[i] = measured(i);
  // Mean |log(predicted / measured)| over the configurations not fitted on.
  auto held_out_error = [&](Surrogate& s) {
    s.fit(configs_.data(), kTrain, y.data());
    double err = 0;
    for (size_t i = kTrain; i < n_; ++i) {
      double p = 0;
      s.predict(config(i), 1, &p, nullptr);
      err += std::fabs(std::log(p / measured(i)));
    }
    return err / double(n_ - kTrain);
  };
  auto other_predictor = registry_.make_predictor("krr", surrogate_predictor_options("{}", "test"));
  Surrogate calibrated_surrogate(*space_, *predictor_, "step_time_s", Prior::kAnalytic, config(0));
  Surrogate plain_surrogate(*space_, *other_predictor, "step_time_s", Prior::kAnalytic, config(0));
  calibrated_surrogate.calibrate_prior(true);
  const double with = held_out_error(calibrated_surrogate);
  const double without = held_out_error(plain_surrogate);
  const Surrogate* calibrated = &calibrated_surrogate;
  const Surrogate* plain = &plain_surrogate;
  EXPECT_LT(with, 0.5 * without) << "mean |log error| " << with << " against " << without;
  EXPECT_LT(with, 0.05);
  ASSERT_EQ(calibrated->prior_constants().count("h100-sxm"), 1u);
  const nlohmann::json& c = calibrated->prior_constants().at("h100-sxm");
  ASSERT_TRUE(c.contains("gemm_efficiency_max")) << c.dump();
  EXPECT_NEAR(c["gemm_efficiency_max"].get<double>(), 0.45, 0.05) << c.dump();
  EXPECT_TRUE(plain->prior_constants().empty());
}

// From the second measured trial on: two measurements of a machine whose GEMMs reach 0.5 of peak
// cannot determine the constants, but the most probable ones given them put the error on the GEMM
// efficiency, and the prior's estimates of configurations not measured move toward the machine's.
// One measurement tells only the level (the predictor's offset learns it): no constant moves.
TEST_F(AnalyticPrior, InStudyCalibrationLearnsFromTheFirstTwoTrials) {
  on_machine({{"gemm_efficiency_max", 0.5}});
  Surrogate surrogate(*space_, *predictor_, "step_time_s", Prior::kAnalytic, config(0));
  surrogate.calibrate_prior(true);
  const std::vector<double> first = {measured(0), measured(1)};
  surrogate.fit(config(0), 1, first.data());
  EXPECT_TRUE(surrogate.prior_constants().empty()) << "one trial moved the constants";
  // The same configuration measured twice tells only the level too.
  const size_t p = space_->num_params();
  std::vector<double> twice(config(0), config(0) + p);
  twice.insert(twice.end(), config(0), config(0) + p);
  const std::vector<double> again = {measured(0), measured(0) * 1.01};
  surrogate.fit(twice.data(), 2, again.data());
  EXPECT_TRUE(surrogate.prior_constants().empty()) << "one configuration measured twice moved the constants";
  surrogate.fit(config(0), 2, first.data());
  ASSERT_EQ(surrogate.prior_constants().count("h100-sxm"), 1u);
  const nlohmann::json& c = surrogate.prior_constants().at("h100-sxm");
  ASSERT_TRUE(c.contains("gemm_efficiency_max")) << c.dump();
  EXPECT_NEAR(c["gemm_efficiency_max"].get<double>(), 0.5, 0.05) << c.dump();
  // The prior alone (not the predictor's learned offset): its estimates of the others.
  Surrogate plain(*space_, *predictor_, "step_time_s", Prior::kAnalytic, config(0));
  double with = 0, without = 0;
  for (size_t i = 2; i < n_; ++i) {
    with += std::fabs(std::log(*surrogate.estimate(config(i)) / measured(i)));
    without += std::fabs(std::log(*plain.estimate(config(i)) / measured(i)));
  }
  EXPECT_LT(with, 0.3 * without) << "mean |log error| " << with / double(n_ - 2) << " against "
                                 << without / double(n_ - 2);
}

}  // namespace
}  // namespace cotune::core
