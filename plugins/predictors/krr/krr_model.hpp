// A fitted weighted kernel ridge regression with an RBF kernel over standardised features.
//
// Non-negative features spread multiplicatively in the training rows (FLOPs, bytes, parallel
// degrees: powers of two over decades; krr_model.cpp, compression_scale(), says how it tells them
// from a feature spread evenly from 0) are first mapped by asinh(x / s), s their smallest positive value: logarithmic for large
// values, linear through 0, so that 2 and 4 are about as far apart as 512 and 1024. On raw values
// a few large entries would dominate every distance.
//
// Fit: minimise sum_i w_i (t_i - f(x_i))^2 + lambda |f|^2 over f = b + sum_j alpha_j k(c_j, .), where
// t is the (log-)target, b its weighted mean and the centres c_j are the training rows (exact, up to
// max_basis rows) or a seeded random subset of them (Nystrom / subset of regressors, above). dlib's
// krr_trainer has no weights, so the weighted system is solved here with dlib matrices:
//   exact:   (W^1/2 K W^1/2 + lambda I) beta = W^1/2 t,  alpha = W^1/2 beta
//   Nystrom: phi = K_nm V S^-1/2 (K_mm = V S V^T), (phi^T W phi + lambda I) beta = phi^T W t,
//            alpha = V S^-1/2 beta
// Gamma and lambda come from leave-one-out on up to search_size rows (hyper_search.hpp); lambda is
// then scaled by rows / searched rows, since the data term of the objective grows with the rows.
#ifndef COTUNE_PREDICTOR_KRR_MODEL_HPP_
#define COTUNE_PREDICTOR_KRR_MODEL_HPP_

#include "krr_options.hpp"
#include "rbf_kernel.hpp"

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

namespace cotune_krr {

class KrrModel {
 public:
  // Replaces any earlier fit. Throws cotune::Error(INVALID_ARGUMENT) on bad input.
  void fit(const double* x, size_t n, size_t d, const double* y, const double* w, const Options& options);
  // Throws FAILED_PRECONDITION before fit() and INVALID_ARGUMENT on bad input.
  void predict(const double* x, size_t n, size_t d, double* out) const;

  bool fitted() const { return d_ != 0; }
  std::string describe() const;  // JSON: gamma, lambda, loo_error, n, d, ...

  void serialize(std::ostream& out) const;
  // Throws dlib::serialization_error on malformed input. Without `with_compression` (the format
  // before the log compression), no feature is compressed.
  void deserialize(std::istream& in, bool with_compression);

 private:
  double compressed(double v, size_t k) const;
  void standardise(const double* rows, size_t n, double* out) const;
  void set_centres(std::vector<double> rows);

  size_t d_ = 0;             // features; 0 until fitted
  bool log_target_ = true;
  std::vector<double> compress_;      // per feature: 0, or s in asinh(x / s) before standardising
  std::vector<double> mean_, scale_;  // standardisation, per feature
  double offset_ = 0;        // weighted mean of the (log-)targets
  std::string method_;       // "exact", "nystrom" or "constant"
  double gamma_ = 0, lambda_ = 0, loo_rmse_ = 0;
  size_t rows_ = 0;          // rows fitted on (positive weight)
  size_t search_rows_ = 0;   // rows the hyper-parameters were chosen on
  std::vector<double> centre_rows_;  // m x d, standardised
  std::vector<double> alpha_;
  PointSet centres_;         // centre_rows_ laid out for the kernel sums
};

}  // namespace cotune_krr

#endif  // COTUNE_PREDICTOR_KRR_MODEL_HPP_
