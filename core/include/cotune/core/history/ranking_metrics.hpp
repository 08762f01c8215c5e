// How well predictions rank and match measurements: the figures of `cotune predictor eval`, the
// search benchmarks and the report. All take predicted and measured values of the same rows.
#ifndef COTUNE_CORE_HISTORY_RANKING_METRICS_HPP_
#define COTUNE_CORE_HISTORY_RANKING_METRICS_HPP_

#include <cstddef>
#include <vector>

namespace cotune::core {

// Kendall's tau-b (ties in either list handled); NaN with fewer than 2 rows or when one list is
// constant. O(n^2), fine for the thousands of rows an evaluation holds.
double kendall_tau(const std::vector<double>& predicted, const std::vector<double>& measured);

// Spearman's rho: Pearson correlation of the ranks (ties get their average rank).
double spearman_rho(const std::vector<double>& predicted, const std::vector<double>& measured);

// Mean absolute percentage error, in percent: mean(|p - m| / |m|) * 100 over rows with m != 0.
double mape(const std::vector<double>& predicted, const std::vector<double>& measured);

// Coefficient of determination 1 - SS_res / SS_tot; NaN when the measurements are constant.
double r_squared(const std::vector<double>& predicted, const std::vector<double>& measured);

// Whether the row predicted best is the measured best (top-1), or among the measured best `k`
// (ties in the measurement count in the row's favour). `maximize` says which way is best.
bool predicted_best_in_top_k(const std::vector<double>& predicted, const std::vector<double>& measured,
                             size_t k, bool maximize);

// Average ranks (1-based; ties share their mean rank).
std::vector<double> average_ranks(const std::vector<double>& values);

}  // namespace cotune::core

#endif  // COTUNE_CORE_HISTORY_RANKING_METRICS_HPP_
