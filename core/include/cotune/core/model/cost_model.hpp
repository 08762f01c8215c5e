// A learned additive cost model: the step time as a non-negative combination of a space's cost terms.
//
// A space that knows how its step time is spent (compute at peak rate, pipeline bubble, memory
// traffic, bytes over each network level) describes each configuration by a few non-negative terms
// (cotune_space_api.cost_terms); the step time is then close to sum_k w_k * term_k for rates w_k >= 0
// that no catalogue gives exactly (achieved efficiencies, overlap). The rates are learned here from
// measurements by non-negative least squares on the relative error, so a dozen measurements fit a
// model that already ranks layouts the way time is spent, where a kernel regression on the raw
// features would need hundreds. The metric is the modelled time to the power +1 (step time, cost)
// or -1 (throughput, MFU): fit() tries both and keeps the better fit.
#ifndef COTUNE_CORE_MODEL_COST_MODEL_HPP_
#define COTUNE_CORE_MODEL_COST_MODEL_HPP_

#include <cstddef>
#include <vector>

namespace cotune::core {

class CostModel {
 public:
  explicit CostModel(size_t num_terms) : num_terms_(num_terms) {}

  size_t num_terms() const { return num_terms_; }
  // True once fit() found rates that are not all zero.
  bool fitted() const { return fitted_; }
  // +1 when the metric grows with time, -1 when it falls with it (valid once fitted).
  int exponent() const { return exponent_; }
  const std::vector<double>& rates() const { return rates_; }

  // Fits on n rows of num_terms() terms (row-major, non-negative) and their positive measured
  // metric values. Returns fitted(); fewer rows than two, or terms that explain nothing, leave it
  // unfitted.
  bool fit(const double* terms, size_t n, const double* values);

  // The modelled metric of one row of terms; 0 when the modelled time is 0 (no term applies).
  double predict(const double* terms) const;

 private:
  // Rates for targets tau (the time in the metric's unit) by NNLS on relative errors; returns the
  // weighted sum of squared relative errors.
  double fit_rates(const double* terms, size_t n, const std::vector<double>& tau, std::vector<double>* rates) const;

  size_t num_terms_;
  bool fitted_ = false;
  int exponent_ = 1;
  std::vector<double> rates_;
};

}  // namespace cotune::core

#endif  // COTUNE_CORE_MODEL_COST_MODEL_HPP_
