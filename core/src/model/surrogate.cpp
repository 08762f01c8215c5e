#include <cotune/core/errors.hpp>
#include <cotune/core/abi/log.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/model/surrogate.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <atomic>
#include <cmath>
#include <limits>
#include <random>

namespace cotune::core {
namespace {

using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool usable(double v) { return std::isfinite(v) && v > 0; }

// Versions of fitted models: process-wide, so two surrogates never share one.
uint64_t next_version() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

// All targets equal to within rounding: a regression would have nothing to learn.
bool constant_targets(const std::vector<double>& y) {
  for (double v : y)
    if (std::fabs(v - y.front()) > 1e-12 * std::max(1.0, std::fabs(y.front()))) return false;
  return true;
}

}  // namespace

std::optional<double> model_metric(const cotune_sim_result& r, const cotune_trace& trace, const std::string& metric) {
  if (metric == "step_time_s") return r.step_time_s;
  if (metric == "tokens_per_s") return r.tokens_per_s;
  if (metric == "tflops_per_gpu") return r.tflops_per_gpu;
  if (metric == "mfu") return r.mfu;
  if (metric == "cost_per_mtokens") return r.cost_per_mtokens;
  if (metric == "peak_memory_bytes") return r.peak_memory_bytes;
  if (metric == "peak_mem_gib") return r.peak_memory_bytes / 1073741824.0;
  if (metric == "gpus") return trace.gpus;
  return std::nullopt;
}

bool model_estimates(const std::string& metric) {
  return model_metric(cotune_sim_result{}, cotune_trace{}, metric).has_value();
}

std::string surrogate_predictor_options(const std::string& study_options_json, const std::string& where) {
  nlohmann::json options = study_options_json.empty() ? nlohmann::json::object()
                                                      : nlohmann::json::parse(study_options_json);
  if (!options.is_object()) throw UserError(where + ": expected an object");
  if (options.contains("log"))
    throw UserError(where + "/log: set by cotune itself (it hands the predictor log-transformed targets); "
                            "remove this option");
  options["log"] = false;
  return options.dump();
}

bool roofline_terms_of(const Space& space, const double* config, double* out) {
  try {
    perf::roofline_terms(space.lower(config), out);
    return true;
  } catch (const std::exception&) {
    return false;  // an invalid configuration may not lower
  }
}

std::string prior_unusable_with(Prior prior, const Space& space, const std::string& metric) {
  if (prior != Prior::kNone && !space.can_lower())
    return "the space '" + space.info().name + "' does not lower configurations to step traces";
  if (prior == Prior::kAnalytic && !metric.empty() && !model_estimates(metric))
    return "the performance model does not estimate the metric '" + metric + "'";
  return "";
}

std::string prior_text(Prior prior, const Space* space, const std::string& metric) {
  const std::string note = space != nullptr ? prior_unusable_with(prior, *space, metric) : "";
  return std::string(to_string(prior)) + (note.empty() ? "" : ", not used: " + note);
}

Surrogate::Surrogate(const Space& space, Predictor& predictor, std::string metric, Prior prior,
                     const double* probe)
    : space_(space), predictor_(predictor), metric_(std::move(metric)) {
  bool usable_prior = false;
  if (std::string why = prior_unusable_with(prior, space); !why.empty()) {
    prior_note_ = std::move(why);
  } else if (prior == Prior::kAnalytic) {
    usable_prior = true;
    if (probe != nullptr) {
      const cotune_trace& trace = space.lower(probe);
      cotune_sim_result r{};
      r.struct_size = sizeof r;
      perf::simulate(trace, &r);
      auto v = model_metric(r, trace, metric_);
      if (!v) {
        usable_prior = false;
        prior_note_ = "the performance model does not estimate the metric '" + metric_ + "'";
      } else if (!usable(*v)) {
        usable_prior = false;
        prior_note_ = "the performance model's estimate of '" + metric_ + "' is " + std::to_string(*v) +
                      " (not positive) for this workload";
      }
    }
  } else if (prior == Prior::kRoofline) {
    usable_prior = true;
    if (probe != nullptr) {
      try {
        double terms[perf::kRooflineTerms];
        perf::roofline_terms(space.lower(probe), terms);
      } catch (const std::exception& e) {
        usable_prior = false;
        prior_note_ = std::string("the roofline terms of a valid configuration could not be computed: ") + e.what();
      }
    }
    if (usable_prior) cost_.emplace(perf::kRooflineTerms);
  }
  prior_kind_ = usable_prior ? prior : Prior::kNone;
  width_ = space.feature_names().size() + (usable_prior ? 1 : 0);
  version_ = next_version();
}

bool Surrogate::informed() const { return (uses_prior() && (!cost_ || cost_->fitted())) || fitted_rows_ > 0; }

std::optional<double> Surrogate::estimate(const double* config) const {
  if (!uses_prior()) return std::nullopt;
  if (cost_) {
    double terms[perf::kRooflineTerms];
    if (!cost_->fitted() || !roofline_terms_of(space_, config, terms)) return std::nullopt;
    const double v = cost_->predict(terms);
    return usable(v) ? std::optional<double>(v) : std::nullopt;
  }
  const cotune_trace& trace = space_.lower(config);
  cotune_sim_result r{};
  r.struct_size = sizeof r;
  auto fitted = constants_.find(std::string(trace.hardware.gpu_name.data, trace.hardware.gpu_name.len));
  if (fitted != constants_.end()) perf::simulate(perf::retimed(trace, fitted->second.apply(trace.hardware)), &r);
  else perf::simulate(trace, &r);
  auto v = model_metric(r, trace, metric_);
  if (!v || !usable(*v)) return std::nullopt;
  return v;
}

Surrogate::RooflineRows Surrogate::roofline_rows(const double* configs, size_t n) const {
  RooflineRows rows;
  rows.terms.resize(n * perf::kRooflineTerms);
  rows.lowered.resize(n);
  for (size_t i = 0; i < n; ++i)
    rows.lowered[i] = roofline_terms_of(space_, configs + i * space_.num_params(), &rows.terms[i * perf::kRooflineTerms]);
  return rows;
}

std::vector<double> Surrogate::features(const double* configs, size_t n, std::vector<double>* log_estimates,
                                        std::vector<char>* ok, const RooflineRows* roofline) const {
  const size_t d = space_.feature_names().size();
  const size_t p = space_.num_params();
  std::vector<double> base(n * d);
  if (n > 0 && d > 0) space_.featurize(configs, n, base.data());
  ok->assign(n, 1);
  log_estimates->assign(n, 0.0);
  if (!uses_prior()) return base;
  RooflineRows computed;
  if (cost_ && cost_->fitted() && roofline == nullptr) {
    computed = roofline_rows(configs, n);
    roofline = &computed;
  }
  std::vector<double> x(n * width_);
  for (size_t i = 0; i < n; ++i) {
    std::optional<double> e;
    if (cost_ && !cost_->fitted()) {
      e = 1.0;  // no rates yet (fewer than two measurements): the features alone, as without a prior
    } else if (cost_) {
      const double v = roofline->lowered[i] ? cost_->predict(&roofline->terms[i * perf::kRooflineTerms]) : 0;
      if (usable(v)) e = v;
    } else {
      try {
        e = estimate(configs + i * p);
      } catch (const std::exception&) {
        // An invalid configuration may not lower; it cannot be predicted, which is what it deserves.
        e.reset();
      }
    }
    (*ok)[i] = e.has_value();
    (*log_estimates)[i] = e ? std::log(*e) : 0.0;
    std::copy(base.begin() + i * d, base.begin() + (i + 1) * d, x.begin() + i * width_);
    x[i * width_ + d] = (*log_estimates)[i];
  }
  return x;
}

void Surrogate::fit(const double* configs, size_t n, const double* values) {
  version_ = next_version();
  const size_t p = space_.num_params();
  std::vector<size_t> usable_rows;
  for (size_t i = 0; i < n; ++i)
    if (usable(values[i])) usable_rows.push_back(i);
  const size_t skipped = n - usable_rows.size();
  if (skipped > 0)
    log(COTUNE_LOG_WARN, "study",
        std::to_string(skipped) + " measured value(s) of '" + metric_ +
            "' are not positive and finite; the predictor learns from the others");
  if (usable_rows.size() > kMaxFitRows) {
    // Beyond this a fit costs memory and time in proportion to the history (features of every row
    // through the performance model, a predictor's kernel or epochs) while one more row teaches
    // little: fit on a seeded uniform sample, the same for the same history.
    std::mt19937_64 rng(usable_rows.size());
    for (size_t i = 0; i < kMaxFitRows; ++i)
      std::swap(usable_rows[i], usable_rows[i + rng() % (usable_rows.size() - i)]);
    usable_rows.resize(kMaxFitRows);
    std::sort(usable_rows.begin(), usable_rows.end());
    if (!capped_noted_)
      log(COTUNE_LOG_INFO, "study",
          "the predictor learns from a sample of " + std::to_string(kMaxFitRows) + " of the " +
              std::to_string(n - skipped) + " measured configurations (a larger fit would cost more than it teaches)");
    capped_noted_ = true;
  }
  std::vector<double> kept_configs;
  std::vector<double> kept_values;
  kept_configs.reserve(usable_rows.size() * p);
  for (size_t i : usable_rows) {
    kept_configs.insert(kept_configs.end(), configs + i * p, configs + (i + 1) * p);
    kept_values.push_back(values[i]);
  }

  const size_t m = kept_values.size();
  if (calibrate_ && prior_kind_ == Prior::kAnalytic) refit_constants(kept_configs, kept_values);
  // The roofline prior: the terms of every row, once, for the rates and then for the estimates.
  RooflineRows roofline;
  if (cost_) {
    roofline = roofline_rows(kept_configs.data(), m);
    std::vector<double> terms, lowered_values;
    for (size_t i = 0; i < m; ++i) {
      if (!roofline.lowered[i]) continue;
      terms.insert(terms.end(), roofline.terms.begin() + i * perf::kRooflineTerms,
                   roofline.terms.begin() + (i + 1) * perf::kRooflineTerms);
      lowered_values.push_back(kept_values[i]);
    }
    cost_->fit(terms.data(), lowered_values.size(), lowered_values.data());
  }
  std::vector<double> log_est;
  std::vector<char> ok;
  std::vector<double> x = features(kept_configs.data(), m, &log_est, &ok, cost_ ? &roofline : nullptr);
  std::vector<double> rows, y;
  rows.reserve(x.size());
  for (size_t i = 0; i < m; ++i) {
    if (!ok[i]) continue;  // the model could not estimate it: no residual to learn
    rows.insert(rows.end(), x.begin() + i * width_, x.begin() + (i + 1) * width_);
    y.push_back(std::log(kept_values[i]) - log_est[i]);
  }
  fitted_rows_ = y.size();
  fitted_predictor_ = false;
  constant_ = 0;
  if (y.empty()) return;
  if (constant_targets(y) || width_ == 0) {
    double sum = 0;
    for (double v : y) sum += v;
    constant_ = sum / static_cast<double>(y.size());
    return;
  }
  predictor_.fit(rows.data(), y.size(), width_, y.data());
  fitted_predictor_ = true;
}

void Surrogate::predict(const double* configs, size_t n, double* out_value, double* out_log_std) const {
  if (out_log_std != nullptr) std::fill(out_log_std, out_log_std + n, 0.0);
  if (n == 0) return;
  if (!informed()) {
    std::fill(out_value, out_value + n, kNaN);
    return;
  }
  std::vector<double> log_est;
  std::vector<char> ok;
  std::vector<double> x = features(configs, n, &log_est, &ok);
  std::vector<double> r(n, constant_);
  if (fitted_predictor_) {
    std::vector<double> std_dev(predictor_.has_std() && out_log_std != nullptr ? n : 0);
    predictor_.predict(x.data(), n, width_, r.data(), std_dev.empty() ? nullptr : std_dev.data());
    if (!std_dev.empty())
      for (size_t i = 0; i < n; ++i) out_log_std[i] = std::isfinite(std_dev[i]) ? std_dev[i] : 0.0;
  }
  for (size_t i = 0; i < n; ++i) out_value[i] = ok[i] ? std::exp(log_est[i] + r[i]) : kNaN;
}

const std::vector<std::string> Surrogate::kInStudyConstants = {
    "gemm_efficiency_max",  "gemm_half_efficiency_gflops", "gemm_efficiency_fp8",     "gemm_efficiency_fp4",
    "grouped_gemm_efficiency", "attention_efficiency",     "host_launch_us",          "network_efficiency.node",
    "network_efficiency.cluster"};

namespace {

// How a metric follows the step time: +1 in proportion (time, cost), -1 inversely (throughput,
// TFLOP/s, MFU), 0 not at all (memory, GPUs).
int step_sense(const std::string& metric) {
  if (metric == "step_time_s" || metric == "cost_per_mtokens") return 1;
  if (metric == "tokens_per_s" || metric == "tflops_per_gpu" || metric == "mfu") return -1;
  return 0;
}

}  // namespace

std::map<std::string, std::vector<perf::CalibrationRun>> Surrogate::calibration_runs(const double* configs, size_t n,
                                                                                     const double* values,
                                                                                     size_t limit,
                                                                                     bool* sampled) const {
  std::map<std::string, std::vector<perf::CalibrationRun>> by_gpu;
  if (sampled != nullptr) *sampled = false;
  const int sense = step_sense(metric_);
  if (sense == 0) return by_gpu;
  const size_t p = space_.num_params();
  std::vector<size_t> rows;
  for (size_t i = 0; i < n; ++i)
    if (usable(values[i])) rows.push_back(i);
  if (rows.size() > limit) {
    if (sampled != nullptr) *sampled = true;
    std::mt19937_64 rng(rows.size());
    std::shuffle(rows.begin(), rows.end(), rng);
    rows.resize(limit);
  }
  for (size_t i : rows) {
    try {
      const cotune_trace& trace = space_.lower(configs + i * p);
      cotune_sim_result r{};
      r.struct_size = sizeof r;
      perf::simulate(trace, &r);
      const std::optional<double> modelled = model_metric(r, trace, metric_);
      if (!modelled || !usable(*modelled) || !usable(r.step_time_s)) continue;
      const double step = r.step_time_s * (sense > 0 ? values[i] / *modelled : *modelled / values[i]);
      by_gpu[std::string(trace.hardware.gpu_name.data, trace.hardware.gpu_name.len)].push_back(
          {"measured run " + std::to_string(i + 1), perf::TraceCopy(trace), step});
    } catch (const std::exception&) {
      // a configuration that does not lower teaches the constants nothing
    }
  }
  return by_gpu;
}

void Surrogate::refit_constants(const std::vector<double>& configs, const std::vector<double>& values) {
  constants_.clear();
  constants_json_.clear();
  // One trial tells only how far off the model's level is, which the predictor's offset learns;
  // put on a constant, it would reorder the configurations by the prior's guess of which one.
  constexpr size_t kFewestTrials = 2;
  if (values.size() < kFewestTrials) return;
  const auto by_gpu = calibration_runs(configs.data(), values.size(), values.data());
  perf::CalibrationOptions options;
  options.candidates = kInStudyConstants;
  options.held_out = false;
  // From the second measured trial on, every candidate some trial depends on: the prior shares the
  // trials' errors among them by how much each trial depends on each (the most probable constants
  // given the trials), so that the third proposal already uses what the first two taught.
  // No cross-validated choice of how many to fit: it costs a fit per fold and count at every
  // refit, and the prior keeps the few cheap candidates steady instead.
  options.underdetermined = true;
  options.underdetermined_fewest = kFewestTrials;  // two rows the model times alike tell only the level too
  for (const auto& [gpu, runs] : by_gpu) {
    if (runs.size() < kFewestTrials) continue;
    try {
      const json constants = perf::calibrate(runs, options).constants();
      if (constants.empty()) continue;
      constants_[gpu] = perf::ConstantSet(constants);
      constants_json_[gpu] = constants;
    } catch (const UserError&) {
      // measurements that cannot tell the constants apart: the catalogue's stay
    }
  }
}

namespace {

// save_state(): this line, a JSON header, a newline, then the predictor's own bytes.
constexpr std::string_view kStateMagic = "cotune-surrogate-state 1\n";

// The header and the predictor's bytes of a blob; false when it is not one.
bool split_state(std::string_view blob, json* header, std::string_view* bytes) {
  if (blob.substr(0, kStateMagic.size()) != kStateMagic) return false;
  blob.remove_prefix(kStateMagic.size());
  const size_t eol = blob.find('\n');
  if (eol == std::string_view::npos) return false;
  *header = json::parse(blob.substr(0, eol), nullptr, false);
  if (!header->is_object()) return false;
  *bytes = blob.substr(eol + 1);
  return true;
}

}  // namespace

std::string Surrogate::save_state(size_t trained_on) const {
  if (cost_ || fitted_rows_ == 0 || (fitted_predictor_ && !predictor_.can_save())) return {};
  json constants = json::object();
  for (const auto& [gpu, c] : constants_json_) constants[gpu] = c;
  const json header = {{"trained_on", trained_on},   {"fitted_rows", fitted_rows_},
                       {"width", width_},            {"predictor", predictor_.info().id},
                       {"metric", metric_},          {"fitted_predictor", fitted_predictor_},
                       {"constant", constant_},      {"constants", constants}};
  return std::string(kStateMagic) + header.dump() + "\n" + (fitted_predictor_ ? predictor_.save() : std::string());
}

std::optional<size_t> Surrogate::state_rows(std::string_view blob) const {
  json h;
  std::string_view bytes;
  if (cost_ || !split_state(blob, &h, &bytes)) return std::nullopt;
  const bool same = h.value("width", size_t{0}) == width_ && h.value("predictor", std::string()) == predictor_.info().id &&
                    h.value("metric", std::string()) == metric_ && h.contains("trained_on") &&
                    h["trained_on"].is_number_unsigned();
  if (!same) return std::nullopt;
  return h["trained_on"].get<size_t>();
}

bool Surrogate::load_state(std::string_view blob) {
  if (!state_rows(blob)) return false;
  json h;
  std::string_view bytes;
  split_state(blob, &h, &bytes);
  try {
    std::map<std::string, perf::ConstantSet> constants;
    std::map<std::string, json> constants_json;
    for (const auto& [gpu, c] : h.at("constants").items()) {
      constants[gpu] = perf::ConstantSet(c);
      constants_json[gpu] = c;
    }
    const bool fitted_predictor = h.at("fitted_predictor").get<bool>();
    if (fitted_predictor) predictor_.load(bytes);
    constants_ = std::move(constants);
    constants_json_ = std::move(constants_json);
    fitted_predictor_ = fitted_predictor;
    fitted_rows_ = h.at("fitted_rows").get<size_t>();
    constant_ = h.at("constant").get<double>();
  } catch (const std::exception& e) {
    log(COTUNE_LOG_WARN, "study", std::string("a saved predictor state could not be taken (") + e.what() + "); fitting instead");
    return false;
  }
  version_ = next_version();
  return true;
}

}  // namespace cotune::core
