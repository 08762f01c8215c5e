// Radial basis function kernel arithmetic, k(a, b) = exp(-gamma |a - b|^2), over row-major points.
// These loops are the hot path of both fit() and predict() and are compiled for speed (see
// CMakeLists.txt); callers pass only finite values.
#ifndef COTUNE_PREDICTOR_KRR_RBF_KERNEL_HPP_
#define COTUNE_PREDICTOR_KRR_RBF_KERNEL_HPP_

#include <cstddef>
#include <vector>

namespace cotune_krr {

// Points stored for fast distance computation: the transpose (d x m) and each point's squared norm.
struct PointSet {
  size_t m = 0, d = 0;
  std::vector<double> transposed;  // transposed[k * m + j] = coordinate k of point j
  std::vector<double> norms;       // |point j|^2

  static PointSet from_rows(const double* rows, size_t m, size_t d);
};

// out[i * b.m + j] = |a_i - b_j|^2 for the na rows of `a` (row-major, b.d columns).
void squared_distances(const double* a, size_t na, const PointSet& b, double* out);

// out[i * b.m + j] = exp(-gamma |a_i - b_j|^2).
void rbf_matrix(const double* a, size_t na, const PointSet& b, double gamma, double* out);

// out[i] = sum_j alpha[j] exp(-gamma |q_i - c_j|^2) for the nq rows of `queries`.
void rbf_expansion(const PointSet& centres, const double* alpha, double gamma, const double* queries,
                   size_t nq, double* out);

}  // namespace cotune_krr

#endif  // COTUNE_PREDICTOR_KRR_RBF_KERNEL_HPP_
