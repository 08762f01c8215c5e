#include <cotune/core/model/cost_model.hpp>

#include <algorithm>
#include <cmath>

namespace cotune::core {

double CostModel::fit_rates(const double* terms, size_t n, const std::vector<double>& tau,
                            std::vector<double>* rates) const {
  const size_t k = num_terms_;
  // Normal equations of min sum_i (1 - t_i . w / tau_i)^2 over w >= 0, on columns scaled to unit
  // mean so that terms in seconds and in bytes are solved alike.
  std::vector<double> scale(k, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t a = 0; a < k; ++a) scale[a] += terms[i * k + a] / tau[i];
  for (double& s : scale) s = s > 0 ? static_cast<double>(n) / s : 0.0;
  std::vector<double> gram(k * k, 0.0), rhs(k, 0.0);
  std::vector<double> row(k);
  for (size_t i = 0; i < n; ++i) {
    for (size_t a = 0; a < k; ++a) row[a] = terms[i * k + a] * scale[a] / tau[i];
    for (size_t a = 0; a < k; ++a) {
      rhs[a] += row[a];
      for (size_t b = 0; b < k; ++b) gram[a * k + b] += row[a] * row[b];
    }
  }
  // A touch of ridge keeps collinear terms (a term that is another times a constant) solvable.
  for (size_t a = 0; a < k; ++a) gram[a * k + a] += 1e-6 * gram[a * k + a];
  // Cyclic coordinate descent with projection onto w >= 0: exact for a problem this small (k of
  // about ten) and converges monotonically, since the objective is a convex quadratic.
  std::vector<double> w(k, 0.0);
  for (int sweep = 0; sweep < 10000; ++sweep) {
    double largest_step = 0;
    for (size_t a = 0; a < k; ++a) {
      if (gram[a * k + a] <= 0) continue;
      double r = rhs[a];
      for (size_t b = 0; b < k; ++b)
        if (b != a) r -= gram[a * k + b] * w[b];
      const double next = std::max(0.0, r / gram[a * k + a]);
      largest_step = std::max(largest_step, std::fabs(next - w[a]) * std::sqrt(gram[a * k + a]));
      w[a] = next;
    }
    if (largest_step < 1e-12) break;
  }
  double sse = 0;
  for (size_t i = 0; i < n; ++i) {
    double fitted = 0;
    for (size_t a = 0; a < k; ++a) fitted += terms[i * k + a] * scale[a] * w[a];
    sse += (1 - fitted / tau[i]) * (1 - fitted / tau[i]);
  }
  rates->assign(k, 0.0);
  for (size_t a = 0; a < k; ++a) (*rates)[a] = w[a] * scale[a];
  return sse;
}

bool CostModel::fit(const double* terms, size_t n, const double* values) {
  fitted_ = false;
  rates_.assign(num_terms_, 0.0);
  if (n < 2 || num_terms_ == 0) return false;
  double best = -1;
  for (int exponent : {1, -1}) {
    std::vector<double> tau(n);
    for (size_t i = 0; i < n; ++i) tau[i] = exponent > 0 ? values[i] : 1.0 / values[i];
    std::vector<double> rates;
    const double sse = fit_rates(terms, n, tau, &rates);
    const bool any = std::any_of(rates.begin(), rates.end(), [](double r) { return r > 0; });
    if (any && (best < 0 || sse < best)) {
      best = sse;
      exponent_ = exponent;
      rates_ = rates;
      fitted_ = true;
    }
  }
  return fitted_;
}

double CostModel::predict(const double* terms) const {
  double time = 0;
  for (size_t a = 0; a < num_terms_; ++a) time += rates_[a] * terms[a];
  if (!(time > 0)) return 0;
  return exponent_ > 0 ? time : 1.0 / time;
}

}  // namespace cotune::core
