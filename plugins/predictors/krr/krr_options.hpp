// Options of the krr predictor (the JSON object given at create()).
//
//   log          true   fit log(target) and predict exp(.): for positive metrics (throughput, step
//                       time) whose errors are relative. The host passes {"log": false} when it
//                       fits residuals against the analytic prior, which may be negative.
//   log_features true   compare features that span decades on a log-like scale (krr_model.hpp).
//   gamma        auto   RBF kernel width over standardised features: k(a,b) = exp(-gamma |a-b|^2).
//   lambda       auto   ridge regularisation (weights are scaled to mean 1).
//   search_size  200    rows used to choose gamma and lambda by leave-one-out; larger fits subsample.
//   max_basis    1000   kernel centres: up to this many rows the fit is exact; beyond it a Nystrom
//                       (subset of regressors) fit on a seeded random subset keeps fit and predict
//                       costs bounded.
//   seed         0      seeds the subsampling, so equal inputs give equal models.
#ifndef COTUNE_PREDICTOR_KRR_OPTIONS_HPP_
#define COTUNE_PREDICTOR_KRR_OPTIONS_HPP_

#include <cstdint>
#include <optional>
#include <string_view>

namespace cotune_krr {

struct Options {
  bool log_target = true;
  bool log_features = true;
  std::optional<double> gamma;
  std::optional<double> lambda;
  size_t search_size = 200;
  size_t max_basis = 1000;
  uint64_t seed = 0;
};

// Parses the options JSON ("" means {}); throws cotune::Error(INVALID_ARGUMENT) naming the field.
Options parse_options(std::string_view json);

}  // namespace cotune_krr

#endif  // COTUNE_PREDICTOR_KRR_OPTIONS_HPP_
