// Checks what fit() and predict() receive, so that no NaN, inf or shape mistake reaches the model.
#ifndef COTUNE_SUPPORT_TRAINING_DATA_HPP_
#define COTUNE_SUPPORT_TRAINING_DATA_HPP_

#include <cstddef>
#include <vector>

namespace cotune::support {

// Throws cotune::Error(INVALID_ARGUMENT) unless x is a non-empty n x d matrix of finite values.
void check_features(const char* who, const double* x, size_t n, size_t d);

// Throws unless every target is finite (and > 0 when `log_target`).
void check_targets(const char* who, const double* y, size_t n, bool log_target);

// The weights to fit with: all 1 when w is NULL; otherwise checked (finite, >= 0, not all 0) and
// scaled to mean 1 over the rows with a positive weight.
std::vector<double> checked_weights(const char* who, const double* w, size_t n);

}  // namespace cotune::support

#endif  // COTUNE_SUPPORT_TRAINING_DATA_HPP_
