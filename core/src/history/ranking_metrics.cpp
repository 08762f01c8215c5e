#include <cotune/core/history/ranking_metrics.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace cotune::core {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void require_same_size(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw std::invalid_argument("predicted and measured differ in length");
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  const double n = double(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / n;
  const double mb = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  if (saa == 0 || sbb == 0) return kNaN;
  return sab / std::sqrt(saa * sbb);
}

int sign(double v) { return (v > 0) - (v < 0); }

}  // namespace

double kendall_tau(const std::vector<double>& p, const std::vector<double>& m) {
  require_same_size(p, m);
  if (p.size() < 2) return kNaN;
  // tau-b = (concordant - discordant) / sqrt((n0 - ties_p) (n0 - ties_m)).
  double s = 0, ties_p = 0, ties_m = 0, pairs = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    for (size_t j = i + 1; j < p.size(); ++j) {
      const int a = sign(p[i] - p[j]), b = sign(m[i] - m[j]);
      pairs += 1;
      if (a == 0) ties_p += 1;
      if (b == 0) ties_m += 1;
      s += a * b;
    }
  }
  const double denominator = std::sqrt((pairs - ties_p) * (pairs - ties_m));
  return denominator == 0 ? kNaN : s / denominator;
}

std::vector<double> average_ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> ranks(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double rank = (double(i) + double(j)) / 2 + 1;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}

double spearman_rho(const std::vector<double>& p, const std::vector<double>& m) {
  require_same_size(p, m);
  if (p.size() < 2) return kNaN;
  return pearson(average_ranks(p), average_ranks(m));
}

double mape(const std::vector<double>& p, const std::vector<double>& m) {
  require_same_size(p, m);
  double sum = 0;
  size_t n = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (m[i] == 0) continue;
    sum += std::fabs(p[i] - m[i]) / std::fabs(m[i]);
    ++n;
  }
  return n == 0 ? kNaN : 100.0 * sum / double(n);
}

double r_squared(const std::vector<double>& p, const std::vector<double>& m) {
  require_same_size(p, m);
  if (m.empty()) return kNaN;
  const double mean = std::accumulate(m.begin(), m.end(), 0.0) / double(m.size());
  double ss_res = 0, ss_tot = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    ss_res += (m[i] - p[i]) * (m[i] - p[i]);
    ss_tot += (m[i] - mean) * (m[i] - mean);
  }
  return ss_tot == 0 ? kNaN : 1.0 - ss_res / ss_tot;
}

bool predicted_best_in_top_k(const std::vector<double>& p, const std::vector<double>& m, size_t k, bool maximize) {
  require_same_size(p, m);
  if (p.empty() || k == 0) return false;
  auto better = [maximize](double a, double b) { return maximize ? a > b : a < b; };
  size_t chosen = 0;
  for (size_t i = 1; i < p.size(); ++i)
    if (better(p[i], p[chosen])) chosen = i;
  // Rows measured strictly better than the chosen one; within the top k when fewer than k are.
  size_t strictly_better = 0;
  for (size_t i = 0; i < m.size(); ++i)
    if (better(m[i], m[chosen])) ++strictly_better;
  return strictly_better < k;
}

}  // namespace cotune::core
