#include "krr_model.hpp"

#include "hyper_search.hpp"

#include <cotune/cotune.hpp>
#include <cotune/support/training_data.hpp>
#include <dlib/matrix.h>
#include <dlib/rand.h>
#include <dlib/serialize.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace cotune_krr {
namespace {

// The s of asinh(x / s) for feature k, or 0 to leave it as it is: its smallest positive value, when
// no value is negative, the largest is at least 8 times it, and the values look multiplicative:
// either few distinct ones (a parallel degree or a batch size, 1 2 4 8 ...) or a largest value at
// least 4 times the median (counts and sizes over decades: 1 ... 512 has its median near 16). A
// feature spread evenly from 0 (a share, a uniform draw) has many values and its largest within 2
// or 3 medians: stretching it near 0 would only distort it. A signed feature is left alone.
double compression_scale(const std::vector<double>& raw, size_t rows, size_t d, size_t k) {
  constexpr double kSpan = 8, kSkew = 4;
  constexpr size_t kFewValues = 32;
  std::vector<double> positive;
  for (size_t i = 0; i < rows; ++i) {
    const double v = raw[i * d + k];
    if (v < 0) return 0;
    if (v > 0) positive.push_back(v);
  }
  if (positive.size() < 2) return 0;
  std::sort(positive.begin(), positive.end());
  const double lo = positive.front(), hi = positive.back(), median = positive[positive.size() / 2];
  if (hi < kSpan * lo) return 0;
  const size_t distinct = static_cast<size_t>(std::unique(positive.begin(), positive.end()) - positive.begin());
  return distinct <= kFewValues || hi >= kSkew * median ? lo : 0;
}

using Matrix = dlib::matrix<double>;
using Vector = dlib::matrix<double, 0, 1>;

// k distinct indices out of n, drawn with `seed` and returned in increasing order.
std::vector<size_t> random_subset(size_t n, size_t k, uint64_t seed) {
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), size_t{0});
  if (k >= n) return idx;
  dlib::rand rnd(static_cast<time_t>(seed));
  for (size_t i = 0; i < k; ++i) {
    const size_t j = i + static_cast<size_t>(rnd.get_integer(static_cast<long long>(n - i)));  // [0, n - i)
    std::swap(idx[i], idx[j]);
  }
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<double> pick_rows(const std::vector<double>& rows, size_t d, const std::vector<size_t>& idx) {
  std::vector<double> out;
  out.reserve(idx.size() * d);
  for (size_t i : idx) out.insert(out.end(), rows.begin() + i * d, rows.begin() + (i + 1) * d);
  return out;
}

// Solves the symmetric positive definite system A x = b, adding a small ridge to the diagonal when
// rounding has made A indefinite (Nystrom normal equations can be nearly singular).
Vector solve_spd(const Matrix& a, const Vector& b) {
  const double base = std::max(1e-300, dlib::trace(a) / double(a.nr()));
  for (const double ridge : {0.0, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2}) {
    const double jitter = base * ridge;
    Matrix shifted = a;
    for (long i = 0; i < a.nr(); ++i) shifted(i, i) += jitter;
    dlib::cholesky_decomposition<Matrix> chol(shifted);
    if (chol.is_spd()) return chol.solve(b);
  }
  return dlib::lu_decomposition<Matrix>(a).solve(b);
}

}  // namespace

double KrrModel::compressed(double v, size_t k) const {
  return compress_[k] > 0 ? std::asinh(v / compress_[k]) : v;
}

void KrrModel::standardise(const double* rows, size_t n, double* out) const {
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < d_; ++k) out[i * d_ + k] = (compressed(rows[i * d_ + k], k) - mean_[k]) / scale_[k];
}

void KrrModel::set_centres(std::vector<double> rows) {
  centre_rows_ = std::move(rows);
  centres_ = PointSet::from_rows(centre_rows_.data(), alpha_.size(), d_);
}

void KrrModel::fit(const double* x, size_t n, size_t d, const double* y, const double* w,
                   const Options& options) {
  cotune::support::check_features("krr fit", x, n, d);
  cotune::support::check_targets("krr fit", y, n, options.log_target);
  const std::vector<double> all_weights = cotune::support::checked_weights("krr fit", w, n);

  // Rows with weight 0 take no part in the fit.
  std::vector<double> raw, target, weight;
  for (size_t i = 0; i < n; ++i) {
    if (all_weights[i] <= 0) continue;
    raw.insert(raw.end(), x + i * d, x + (i + 1) * d);
    target.push_back(options.log_target ? std::log(y[i]) : y[i]);
    weight.push_back(all_weights[i]);
  }
  const size_t rows = target.size();
  const double weight_mean = std::accumulate(weight.begin(), weight.end(), 0.0) / double(rows);
  for (double& v : weight) v /= weight_mean;

  KrrModel m;
  m.d_ = d;
  m.log_target_ = options.log_target;
  m.rows_ = rows;
  m.mean_.assign(d, 0.0);
  m.scale_.assign(d, 1.0);
  m.compress_.assign(d, 0.0);
  for (size_t k = 0; k < d; ++k) {
    if (options.log_features) m.compress_[k] = compression_scale(raw, rows, d, k);
    double sum = 0, sum_sq = 0;
    for (size_t i = 0; i < rows; ++i) sum += m.compressed(raw[i * d + k], k);
    const double mean = sum / double(rows);
    for (size_t i = 0; i < rows; ++i) {
      const double c = m.compressed(raw[i * d + k], k) - mean;
      sum_sq += c * c;
    }
    const double sd = std::sqrt(sum_sq / double(rows));
    m.mean_[k] = mean;
    // A constant column carries no information: scale 1 keeps it at 0 instead of dividing by 0.
    m.scale_[k] = sd > 1e-12 * std::max(1.0, std::fabs(mean)) ? sd : 1.0;
  }
  std::vector<double> z(rows * d);
  m.standardise(raw.data(), rows, z.data());

  double weighted_sum = 0;
  for (size_t i = 0; i < rows; ++i) weighted_sum += weight[i] * target[i];
  m.offset_ = weighted_sum / double(rows);
  std::vector<double> centred(rows);
  double spread = 0;
  for (size_t i = 0; i < rows; ++i) {
    centred[i] = target[i] - m.offset_;
    spread = std::max(spread, std::fabs(centred[i]));
  }

  if (rows == 1 || spread <= 1e-12 * std::max(1.0, std::fabs(m.offset_))) {
    // One row, or targets that do not vary: the weighted mean is the whole model.
    m.method_ = "constant";
    m.loo_rmse_ = rows == 1 ? std::nan("") : 0.0;
    m.set_centres({});
    *this = std::move(m);
    return;
  }

  // Hyper-parameters on a seeded subsample (all rows when few), weights renormalised to mean 1.
  const std::vector<size_t> search_idx = random_subset(rows, options.search_size, options.seed);
  const std::vector<double> search_rows = pick_rows(z, d, search_idx);
  std::vector<double> search_target, search_weight;
  for (size_t i : search_idx) {
    search_target.push_back(centred[i]);
    search_weight.push_back(weight[i]);
  }
  const double search_weight_mean =
      std::accumulate(search_weight.begin(), search_weight.end(), 0.0) / double(search_idx.size());
  for (double& v : search_weight) v /= search_weight_mean;
  const HyperParameters hp = search_hyperparameters(search_rows, search_idx.size(), d, search_target,
                                                    search_weight, options.gamma, options.lambda);
  m.search_rows_ = search_idx.size();
  m.gamma_ = hp.gamma;
  m.loo_rmse_ = hp.loo_rmse;
  m.lambda_ = options.lambda ? *options.lambda : hp.lambda * double(rows) / double(search_idx.size());

  Vector sw(rows);
  for (size_t i = 0; i < rows; ++i) sw(i) = std::sqrt(weight[i]);

  if (rows <= options.max_basis) {
    m.method_ = "exact";
    const PointSet all = PointSet::from_rows(z.data(), rows, d);
    Matrix a(rows, rows);
    rbf_matrix(z.data(), rows, all, m.gamma_, &a(0, 0));
    Vector swt(rows);
    for (size_t i = 0; i < rows; ++i) {
      for (size_t j = 0; j < rows; ++j) a(i, j) *= sw(i) * sw(j);
      a(i, i) += m.lambda_;
      swt(i) = sw(i) * centred[i];
    }
    const Vector beta = solve_spd(a, swt);
    m.alpha_.resize(rows);
    for (size_t i = 0; i < rows; ++i) m.alpha_[i] = sw(i) * beta(i);
    m.set_centres(std::move(z));
  } else {
    m.method_ = "nystrom";
    const size_t basis = options.max_basis;
    std::vector<double> centre_rows = pick_rows(z, d, random_subset(rows, basis, options.seed + 1));
    const PointSet centres = PointSet::from_rows(centre_rows.data(), basis, d);
    Matrix k_nm(rows, basis), k_mm(basis, basis);
    rbf_matrix(z.data(), rows, centres, m.gamma_, &k_nm(0, 0));
    rbf_matrix(centre_rows.data(), basis, centres, m.gamma_, &k_mm(0, 0));
    // Features phi = K_nm V S^-1/2 from K_mm = V S V^T, keeping eigenvalues above 1e-10 of the
    // largest: smooth kernels make K_mm numerically low-rank, and solving with K_mm itself (the
    // normal equations K_nm^T W K_nm + lambda K_mm) then loses every digit. With f = phi beta,
    // |f|^2 = |beta|^2, so lambda keeps its meaning.
    dlib::eigenvalue_decomposition<Matrix> eig(dlib::make_symmetric(k_mm));
    const Vector& s = eig.get_real_eigenvalues();
    const Matrix& v = eig.get_pseudo_v();
    const double cutoff = 1e-10 * dlib::max(s);
    std::vector<long> kept;
    for (long k = 0; k < s.size(); ++k)
      if (s(k) > cutoff) kept.push_back(k);
    Matrix projection(long(basis), long(kept.size()));
    for (size_t c = 0; c < kept.size(); ++c)
      dlib::set_colm(projection, long(c)) = dlib::colm(v, kept[c]) / std::sqrt(s(kept[c]));
    Vector swt(rows);
    for (size_t i = 0; i < rows; ++i) {
      dlib::set_rowm(k_nm, long(i)) = sw(i) * dlib::rowm(k_nm, long(i));
      swt(i) = sw(i) * centred[i];
    }
    const Matrix phi = k_nm * projection;  // W^1/2 phi
    Matrix normal = dlib::trans(phi) * phi;
    for (long i = 0; i < normal.nr(); ++i) normal(i, i) += m.lambda_;
    const Vector beta = solve_spd(normal, dlib::trans(phi) * swt);
    const Vector alpha = projection * beta;
    m.alpha_.assign(alpha.begin(), alpha.end());
    m.set_centres(std::move(centre_rows));
  }
  *this = std::move(m);
}

void KrrModel::predict(const double* x, size_t n, size_t d, double* out) const {
  if (!fitted()) throw cotune::Error(COTUNE_ERR_FAILED_PRECONDITION, "krr predict: the model is not fitted; call fit() or load() first");
  if (d != d_)
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "krr predict: rows have " + std::to_string(d) +
                                                         " features but the model was fitted on " +
                                                         std::to_string(d_));
  if (out == nullptr) throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "krr predict: out_mean is NULL");
  cotune::support::check_features("krr predict", x, n, d);
  // Blocks keep the standardised copy small while amortising the call overhead.
  constexpr size_t kBlock = 256;
  std::vector<double> z(std::min(n, kBlock) * d);
  for (size_t start = 0; start < n; start += kBlock) {
    const size_t count = std::min(kBlock, n - start);
    double* block_out = out + start;
    if (alpha_.empty()) {
      std::fill(block_out, block_out + count, 0.0);
    } else {
      standardise(x + start * d, count, z.data());
      rbf_expansion(centres_, alpha_.data(), gamma_, z.data(), count, block_out);
    }
    for (size_t i = 0; i < count; ++i) {
      const double t = block_out[i] + offset_;
      block_out[i] = log_target_ ? std::exp(t) : t;
    }
  }
}

std::string KrrModel::describe() const {
  if (!fitted()) return R"({"fitted":false})";
  auto number_or_null = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  const bool constant = method_ == "constant";
  nlohmann::json j = {
      {"fitted", true},
      {"method", method_},
      {"gamma", constant ? nlohmann::json(nullptr) : nlohmann::json(gamma_)},
      {"lambda", constant ? nlohmann::json(nullptr) : nlohmann::json(lambda_)},
      {"loo_error", number_or_null(loo_rmse_)},
      {"loo_rows", search_rows_},
      {"n", rows_},
      {"d", d_},
      {"basis", alpha_.size()},
      {"target", log_target_ ? "log" : "raw"},
      {"log_features", std::count_if(compress_.begin(), compress_.end(), [](double s) { return s > 0; })},
      {"offset", offset_},
  };
  return j.dump();
}

void KrrModel::serialize(std::ostream& out) const {
  dlib::serialize(static_cast<uint64_t>(d_), out);
  dlib::serialize(log_target_, out);
  dlib::serialize(mean_, out);
  dlib::serialize(scale_, out);
  dlib::serialize(compress_, out);
  dlib::serialize(offset_, out);
  dlib::serialize(method_, out);
  dlib::serialize(gamma_, out);
  dlib::serialize(lambda_, out);
  dlib::serialize(loo_rmse_, out);
  dlib::serialize(static_cast<uint64_t>(rows_), out);
  dlib::serialize(static_cast<uint64_t>(search_rows_), out);
  dlib::serialize(centre_rows_, out);
  dlib::serialize(alpha_, out);
}

void KrrModel::deserialize(std::istream& in, bool with_compression) {
  KrrModel m;
  uint64_t d = 0, rows = 0, search_rows = 0;
  dlib::deserialize(d, in);
  dlib::deserialize(m.log_target_, in);
  dlib::deserialize(m.mean_, in);
  dlib::deserialize(m.scale_, in);
  if (with_compression) dlib::deserialize(m.compress_, in);
  dlib::deserialize(m.offset_, in);
  dlib::deserialize(m.method_, in);
  dlib::deserialize(m.gamma_, in);
  dlib::deserialize(m.lambda_, in);
  dlib::deserialize(m.loo_rmse_, in);
  dlib::deserialize(rows, in);
  dlib::deserialize(search_rows, in);
  std::vector<double> centre_rows;
  dlib::deserialize(centre_rows, in);
  dlib::deserialize(m.alpha_, in);
  if (!with_compression) m.compress_.assign(d, 0.0);
  m.d_ = d;
  m.rows_ = rows;
  m.search_rows_ = search_rows;
  if (d == 0 || m.mean_.size() != d || m.scale_.size() != d || m.compress_.size() != d ||
      centre_rows.size() != m.alpha_.size() * d)
    throw dlib::serialization_error("inconsistent sizes in the saved krr model");
  m.set_centres(std::move(centre_rows));
  *this = std::move(m);
}

}  // namespace cotune_krr
