#include "mlp_model.hpp"

#include <cotune/cotune.hpp>
#include <cotune/support/training_data.hpp>
#include <dlib/serialize.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace cotune_mlp {

void MlpModel::fit(const double* x, size_t n, size_t d, const double* y, const double* w, const Options& options) {
  cotune::support::check_features("mlp fit", x, n, d);
  cotune::support::check_targets("mlp fit", y, n, options.log_target);
  const std::vector<double> weights = cotune::support::checked_weights("mlp fit", w, n);

  // Rows with weight 0 take no part in the fit.
  std::vector<size_t> kept;
  for (size_t i = 0; i < n; ++i)
    if (weights[i] > 0) kept.push_back(i);
  const size_t rows = kept.size();

  MlpModel m;
  m.d_ = d;
  m.log_target_ = options.log_target;
  m.rows_ = rows;
  m.hidden_ = options.hidden;
  m.mean_.assign(d, 0.0);
  m.scale_.assign(d, 1.0);
  for (size_t k = 0; k < d; ++k) {
    double sum = 0, sum_sq = 0;
    for (size_t i : kept) sum += x[i * d + k];
    const double mean = sum / double(rows);
    for (size_t i : kept) sum_sq += (x[i * d + k] - mean) * (x[i * d + k] - mean);
    const double sd = std::sqrt(sum_sq / double(rows));
    m.mean_[k] = mean;
    // A constant column carries no information: scale 1 keeps it at 0 instead of dividing by 0.
    m.scale_[k] = sd > 1e-12 * std::max(1.0, std::fabs(mean)) ? sd : 1.0;
  }

  std::vector<double> target, weight;
  double weight_sum = 0, weighted_sum = 0;
  for (size_t i : kept) {
    target.push_back(options.log_target ? std::log(y[i]) : y[i]);
    weight.push_back(weights[i]);
    weight_sum += weights[i];
    weighted_sum += weights[i] * target.back();
  }
  m.target_mean_ = weighted_sum / weight_sum;
  double variance = 0;
  for (size_t i = 0; i < rows; ++i) variance += weight[i] * (target[i] - m.target_mean_) * (target[i] - m.target_mean_);
  const double sd = std::sqrt(variance / weight_sum);
  m.constant_ = rows == 1 || sd <= 1e-12 * std::max(1.0, std::fabs(m.target_mean_));
  if (!m.constant_) {
    m.target_scale_ = sd;
    std::vector<float> z(rows * d), t(rows);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t k = 0; k < d; ++k) z[r * d + k] = float((x[kept[r] * d + k] - m.mean_[k]) / m.scale_[k]);
      t[r] = float((target[r] - m.target_mean_) / m.target_scale_);
    }
    m.ensemble_.train(z, rows, d, t, weight, options);
  }
  *this = std::move(m);
}

void MlpModel::predict(const double* x, size_t n, size_t d, double* out_mean, double* out_std) {
  if (!fitted())
    throw cotune::Error(COTUNE_ERR_FAILED_PRECONDITION, "mlp predict: the model is not fitted; call fit() or load() first");
  if (d != d_)
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "mlp predict: rows have " + std::to_string(d) +
                                                         " features but the model was fitted on " +
                                                         std::to_string(d_));
  if (out_mean == nullptr) throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "mlp predict: out_mean is NULL");
  cotune::support::check_features("mlp predict", x, n, d);
  auto to_target = [&](double standardised) {
    const double t = target_mean_ + target_scale_ * standardised;
    return log_target_ ? std::exp(t) : t;
  };
  if (constant_) {
    std::fill(out_mean, out_mean + n, to_target(0.0));
    if (out_std != nullptr) std::fill(out_std, out_std + n, 0.0);
    return;
  }
  std::vector<float> z(n * d);
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < d; ++k) z[i * d + k] = float((x[i * d + k] - mean_[k]) / scale_[k]);
  std::vector<float> members;
  ensemble_.predict(z.data(), n, d, members);
  const size_t count = ensemble_.size();
  for (size_t i = 0; i < n; ++i) {
    double sum = 0, sum_sq = 0;
    for (size_t k = 0; k < count; ++k) {
      const double v = to_target(members[k * n + i]);
      sum += v;
      sum_sq += v * v;
    }
    const double mean = sum / double(count);
    out_mean[i] = mean;
    if (out_std != nullptr)
      out_std[i] = count > 1 ? std::sqrt(std::max(0.0, (sum_sq - double(count) * mean * mean) / double(count - 1))) : 0.0;
  }
}

std::string MlpModel::describe() const {
  if (!fitted()) return R"({"fitted":false})";
  nlohmann::json members = nlohmann::json::array();
  double loss_sum = 0;
  size_t with_validation = 0;
  for (const MemberReport& r : ensemble_.reports()) {
    const bool validated = r.validation_rows > 0;
    members.push_back({{"epochs", r.epochs},
                       {"best_epoch", r.best_epoch},
                       {"validation_rows", r.validation_rows},
                       {"validation_loss", validated ? nlohmann::json(r.validation_loss) : nlohmann::json(nullptr)}});
    if (validated) {
      loss_sum += r.validation_loss;
      ++with_validation;
    }
  }
  nlohmann::json j = {
      {"fitted", true},
      {"method", constant_ ? "constant" : "ensemble"},
      {"hidden", hidden_},
      {"ensemble", constant_ ? 0 : ensemble_.size()},
      {"n", rows_},
      {"d", d_},
      {"target", log_target_ ? "log" : "raw"},
      {"validation_loss", with_validation ? nlohmann::json(loss_sum / double(with_validation)) : nlohmann::json(nullptr)},
      {"members", members},
  };
  return j.dump();
}

void MlpModel::serialize(std::ostream& out) const {
  dlib::serialize(static_cast<uint64_t>(d_), out);
  dlib::serialize(log_target_, out);
  dlib::serialize(constant_, out);
  dlib::serialize(static_cast<uint64_t>(rows_), out);
  dlib::serialize(hidden_, out);
  dlib::serialize(mean_, out);
  dlib::serialize(scale_, out);
  dlib::serialize(target_mean_, out);
  dlib::serialize(target_scale_, out);
  if (!constant_) ensemble_.serialize(out);
}

void MlpModel::deserialize(std::istream& in) {
  MlpModel m;
  uint64_t d = 0, rows = 0;
  dlib::deserialize(d, in);
  dlib::deserialize(m.log_target_, in);
  dlib::deserialize(m.constant_, in);
  dlib::deserialize(rows, in);
  dlib::deserialize(m.hidden_, in);
  dlib::deserialize(m.mean_, in);
  dlib::deserialize(m.scale_, in);
  dlib::deserialize(m.target_mean_, in);
  dlib::deserialize(m.target_scale_, in);
  if (!m.constant_) m.ensemble_.deserialize(in);
  m.d_ = d;
  m.rows_ = rows;
  if (d == 0 || m.mean_.size() != d || m.scale_.size() != d || m.hidden_.size() < 2 || m.hidden_.size() > 3)
    throw dlib::serialization_error("inconsistent sizes in the saved mlp model");
  *this = std::move(m);
}

}  // namespace cotune_mlp
