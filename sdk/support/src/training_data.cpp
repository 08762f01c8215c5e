#include <cotune/support/training_data.hpp>

#include <cotune/cotune.hpp>

#include <cmath>
#include <string>

namespace cotune::support {
namespace {
[[noreturn]] void invalid(const char* who, const std::string& what) {
  throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, std::string(who) + ": " + what);
}
}  // namespace

void check_features(const char* who, const double* x, size_t n, size_t d) {
  if (n == 0) invalid(who, "no rows (n = 0); expected at least one configuration");
  if (d == 0) invalid(who, "no features (d = 0); expected at least one feature per row");
  if (x == nullptr) invalid(who, "the feature matrix is NULL");
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < d; ++j)
      if (!std::isfinite(x[i * d + j]))
        invalid(who, "feature " + std::to_string(j) + " of row " + std::to_string(i) + " is " +
                         std::to_string(x[i * d + j]) + "; expected a finite number");
}

void check_targets(const char* who, const double* y, size_t n, bool log_target) {
  if (y == nullptr) invalid(who, "the target vector is NULL");
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(y[i]))
      invalid(who, "target of row " + std::to_string(i) + " is " + std::to_string(y[i]) +
                       "; expected a finite number");
    if (log_target && !(y[i] > 0))
      invalid(who, "target of row " + std::to_string(i) + " is " + std::to_string(y[i]) +
                       "; the log transform needs targets > 0 (use options {\"log\": false} for "
                       "targets that may be zero or negative)");
  }
}

std::vector<double> checked_weights(const char* who, const double* w, size_t n) {
  std::vector<double> out(n, 1.0);
  if (w == nullptr) return out;
  double sum = 0;
  size_t positive = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(w[i]) || w[i] < 0)
      invalid(who, "weight of row " + std::to_string(i) + " is " + std::to_string(w[i]) +
                       "; expected a finite number >= 0");
    sum += w[i];
    positive += w[i] > 0;
  }
  if (positive == 0) invalid(who, "every weight is 0; expected at least one positive weight");
  const double mean = sum / double(positive);
  for (size_t i = 0; i < n; ++i) out[i] = w[i] / mean;
  return out;
}

}  // namespace cotune::support
