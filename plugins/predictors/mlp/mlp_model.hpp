// The mlp predictor's model: input checks, feature and target standardisation, the optional log
// transform, and the ensemble's mean and spread in target units.
#ifndef COTUNE_PREDICTOR_MLP_MODEL_HPP_
#define COTUNE_PREDICTOR_MLP_MODEL_HPP_

#include "mlp_ensemble.hpp"
#include "mlp_options.hpp"

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

namespace cotune_mlp {

class MlpModel {
 public:
  // Replaces any earlier fit. Throws cotune::Error(INVALID_ARGUMENT) on bad input.
  void fit(const double* x, size_t n, size_t d, const double* y, const double* w, const Options& options);

  // out_mean[i]: the mean of the networks' predictions in target units; out_std (may be NULL): their
  // sample standard deviation (0 with one network or a constant model). Throws FAILED_PRECONDITION
  // before fit() and INVALID_ARGUMENT on bad input.
  void predict(const double* x, size_t n, size_t d, double* out_mean, double* out_std);

  bool fitted() const { return d_ != 0; }
  std::string describe() const;

  void serialize(std::ostream& out) const;
  void deserialize(std::istream& in);  // throws on malformed input

 private:
  size_t d_ = 0;  // features; 0 until fitted
  bool log_target_ = true;
  bool constant_ = false;  // one row or constant targets: the mean is the model
  size_t rows_ = 0;
  std::vector<long> hidden_;
  std::vector<double> mean_, scale_;  // feature standardisation
  double target_mean_ = 0, target_scale_ = 1;
  Ensemble ensemble_;
};

}  // namespace cotune_mlp

#endif  // COTUNE_PREDICTOR_MLP_MODEL_HPP_
