#include <cotune/core/report/random_baseline.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cotune::core::report {
namespace {
// log C(n, k) for 0 <= k <= n; -inf when k > n (no way to choose).
double log_choose(double n, double k) {
  if (k < 0 || k > n) return -std::numeric_limits<double>::infinity();
  return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1);
}
}  // namespace

std::vector<double> expected_best_of_random(const std::vector<std::optional<double>>& values, Direction direction,
                                            const std::vector<size_t>& ks) {
  std::vector<double> feasible;
  for (const auto& v : values)
    if (v && std::isfinite(*v)) feasible.push_back(*v);
  // Worst first: with the infeasible ones below all of them, the feasible value at sorted position
  // i (1-based over all N) is the best of k draws with probability C(i-1, k-1) / C(N, k).
  if (direction == Direction::kMaximize) std::sort(feasible.begin(), feasible.end());
  else std::sort(feasible.begin(), feasible.end(), std::greater<double>());
  const double n = static_cast<double>(values.size());
  const double m = n - static_cast<double>(feasible.size());  // infeasible count
  std::vector<double> out;
  out.reserve(ks.size());
  for (size_t k : ks) {
    if (feasible.empty() || k == 0 || k > values.size()) {
      out.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    const double kd = static_cast<double>(k), total = log_choose(n, kd);
    const double p_none = std::exp(log_choose(m, kd) - total);
    double sum = 0;
    for (size_t j = 0; j < feasible.size(); ++j) {
      const double i = m + static_cast<double>(j) + 1;
      const double lp = log_choose(i - 1, kd - 1) - total;
      if (lp > -745) sum += feasible[j] * std::exp(lp);
    }
    out.push_back(sum / (1 - p_none));
  }
  return out;
}

}  // namespace cotune::core::report
