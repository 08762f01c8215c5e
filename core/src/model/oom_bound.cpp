#include <cotune/core/model/oom_bound.hpp>

#include <algorithm>
#include <cmath>
#include <exception>

namespace cotune::core {

OomBound::OomBound(const Space& space) : space_(space), lowers_(space.can_lower()) {}

std::optional<double> OomBound::share(const double* config) const {
  if (!lowers_) return std::nullopt;
  const cotune_trace* trace = nullptr;
  try {
    trace = &space_.lower(config);
  } catch (const std::exception&) {
    return std::nullopt;  // the plugin refuses it: nothing known
  }
  const cotune_memory& m = trace->memory;
  const double used = m.weights + m.gradients + m.optimizer + m.activations + m.buffers;
  const double capacity = trace->hardware.hbm_bytes;
  if (!std::isfinite(used) || !std::isfinite(capacity) || used <= 0 || capacity <= 0) return std::nullopt;
  return used / capacity;
}

void OomBound::learn(const double* config, bool out_of_memory) {
  learned_oom_ = learned_oom_ || out_of_memory;
  const std::optional<double> s = share(config);
  if (!s) return;
  if (out_of_memory) oom_shares_.push_back(*s);
  else largest_ran_ = std::max(largest_ran_, *s);
}

bool OomBound::update() {
  std::optional<double> bound;
  for (double s : oom_shares_)
    if (s > largest_ran_ && (!bound || s < *bound)) bound = s;
  const bool changed = bound != bound_;
  bound_ = bound;
  return changed;
}

void OomBound::breaks(const double* configs, size_t n, int32_t* out) const {
  std::fill(out, out + n, 0);
  if (!bound_) return;
  const size_t p = space_.num_params();
  for (size_t i = 0; i < n; ++i) {
    const std::optional<double> s = share(configs + i * p);
    out[i] = s && *s >= *bound_ ? 1 : 0;
  }
}

}  // namespace cotune::core
