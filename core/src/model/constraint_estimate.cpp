#include <cotune/core/model/constraint_estimate.hpp>
#include <cotune/core/model/objective.hpp>
#include <cotune/core/model/surrogate.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace cotune::core {
namespace {

// 1 / the normal distribution's 0.75 quantile: a median absolute deviation as a standard deviation.
constexpr double kMadToSigma = 1.4826;

bool positive(double v) { return std::isfinite(v) && v > 0; }

double median(std::vector<double> v) {
  const size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (n % 2 == 1) return upper;
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2;
}

// The performance model's metrics of one configuration, simulated once; false when it cannot be
// lowered (the plugin refuses it).
bool simulated(const Space& space, const double* config, cotune_sim_result* r, const cotune_trace** trace) {
  try {
    *trace = &space.lower(config);
  } catch (const std::exception&) {
    return false;
  }
  *r = cotune_sim_result{};
  r->struct_size = sizeof *r;
  perf::simulate(**trace, r);
  return true;
}

}  // namespace

ConstraintEstimate::ConstraintEstimate(const Space& space, const std::vector<ObjectiveSpec>& objectives)
    : space_(space) {
  if (!space.can_lower()) return;
  for (const ObjectiveSpec& o : objectives)
    for (const Constraint& c : o.constraints) {
      if (!model_estimates(c.metric)) continue;  // a metric the model does not produce
      auto it = std::find_if(metrics_.begin(), metrics_.end(), [&](const Metric& m) { return m.name == c.metric; });
      if (it == metrics_.end()) it = metrics_.insert(metrics_.end(), Metric{c.metric, {}, 0, {}});
      bounds_.push_back({static_cast<size_t>(it - metrics_.begin()), c.max, c.min});
    }
}

std::vector<std::string> ConstraintEstimate::describe() const {
  std::vector<std::string> out;
  for (const Bound& b : bounds_) {
    std::ostringstream s;
    s << metrics_[b.metric].name;
    if (b.min) s << " >= " << *b.min;
    if (b.min && b.max) s << " and";
    if (b.max) s << " <= " << *b.max;
    out.push_back(s.str());
  }
  return out;
}

void ConstraintEstimate::learn(const double* config, const nlohmann::json& metrics) {
  if (empty()) return;
  // Reservoir sampling: the n-th measurement replaces a kept ratio with probability kMaxRatios / n,
  // decided before the configuration is simulated.
  std::vector<size_t> slots(metrics_.size(), SIZE_MAX);
  bool any = false;
  for (size_t k = 0; k < metrics_.size(); ++k) {
    const auto measured = metric_value(metrics, metrics_[k].name);
    if (!measured || !positive(*measured)) continue;
    Metric& m = metrics_[k];
    ++m.offered;
    if (m.log_ratios.size() < kMaxRatios) {
      slots[k] = m.log_ratios.size();
    } else {
      const size_t j = static_cast<size_t>(rng_() % m.offered);
      if (j >= kMaxRatios) continue;
      slots[k] = j;
    }
    any = true;
  }
  if (!any) return;
  cotune_sim_result r{};
  const cotune_trace* trace = nullptr;
  if (!simulated(space_, config, &r, &trace)) return;
  for (size_t k = 0; k < metrics_.size(); ++k) {
    if (slots[k] == SIZE_MAX) continue;
    Metric& m = metrics_[k];
    const auto estimated = model_metric(r, *trace, m.name);
    if (!estimated || !positive(*estimated)) continue;
    const double ratio = std::log(*metric_value(metrics, m.name) / *estimated);
    if (slots[k] == m.log_ratios.size()) m.log_ratios.push_back(ratio);
    else m.log_ratios[slots[k]] = ratio;
  }
}

void ConstraintEstimate::update() {
  for (Metric& m : metrics_) {
    if (m.log_ratios.empty()) continue;
    const double bias = median(m.log_ratios);
    std::vector<double> deviation;
    deviation.reserve(m.log_ratios.size());
    for (double r : m.log_ratios) deviation.push_back(std::fabs(r - bias));
    m.correction = {bias, kMadToSigma * median(deviation), m.log_ratios.size()};
  }
}

ConstraintEstimate::Correction ConstraintEstimate::correction(const std::string& metric) const {
  for (const Metric& m : metrics_)
    if (m.name == metric) return m.correction;
  return {};
}

void ConstraintEstimate::breaks(const double* configs, size_t n, int32_t* out) const {
  std::fill(out, out + n, 0);
  if (empty()) return;
  const size_t p = space_.num_params();
  for (size_t i = 0; i < n; ++i) {
    cotune_sim_result r{};
    const cotune_trace* trace = nullptr;
    if (!simulated(space_, configs + i * p, &r, &trace)) continue;
    for (const Bound& b : bounds_) {
      const Metric& m = metrics_[b.metric];
      const auto estimated = model_metric(r, *trace, m.name);
      if (!estimated || !positive(*estimated)) continue;  // nothing known: the trial will tell
      // The range the metric is expected in: the corrected estimate, widened by the scatter.
      const double low = *estimated * std::exp(m.correction.log_bias - m.correction.log_scatter);
      const double high = *estimated * std::exp(m.correction.log_bias + m.correction.log_scatter);
      if ((b.max && low > *b.max) || (b.min && high < *b.min)) {
        out[i] = 1;
        break;
      }
    }
  }
}

}  // namespace cotune::core
