#include "rbf_kernel.hpp"

#include <algorithm>
#include <cmath>

namespace cotune_krr {
namespace {

// Squared distances from one point x to every point of `c`, through |x|^2 + |c_j|^2 - 2 x.c_j so
// that the inner loop runs over contiguous memory and vectorises (clamped: rounding can dip < 0).
// The AVX2 clone is picked at load time on CPUs that have it; the default keeps the library portable.
__attribute__((target_clones("avx2", "default")))
void distances_from(const double* x, const PointSet& c, double* dist) {
  const size_t m = c.m;
  double xn = 0;
  for (size_t k = 0; k < c.d; ++k) xn += x[k] * x[k];
  std::fill(dist, dist + m, 0.0);
  for (size_t k = 0; k < c.d; ++k) {
    const double xk = -2.0 * x[k];
    const double* col = c.transposed.data() + k * m;
    for (size_t j = 0; j < m; ++j) dist[j] += xk * col[j];
  }
  const double* norms = c.norms.data();
  for (size_t j = 0; j < m; ++j) dist[j] = std::max(0.0, dist[j] + xn + norms[j]);
}

__attribute__((target_clones("avx2", "default")))
void exp_scaled(double* v, size_t m, double scale) {
  for (size_t j = 0; j < m; ++j) v[j] = std::exp(scale * v[j]);
}

__attribute__((target_clones("avx2", "default")))
double weighted_exp_sum(const double* dist, const double* alpha, size_t m, double scale) {
  double s = 0;
  for (size_t j = 0; j < m; ++j) s += alpha[j] * std::exp(scale * dist[j]);
  return s;
}

}  // namespace

PointSet PointSet::from_rows(const double* rows, size_t m, size_t d) {
  PointSet p;
  p.m = m;
  p.d = d;
  p.transposed.resize(m * d);
  p.norms.assign(m, 0.0);
  for (size_t j = 0; j < m; ++j)
    for (size_t k = 0; k < d; ++k) {
      const double v = rows[j * d + k];
      p.transposed[k * m + j] = v;
      p.norms[j] += v * v;
    }
  return p;
}

void squared_distances(const double* a, size_t na, const PointSet& b, double* out) {
  for (size_t i = 0; i < na; ++i) distances_from(a + i * b.d, b, out + i * b.m);
}

void rbf_matrix(const double* a, size_t na, const PointSet& b, double gamma, double* out) {
  for (size_t i = 0; i < na; ++i) {
    distances_from(a + i * b.d, b, out + i * b.m);
    exp_scaled(out + i * b.m, b.m, -gamma);
  }
}

void rbf_expansion(const PointSet& centres, const double* alpha, double gamma, const double* queries,
                   size_t nq, double* out) {
  std::vector<double> dist(centres.m);
  for (size_t i = 0; i < nq; ++i) {
    distances_from(queries + i * centres.d, centres, dist.data());
    out[i] = weighted_exp_sum(dist.data(), alpha, centres.m, -gamma);
  }
}

}  // namespace cotune_krr
