// The objective, constraints, Pareto front and budget rules of the study loop, on hand-made metrics.
#include <cotune/core/model/objective.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "run/budget.hpp"
#include "run/searcher_state.hpp"

namespace cotune::core {
namespace {

using nlohmann::json;

StudySpec spec_with(const std::string& budget, const std::string& objective = R"("objective": {"metric":
    "tokens_per_s", "direction": "maximize", "constraints": [{"metric": "peak_mem_gib", "max": 70}]})") {
  std::string text = R"({"name": "t", "workload": {"model": {}}, )" + objective + R"(, "budget": )" + budget + "}";
  return parse_study_file(text, "test.json", "");
}

TEST(Objective, EvaluatesValuesAndConstraints) {
  StudySpec spec = spec_with(R"({"trials": 10})");
  Evaluation ok = evaluate(spec.objectives, json{{"tokens_per_s", 1000.0}, {"peak_mem_gib", 60.0}});
  EXPECT_TRUE(ok.feasible);
  ASSERT_EQ(ok.values.size(), 1u);
  EXPECT_DOUBLE_EQ(ok.values[0], 1000.0);

  Evaluation over = evaluate(spec.objectives, json{{"tokens_per_s", 2000.0}, {"peak_mem_gib", 75.0}});
  EXPECT_FALSE(over.feasible);
  EXPECT_EQ(over.values.size(), 1u) << "the objective was measured even when a constraint fails";
  EXPECT_NE(over.violation.find("peak_mem_gib"), std::string::npos) << over.violation;

  Evaluation unmeasured = evaluate(spec.objectives, json{{"tokens_per_s", 2000.0}});
  EXPECT_FALSE(unmeasured.feasible) << "a constraint on an unreported metric cannot be shown to hold";

  Evaluation missing = evaluate(spec.objectives, json{{"peak_mem_gib", 1.0}});
  EXPECT_FALSE(missing.feasible);
  EXPECT_TRUE(missing.values.empty());
}

TEST(Objective, MetricValueIgnoresNonNumbers) {
  EXPECT_EQ(metric_value(std::string(R"({"a": "fast"})"), "a"), std::nullopt);
  EXPECT_EQ(metric_value(std::string("not json"), "a"), std::nullopt);
  EXPECT_EQ(metric_value(std::string(R"({"a": 2.5})"), "a"), 2.5);
}

TEST(Objective, ParetoFrontOfTwoObjectives) {
  // maximise throughput, minimise GPUs
  std::vector<std::vector<double>> points = {{100, 8}, {150, 16}, {90, 8}, {150, 32}, {200, 64}, {120, 8}};
  std::vector<size_t> front = pareto_front(points, {Direction::kMaximize, Direction::kMinimize});
  EXPECT_EQ(front, (std::vector<size_t>{1, 4, 5}));
}

TEST(Budget, TrialsCountOnlyMeasuredStatuses) {
  StudySpec spec = spec_with(R"({"trials": 3})");
  BudgetTracker b(spec);
  Evaluation e{{10.0}, true, ""};
  b.record(TrialStatus::kOk, &e, 0);
  b.record(TrialStatus::kUnavailable, nullptr, 0);
  b.record(TrialStatus::kCancelled, nullptr, 0);
  b.record(TrialStatus::kOom, nullptr, 0);
  EXPECT_EQ(b.counted(), 2);
  EXPECT_EQ(b.startable(0), 1);
  EXPECT_EQ(b.startable(1), 0);
  EXPECT_EQ(b.done_reason(0), "");
  b.record(TrialStatus::kFailed, nullptr, 0);
  EXPECT_NE(b.done_reason(0).find("trial budget"), std::string::npos);
}

TEST(Budget, TargetAndPatience) {
  StudySpec spec = spec_with(R"({"trials": 100, "target": 50, "patience": 3})");
  BudgetTracker b(spec);
  Evaluation low{{10.0}, true, ""}, lower{{5.0}, true, ""}, infeasible{{99.0}, false, "x"}, hit{{50.0}, true, ""};
  b.record(TrialStatus::kOk, &low, 0);
  EXPECT_TRUE(b.last_improved());
  b.record(TrialStatus::kOk, &lower, 0);
  b.record(TrialStatus::kOk, &infeasible, 0);
  EXPECT_EQ(b.best(), 10.0) << "an infeasible trial is never best";
  EXPECT_EQ(b.done_reason(0), "");
  b.record(TrialStatus::kFailed, nullptr, 0);
  EXPECT_NE(b.done_reason(0).find("no improvement"), std::string::npos);

  BudgetTracker t(spec);
  t.record(TrialStatus::kOk, &hit, 0);
  EXPECT_NE(t.done_reason(0).find("target"), std::string::npos);
}

TEST(Budget, WallTimeAndGpuHoursAreHardLimits) {
  StudySpec spec = spec_with(R"({"wall_time_s": 10, "gpu_hours": 2})");
  BudgetTracker b(spec);
  EXPECT_FALSE(b.hard_limit_spent(5));
  EXPECT_TRUE(b.hard_limit_spent(10));
  b.record(TrialStatus::kOk, nullptr, 1.5);
  b.record(TrialStatus::kUnavailable, nullptr, 5);  // answered from a table: used no GPU
  EXPECT_FALSE(b.hard_limit_spent(0));
  b.record(TrialStatus::kTimeout, nullptr, 0.5);
  EXPECT_TRUE(b.hard_limit_spent(0));
  EXPECT_DOUBLE_EQ(trial_gpu_hours(R"({"gpus": 8, "wall_time_s": 900})", std::nullopt, std::nullopt, 0), 2.0);
  EXPECT_DOUBLE_EQ(trial_gpu_hours("{}", 100.0, 100.0 + 1800, 16), 8.0);
}

TEST(Budget, ParetoImprovementIsJoiningTheFront) {
  StudySpec spec = spec_with(R"({"trials": 10, "patience": 2})", R"("objectives": [
      {"metric": "tokens_per_s", "direction": "maximize"}, {"metric": "gpus", "direction": "minimize"}])");
  BudgetTracker b(spec);
  Evaluation a{{100, 16}, true, ""}, dominated{{90, 16}, true, ""}, cheaper{{80, 8}, true, ""};
  b.record(TrialStatus::kOk, &a, 0);
  EXPECT_TRUE(b.last_improved());
  b.record(TrialStatus::kOk, &dominated, 0);
  EXPECT_FALSE(b.last_improved());
  b.record(TrialStatus::kOk, &cheaper, 0);
  EXPECT_TRUE(b.last_improved()) << "slower but on fewer GPUs joins the front";
}

TEST(SearcherState, RoundTripsObservedTrialsAndBytes) {
  SearcherState s{{1, 2, 7}, std::string("bin\0ary\nbytes", 13)};
  SearcherState back = decode_searcher_state(encode_searcher_state(s));
  EXPECT_EQ(back.observed, s.observed);
  EXPECT_EQ(back.plugin_bytes, s.plugin_bytes);
  EXPECT_THROW(decode_searcher_state(std::vector<std::uint8_t>{'x', 'y'}), std::runtime_error);
}

TEST(Recommendation, TheEstimateChoosesAmongTrialsMeasuredWithinNoiseOfTheBest) {
  const double nan = std::nan("");
  // Measured 100, 95, 80: the estimate prefers the 95 (noise lifted the 100, it says) but not the 80,
  // measured 20 % below the best: more than noise sets apart.
  EXPECT_EQ(recommended_index({100, 95, 80}, {90, 99, 120}, Direction::kMaximize), 1u);
  EXPECT_EQ(recommended_index({100, 95, 80}, {99, 90, 120}, Direction::kMaximize), 0u);
  // A step time: lower is better, and 13 % above the best is within the band, 20 % is not.
  EXPECT_EQ(recommended_index({10, 11.3, 12}, {10, 9, 8}, Direction::kMinimize), 1u);
  // Without estimates the best measurement; a tie in the estimate goes to the better measurement.
  EXPECT_EQ(recommended_index({3, 5, 4}, {nan, nan, nan}, Direction::kMaximize), 1u);
  EXPECT_EQ(recommended_index({98, 100}, {7, 7}, Direction::kMaximize), 1u);
  // A best that is not positive sets no band (no fraction says how far another falls short).
  EXPECT_EQ(recommended_index({-5, -1}, {10, 0}, Direction::kMaximize), 0u);
}

}  // namespace
}  // namespace cotune::core
