// OomBound through the real llm space: which configurations trials that ran out of memory say will
// run out too, and the search context scoring those as not worth a trial.
#include <cotune/core/model/oom_bound.hpp>
#include <cotune/core/model/surrogate.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/run/search_context.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_set>

namespace cotune::core {
namespace {

const char* kWorkload = R"({"model": {"preset": "llama3-8b"}, "training": {"global_batch": 256},
                            "cluster": {"gpu": "h100-sxm", "nodes": 4, "gpus_per_node": 8}})";

class OomBoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.load_directories({COTUNE_PLUGIN_DIR});
    space_ = registry_.make_space("llm", kWorkload);
    configs_.resize(300 * space_->num_params());
    n_ = space_->sample(17, 300, configs_.data());
    ASSERT_GE(n_, 100u);
    OomBound probe(*space_);
    for (size_t i = 0; i < n_; ++i) {
      const std::optional<double> s = probe.share(config(i));
      ASSERT_TRUE(s.has_value()) << "configuration " << i;
      share_.push_back(*s);
    }
    // The configurations by share, smallest first.
    order_.resize(n_);
    std::iota(order_.begin(), order_.end(), size_t{0});
    std::sort(order_.begin(), order_.end(), [&](size_t a, size_t b) { return share_[a] < share_[b]; });
    ASSERT_LT(share_[order_.front()] * 1.5, share_[order_.back()]) << "the sample needs a spread of memory";
  }

  const double* config(size_t i) const { return configs_.data() + i * space_->num_params(); }
  size_t at_quantile(double q) const { return order_[static_cast<size_t>(q * static_cast<double>(n_ - 1))]; }
  std::vector<int32_t> breaks(const OomBound& b) const {
    std::vector<int32_t> out(n_);
    b.breaks(configs_.data(), n_, out.data());
    return out;
  }

  Registry registry_;
  std::unique_ptr<Space> space_;
  std::vector<double> configs_;
  std::vector<double> share_;  // each configuration's estimated share of its GPU's memory
  std::vector<size_t> order_;
  size_t n_ = 0;
};

TEST_F(OomBoundTest, TheShareIsTheEstimateOverTheGpusMemory) {
  const cotune_trace& t = space_->lower(config(0));
  const cotune_memory& m = t.memory;
  const double used = m.weights + m.gradients + m.optimizer + m.activations + m.buffers;
  EXPECT_DOUBLE_EQ(share_[0], used / t.hardware.hbm_bytes);
  EXPECT_NEAR(t.hardware.hbm_bytes / 1073741824.0, 79.6, 0.05);  // an H100 as its driver reports it
}

TEST_F(OomBoundTest, NothingBindsWithoutATrialThatRanOutOfMemory) {
  OomBound b(*space_);
  for (size_t i = 0; i < 20; ++i) b.learn(config(i), false);
  EXPECT_FALSE(b.learned_oom());
  EXPECT_FALSE(b.update());
  EXPECT_FALSE(b.bound().has_value());
  const std::vector<int32_t> out = breaks(b);
  EXPECT_EQ(std::count(out.begin(), out.end(), 1), 0);
}

TEST_F(OomBoundTest, ConfigurationsEstimatedAtTheShareThatRanOutOrMoreBreakIt) {
  OomBound b(*space_);
  const size_t ran = at_quantile(0.3), oom = at_quantile(0.6), tighter = at_quantile(0.45);
  ASSERT_LT(share_[ran], share_[tighter]);
  ASSERT_LT(share_[tighter], share_[oom]);
  b.learn(config(ran), false);
  b.learn(config(oom), true);
  EXPECT_FALSE(b.bound().has_value()) << "the bound moves only at update()";
  EXPECT_TRUE(b.update());
  ASSERT_TRUE(b.bound().has_value());
  EXPECT_DOUBLE_EQ(*b.bound(), share_[oom]);
  EXPECT_FALSE(b.update()) << "nothing new was learned";
  const std::vector<int32_t> out = breaks(b);
  size_t marked = 0;
  for (size_t i = 0; i < n_; ++i) {
    EXPECT_EQ(out[i] == 1, share_[i] >= share_[oom]) << "configuration " << i << ": share " << share_[i];
    marked += static_cast<size_t>(out[i]);
  }
  EXPECT_GT(marked, n_ / 5);
  EXPECT_LT(marked, n_ / 2);
  // A second trial that ran out of memory at a smaller share (still above every run) tightens it.
  b.learn(config(tighter), true);
  EXPECT_TRUE(b.update());
  EXPECT_DOUBLE_EQ(*b.bound(), share_[tighter]);
}

TEST_F(OomBoundTest, AnOutOfMemoryTrialBelowAShareThatRanBoundsNothing) {
  // The estimate's order says it should have fitted: another cause (a fragmented allocator, a
  // neighbour's job) is as likely, and it must not take out everything above it.
  OomBound b(*space_);
  ASSERT_LT(share_[at_quantile(0.5)], share_[at_quantile(0.8)]);
  b.learn(config(at_quantile(0.8)), false);
  b.learn(config(at_quantile(0.5)), true);
  EXPECT_TRUE(b.learned_oom());
  EXPECT_FALSE(b.update());
  EXPECT_FALSE(b.bound().has_value());
}

TEST_F(OomBoundTest, ARunAboveTheBoundMovesItToTheNextShareThatRanOut) {
  OomBound b(*space_);
  const size_t low = at_quantile(0.4), high = at_quantile(0.7);
  ASSERT_LT(share_[at_quantile(0.2)], share_[low]);
  ASSERT_LT(share_[low], share_[at_quantile(0.5)]);
  ASSERT_LT(share_[at_quantile(0.5)], share_[high]);
  ASSERT_LT(share_[high], share_[at_quantile(0.9)]);
  b.learn(config(at_quantile(0.2)), false);
  b.learn(config(low), true);
  b.learn(config(high), true);
  ASSERT_TRUE(b.update());
  EXPECT_DOUBLE_EQ(*b.bound(), share_[low]);
  b.learn(config(at_quantile(0.5)), false);  // ran, above the first out-of-memory share
  EXPECT_TRUE(b.update());
  EXPECT_DOUBLE_EQ(*b.bound(), share_[high]);
  b.learn(config(at_quantile(0.9)), false);  // and above the second
  EXPECT_TRUE(b.update());
  EXPECT_FALSE(b.bound().has_value());
}

TEST_F(OomBoundTest, ASpaceThatDoesNotLowerIsNeverBound) {
  ASSERT_TRUE(registry_.load_file(COTUNE_BINARY_DIR "/lib/cotune/test-plugins/libcotune-space-testgrid.so"));
  auto grid = registry_.make_space("testgrid", "{}", "{}");
  std::vector<double> rows(8 * grid->num_params());
  const size_t n = grid->sample(3, 8, rows.data());
  ASSERT_GT(n, 2u);
  OomBound b(*grid);
  EXPECT_FALSE(b.share(rows.data()).has_value());
  b.learn(rows.data(), false);
  b.learn(rows.data() + grid->num_params(), true);
  EXPECT_TRUE(b.learned_oom());
  EXPECT_FALSE(b.update());
  std::vector<int32_t> out(n, 7);
  b.breaks(rows.data(), n, out.data());
  EXPECT_EQ(std::count(out.begin(), out.end(), 0), static_cast<std::ptrdiff_t>(n));
}

TEST_F(OomBoundTest, TheSearchScoresWhatWouldRunOutAsNotWorthATrial) {
  auto predictor = registry_.make_predictor("krr");
  Surrogate surrogate(*space_, *predictor, "tokens_per_s", Prior::kAnalytic, config(0));
  const std::unordered_set<std::string> seen;
  OomBound b(*space_);
  b.learn(config(at_quantile(0.2)), false);
  b.learn(config(at_quantile(0.5)), true);
  ASSERT_TRUE(b.update());
  SearchContext context(*space_, surrogate, Direction::kMaximize, seen, nullptr, &b);
  SearchContext unbound(*space_, surrogate, Direction::kMaximize, seen);
  std::vector<double> score(n_), free_score(n_);
  context.score(configs_.data(), n_, score.data(), nullptr);
  unbound.score(configs_.data(), n_, free_score.data(), nullptr);
  for (size_t i = 0; i < n_; ++i) {
    ASSERT_TRUE(std::isfinite(free_score[i])) << "configuration " << i;
    if (share_[i] >= *b.bound()) EXPECT_EQ(score[i], -std::numeric_limits<double>::infinity()) << i;
    else EXPECT_EQ(score[i], free_score[i]) << i;
  }
}

}  // namespace
}  // namespace cotune::core
