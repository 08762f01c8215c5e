#include "hyper_search.hpp"

#include "rbf_kernel.hpp"

#include <dlib/matrix.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace cotune_krr {
namespace {

using Matrix = dlib::matrix<double>;
using Vector = dlib::matrix<double, 0, 1>;

// Leave-one-out error of every lambda for one kernel matrix.
class LeaveOneOut {
 public:
  // kernel: W^1/2 K W^1/2 (m x m); sw: sqrt(weights); swy: sqrt(weights) * centred targets.
  LeaveOneOut(const Matrix& kernel, const Vector& sw, const Vector& swy, const Vector& weights)
      : sw_(sw), swy_(swy), weights_(weights) {
    dlib::eigenvalue_decomposition<Matrix> eig(dlib::make_symmetric(kernel));
    u_ = eig.get_pseudo_v();
    s_ = dlib::lowerbound(eig.get_real_eigenvalues(), 0.0);  // PSD up to rounding
    u2_ = dlib::squared(u_);
    z_ = dlib::trans(u_) * swy_;
    weight_sum_ = dlib::sum(weights_);
  }

  // Weighted mean squared leave-one-out residual; +inf when a row is interpolated exactly
  // (1 - H_ii ~ 0), where the formula has no meaning.
  double mse(double lambda) const {
    Vector shrink(s_.size());
    for (long k = 0; k < s_.size(); ++k) shrink(k) = s_(k) / (s_(k) + lambda);
    const Vector leverage = u2_ * shrink;
    const Vector fitted = u_ * dlib::pointwise_multiply(shrink, z_);  // W^1/2 f
    double total = 0;
    for (long i = 0; i < sw_.size(); ++i) {
      const double slack = 1.0 - leverage(i);
      if (!(slack > 1e-10)) return std::numeric_limits<double>::infinity();
      const double residual = (swy_(i) - fitted(i)) / sw_(i) / slack;
      total += weights_(i) * residual * residual;
    }
    return total / weight_sum_;
  }

 private:
  Vector sw_, swy_, weights_;
  Matrix u_, u2_;
  Vector s_, z_;
  double weight_sum_ = 0;
};

struct Candidate {
  double gamma = 0, lambda = 0, mse = std::numeric_limits<double>::infinity();
};

}  // namespace

double median_heuristic_gamma(const std::vector<double>& squared_distances, size_t m, size_t d) {
  std::vector<double> off_diagonal;
  off_diagonal.reserve(m * (m - 1) / 2);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = i + 1; j < m; ++j)
      if (squared_distances[i * m + j] > 0) off_diagonal.push_back(squared_distances[i * m + j]);
  if (off_diagonal.empty()) return 1.0 / double(d);
  auto mid = off_diagonal.begin() + off_diagonal.size() / 2;
  std::nth_element(off_diagonal.begin(), mid, off_diagonal.end());
  return 1.0 / *mid;
}

HyperParameters search_hyperparameters(const std::vector<double>& rows, size_t m, size_t d,
                                       const std::vector<double>& centred,
                                       const std::vector<double>& weights,
                                       std::optional<double> fixed_gamma,
                                       std::optional<double> fixed_lambda) {
  const PointSet points = PointSet::from_rows(rows.data(), m, d);
  std::vector<double> sq(m * m);
  squared_distances(rows.data(), m, points, sq.data());

  Vector sw(m), swy(m), w(m);
  for (size_t i = 0; i < m; ++i) {
    w(i) = weights[i];
    sw(i) = std::sqrt(weights[i]);
    swy(i) = sw(i) * centred[i];
  }

  // Lambdas from 1e-8 to 1e2 (weights have mean 1 and k(x, x) = 1, so this spans interpolation to
  // nearly the constant model).
  std::vector<double> lambdas;
  if (fixed_lambda) {
    lambdas.push_back(*fixed_lambda);
  } else {
    for (int i = 0; i <= 40; ++i) lambdas.push_back(std::pow(10.0, -8.0 + 0.25 * i));
  }

  Candidate best;
  auto try_gamma = [&](double gamma) {
    Matrix kernel(m, m);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < m; ++j) kernel(i, j) = sw(i) * sw(j) * std::exp(-gamma * sq[i * m + j]);
    const LeaveOneOut loo(kernel, sw, swy, w);
    for (double lambda : lambdas) {
      const double mse = loo.mse(lambda);
      if (mse < best.mse) best = Candidate{gamma, lambda, mse};
    }
  };

  if (fixed_gamma) {
    try_gamma(*fixed_gamma);
  } else {
    // A coarse grid four times apart around the median heuristic, then its two halfway neighbours.
    const double gamma0 = median_heuristic_gamma(sq, m, d);
    for (int k = -4; k <= 2; ++k) try_gamma(gamma0 * std::pow(4.0, k));
    if (std::isfinite(best.mse)) {
      const double centre = best.gamma;
      try_gamma(centre * 2.0);
      try_gamma(centre / 2.0);
    }
  }
  if (!std::isfinite(best.mse)) {
    // Every candidate interpolated some row exactly (tiny or duplicated data): fall back to the
    // heuristic width and the strongest ridge of the grid, which cannot interpolate.
    best.gamma = fixed_gamma ? *fixed_gamma : median_heuristic_gamma(sq, m, d);
    best.lambda = lambdas.back();
  }
  return HyperParameters{best.gamma, best.lambda, std::isfinite(best.mse) ? std::sqrt(best.mse) : std::nan("")};
}

}  // namespace cotune_krr
