// ConstraintEstimate through the real llm space: which configurations the performance model,
// corrected by measured trials, expects to break a study's constraints, and the search context
// scoring those as not worth a trial.
#include <cotune/core/model/constraint_estimate.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/run/search_context.hpp>
#include <cotune/core/model/surrogate.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <unordered_set>

namespace cotune::core {
namespace {

using nlohmann::json;

const char* kWorkload = R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 256},
                            "cluster": {"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8}})";

std::vector<ObjectiveSpec> objective_with(std::vector<Constraint> constraints) {
  return {ObjectiveSpec{"tokens_per_s", Direction::kMaximize, std::move(constraints)}};
}

class ConstraintEstimateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.load_directories({COTUNE_PLUGIN_DIR});
    space_ = registry_.make_space("llm", kWorkload);
    configs_.resize(300 * space_->num_params());
    n_ = space_->sample(11, 300, configs_.data());
    ASSERT_GE(n_, 100u);
    for (size_t i = 0; i < n_; ++i) memory_.push_back(modelled(i).peak_memory_bytes / 1073741824.0);
    std::vector<double> sorted = memory_;
    std::sort(sorted.begin(), sorted.end());
    median_gib_ = sorted[n_ / 2];
    ASSERT_LT(sorted.front() * 1.3, sorted.back()) << "the sample needs a spread of memory to test a bound on";
  }

  const double* config(size_t i) const { return configs_.data() + i * space_->num_params(); }
  cotune_sim_result modelled(size_t i) const {
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    perf::simulate(space_->lower(config(i)), &r);
    return r;
  }
  std::vector<int32_t> breaks(const ConstraintEstimate& e) const {
    std::vector<int32_t> out(n_);
    e.breaks(configs_.data(), n_, out.data());
    return out;
  }

  Registry registry_;
  std::unique_ptr<Space> space_;
  std::vector<double> configs_;
  std::vector<double> memory_;  // the model's peak memory of each, GiB
  size_t n_ = 0;
  double median_gib_ = 0;
};

TEST_F(ConstraintEstimateTest, BeforeAnyMeasurementTheModelsOwnEstimateDecides) {
  ConstraintEstimate e(*space_, objective_with({{"peak_mem_gib", median_gib_, std::nullopt}}));
  ASSERT_FALSE(e.empty());
  std::ostringstream bound;
  bound << "peak_mem_gib <= " << median_gib_;
  EXPECT_EQ(e.describe(), std::vector<std::string>{bound.str()});
  const std::vector<int32_t> out = breaks(e);
  size_t marked = 0;
  for (size_t i = 0; i < n_; ++i) {
    EXPECT_EQ(out[i] == 1, memory_[i] > median_gib_) << "configuration " << i << ": " << memory_[i] << " GiB";
    marked += static_cast<size_t>(out[i]);
  }
  EXPECT_GT(marked, n_ / 4);
  EXPECT_LT(marked, n_ * 3 / 4);
}

TEST_F(ConstraintEstimateTest, MeasuredTrialsCorrectTheModelsEstimate) {
  // The machine keeps 10 % more memory than the model says: once three trials report it, every
  // configuration the model puts within 10 % under the bound is expected to break it too.
  ConstraintEstimate e(*space_, objective_with({{"peak_mem_gib", median_gib_, std::nullopt}}));
  for (size_t i = 0; i < 3; ++i) e.learn(config(i), json{{"tokens_per_s", 1e5}, {"peak_mem_gib", memory_[i] * 1.1}});
  const std::vector<int32_t> before_update = breaks(e);
  for (size_t i = 0; i < n_; ++i) EXPECT_EQ(before_update[i] == 1, memory_[i] > median_gib_) << "update() takes them in";
  e.update();
  EXPECT_NEAR(e.correction("peak_mem_gib").log_bias, std::log(1.1), 1e-9);
  EXPECT_NEAR(e.correction("peak_mem_gib").log_scatter, 0, 1e-9);
  EXPECT_EQ(e.correction("peak_mem_gib").runs, 3u);
  const std::vector<int32_t> out = breaks(e);
  size_t newly = 0;
  for (size_t i = 0; i < n_; ++i) {
    EXPECT_EQ(out[i] == 1, memory_[i] * 1.1 > median_gib_) << "configuration " << i;
    newly += static_cast<size_t>(out[i] == 1 && memory_[i] <= median_gib_);
  }
  EXPECT_GT(newly, 0u) << "the sample should have configurations within 10 % under the bound";
}

TEST_F(ConstraintEstimateTest, ScatteredMeasurementsMarkOnlyWhatIsClearlyBeyond) {
  // Measurements 0 % and 20 % over the model, alternately: the median correction is 10 % and its
  // scatter 10 % (1.4826 median absolute deviations of the log ratio), so only configurations whose
  // corrected estimate is beyond the bound by more than that are marked.
  ConstraintEstimate e(*space_, objective_with({{"peak_mem_gib", median_gib_, std::nullopt}}));
  for (size_t i = 0; i < 4; ++i)
    e.learn(config(i), json{{"tokens_per_s", 1e5}, {"peak_mem_gib", memory_[i] * (i % 2 ? 1.2 : 1.0)}});
  e.update();
  const auto c = e.correction("peak_mem_gib");
  const double bias = (std::log(1.2) + 0.0) / 2;
  EXPECT_NEAR(c.log_bias, bias, 1e-9);
  EXPECT_NEAR(c.log_scatter, 1.4826 * (std::log(1.2) - bias), 1e-9);
  const std::vector<int32_t> out = breaks(e);
  for (size_t i = 0; i < n_; ++i)
    EXPECT_EQ(out[i] == 1, memory_[i] * std::exp(c.log_bias - c.log_scatter) > median_gib_) << "configuration " << i;
}

TEST_F(ConstraintEstimateTest, LowerBoundsAndMetricsTheModelDoesNotKnow) {
  // gpus >= 32 on a space of 8 to 32 GPUs: only the full-cluster configurations stay.
  ConstraintEstimate e(*space_, objective_with({{"gpus", std::nullopt, 32.0}, {"val_loss", 3.0, std::nullopt}}));
  EXPECT_EQ(e.describe(), std::vector<std::string>{"gpus >= 32"}) << "the model says nothing of val_loss";
  const std::vector<int32_t> out = breaks(e);
  size_t kept = 0;
  for (size_t i = 0; i < n_; ++i) {
    const cotune_trace& t = space_->lower(config(i));
    EXPECT_EQ(out[i] == 1, t.gpus < 32) << "configuration " << i;
    kept += static_cast<size_t>(out[i] == 0);
  }
  EXPECT_GT(kept, 0u);
  EXPECT_TRUE(ConstraintEstimate(*space_, objective_with({{"val_loss", 3.0, std::nullopt}})).empty());
}

TEST_F(ConstraintEstimateTest, TheSearchContextScoresThemAsNotWorthATrial) {
  ConstraintEstimate e(*space_, objective_with({{"peak_mem_gib", median_gib_, std::nullopt}}));
  auto predictor = registry_.make_predictor("krr", surrogate_predictor_options("{}", "test"));
  Surrogate surrogate(*space_, *predictor, "tokens_per_s", Prior::kAnalytic, config(0));
  const std::unordered_set<std::string> seen;
  const SearchContext with(*space_, surrogate, Direction::kMaximize, seen, &e);
  const SearchContext without(*space_, surrogate, Direction::kMaximize, seen);
  std::vector<double> a(n_), b(n_);
  with.score(configs_.data(), n_, a.data(), nullptr);
  without.score(configs_.data(), n_, b.data(), nullptr);
  for (size_t i = 0; i < n_; ++i) {
    ASSERT_TRUE(std::isfinite(b[i]));
    if (memory_[i] > median_gib_) EXPECT_EQ(a[i], -std::numeric_limits<double>::infinity()) << "configuration " << i;
    else EXPECT_EQ(a[i], b[i]) << "configuration " << i;
  }
}

}  // namespace
}  // namespace cotune::core
