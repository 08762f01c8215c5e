// Chooses the RBF width (gamma) and ridge (lambda) of a weighted kernel ridge regression by
// leave-one-out error, which kernel ridge gets in closed form: with the hat matrix H, the
// leave-one-out residual of row i is e_i / (1 - H_ii). One eigendecomposition per gamma,
// W^1/2 K W^1/2 = U S U^T, gives H for every lambda in O(m^2) (H = W^-1/2 U S(S+lambda)^-1 U^T W^1/2),
// so a whole lambda grid costs less than one more factorisation.
#ifndef COTUNE_PREDICTOR_KRR_HYPER_SEARCH_HPP_
#define COTUNE_PREDICTOR_KRR_HYPER_SEARCH_HPP_

#include <cstddef>
#include <optional>
#include <vector>

namespace cotune_krr {

struct HyperParameters {
  double gamma = 0;
  double lambda = 0;    // for the m rows searched on (scale with the row count for more rows)
  double loo_rmse = 0;  // weighted leave-one-out root mean squared error at (gamma, lambda)
};

// `rows` holds m standardised rows of d features, `centred` the targets minus their weighted mean,
// `weights` positive weights of mean 1. A fixed gamma or lambda is kept and only the other searched.
HyperParameters search_hyperparameters(const std::vector<double>& rows, size_t m, size_t d,
                                       const std::vector<double>& centred,
                                       const std::vector<double>& weights,
                                       std::optional<double> fixed_gamma,
                                       std::optional<double> fixed_lambda);

// The median heuristic: 1 / median squared distance between distinct rows (1/d when all coincide).
double median_heuristic_gamma(const std::vector<double>& squared_distances, size_t m, size_t d);

}  // namespace cotune_krr

#endif  // COTUNE_PREDICTOR_KRR_HYPER_SEARCH_HPP_
