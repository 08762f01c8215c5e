// The evaluation metrics against values computed by hand on tiny datasets.
#include <cotune/core/history/ranking_metrics.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace cotune::core {
namespace {

TEST(RankingMetrics, KendallTauByHand) {
  // Pairs of (1,2,3,4) vs (1,3,2,4): 5 concordant, 1 discordant -> (5 - 1) / 6.
  EXPECT_NEAR(kendall_tau({1, 2, 3, 4}, {1, 3, 2, 4}), 4.0 / 6.0, 1e-12);
  EXPECT_NEAR(kendall_tau({1, 2, 3}, {3, 2, 1}), -1.0, 1e-12);
  // With a tie in the prediction: (1,1,2) vs (1,2,3): pairs (0,1) tied in p, (0,2) and (1,2)
  // concordant. tau-b = 2 / sqrt((3 - 1) * 3).
  EXPECT_NEAR(kendall_tau({1, 1, 2}, {1, 2, 3}), 2.0 / std::sqrt(6.0), 1e-12);
  EXPECT_TRUE(std::isnan(kendall_tau({1}, {2})));
  EXPECT_TRUE(std::isnan(kendall_tau({1, 1}, {1, 2})));
}

TEST(RankingMetrics, SpearmanByHand) {
  // Ranks (1,2,3,4) vs (1,3,2,4): d^2 = 0+1+1+0 = 2 -> 1 - 6*2 / (4*15) = 0.8.
  EXPECT_NEAR(spearman_rho({10, 20, 30, 40}, {1, 3, 2, 4}), 0.8, 1e-12);
  EXPECT_NEAR(spearman_rho({1, 2, 3}, {30, 20, 10}), -1.0, 1e-12);
  const auto r = average_ranks({5, 1, 5, 3});
  EXPECT_DOUBLE_EQ(r[0], 3.5);
  EXPECT_DOUBLE_EQ(r[1], 1.0);
  EXPECT_DOUBLE_EQ(r[2], 3.5);
  EXPECT_DOUBLE_EQ(r[3], 2.0);
}

TEST(RankingMetrics, MapeAndRSquaredByHand) {
  // |110-100|/100 = 0.1, |45-50|/50 = 0.1 -> 10 %.
  EXPECT_NEAR(mape({110, 45}, {100, 50}), 10.0, 1e-12);
  // m = (1,2,3), mean 2, SS_tot = 2; p = (1,2,4): SS_res = 1 -> R^2 = 0.5.
  EXPECT_NEAR(r_squared({1, 2, 4}, {1, 2, 3}), 0.5, 1e-12);
  EXPECT_TRUE(std::isnan(r_squared({1, 2}, {3, 3})));
}

TEST(RankingMetrics, TopK) {
  // Predicted best (maximise) is row 2; measured order: row 0 (9) > row 2 (7) > row 1 (1).
  EXPECT_FALSE(predicted_best_in_top_k({1, 2, 3}, {9, 1, 7}, 1, true));
  EXPECT_TRUE(predicted_best_in_top_k({1, 2, 3}, {9, 1, 7}, 3, true));
  EXPECT_TRUE(predicted_best_in_top_k({1, 2, 3}, {9, 1, 7}, 2, true));
  // Minimise: predicted best is row 0 (1), measured best is row 0 (2).
  EXPECT_TRUE(predicted_best_in_top_k({1, 2, 3}, {2, 5, 4}, 1, false));
  EXPECT_THROW(kendall_tau({1, 2}, {1}), std::invalid_argument);
}

}  // namespace
}  // namespace cotune::core
