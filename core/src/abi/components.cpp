// Host-side wrappers of plugin components (see components.hpp): names of kinds and statuses,
// errors, and parameters. One file per component kind: space.cpp, predictor.cpp, searcher.cpp,
// executor.cpp.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/abi/isolation.hpp>
#include <cotune/core/errors.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "abi/component_helpers.hpp"

namespace cotune::core {

using namespace abi_detail;

const void* ComponentRef::api() const { return isolated ? isolated->api() : component->api; }

const char* kind_name(int32_t kind) {
  switch (kind) {
    case COTUNE_KIND_SPACE: return "space";
    case COTUNE_KIND_PREDICTOR: return "predictor";
    case COTUNE_KIND_SEARCHER: return "searcher";
    case COTUNE_KIND_EXECUTOR: return "executor";
    default: return "?";
  }
}

int32_t kind_from_name(std::string_view name) {
  if (name == "space") return COTUNE_KIND_SPACE;
  if (name == "predictor") return COTUNE_KIND_PREDICTOR;
  if (name == "searcher") return COTUNE_KIND_SEARCHER;
  if (name == "executor") return COTUNE_KIND_EXECUTOR;
  return 0;
}

void throw_if_error(cotune_error* err, std::string_view who) {
  if (err == nullptr) return;
  std::string message = std::string(who) + ": ";
  int code = COTUNE_ERR_INTERNAL;
  // A plugin may hand back a broken error object; trust only what struct_size covers.
  if (err->struct_size >= COTUNE_STRUCT_SIZE(cotune_error, message)) {
    code = err->code;
    message += std::string(view(err->message));
  } else {
    message += "error object too small to read";
  }
  if (err->struct_size >= COTUNE_STRUCT_SIZE(cotune_error, destroy) && err->destroy != nullptr) err->destroy(err);
  throw PluginError(code, message);
}

const char* status_name(int32_t status) {
  switch (status) {
    case COTUNE_STATUS_PENDING: return "pending";
    case COTUNE_STATUS_RUNNING: return "running";
    case COTUNE_STATUS_OK: return "ok";
    case COTUNE_STATUS_FAILED: return "failed";
    case COTUNE_STATUS_OOM: return "oom";
    case COTUNE_STATUS_TIMEOUT: return "timeout";
    case COTUNE_STATUS_CANCELLED: return "cancelled";
    case COTUNE_STATUS_UNAVAILABLE: return "unavailable";
    default: return "unknown";
  }
}

int32_t status_from_name(std::string_view name) {
  for (int32_t s = COTUNE_STATUS_PENDING; s <= COTUNE_STATUS_UNAVAILABLE; ++s)
    if (name == status_name(s)) return s;
  return -1;
}

cotune_trial empty_trial() {
  cotune_trial t{};
  t.struct_size = COTUNE_STRUCT_SIZE(cotune_trial, config);
  t.trial_id = t.config_json = t.launch_args = t.workload_json = t.workdir = cotune_str{"", 0};
  return t;
}

// ---- Param ---------------------------------------------------------------------------------------

std::vector<double> Param::domain() const {
  switch (type) {
    case COTUNE_PARAM_INT: {
      if (!values.empty()) return values;
      std::vector<double> d;
      if (high - low > 1e6) return d;
      const double first = std::ceil(low);  // counted by an integer: a double stops advancing past 2^53
      for (long long i = 0; first + double(i) <= high; ++i) d.push_back(first + double(i));
      return d;
    }
    case COTUNE_PARAM_CATEGORICAL: {
      std::vector<double> d;
      for (size_t i = 0; i < choices.size(); ++i) d.push_back(double(i));
      return d;
    }
    case COTUNE_PARAM_BOOL: return {0, 1};
    default: return {};
  }
}

std::string Param::format(double value) const {
  switch (type) {
    case COTUNE_PARAM_CATEGORICAL: {
      // Range first: casting NaN or a value past long long's range is undefined.
      if (value >= 0 && value < double(choices.size()) && std::floor(value) == value) return choices[size_t(value)];
      return "#" + format_number(value);
    }
    case COTUNE_PARAM_BOOL: return value != 0 ? "true" : "false";
    default: return format_number(value);
  }
}

bool Param::contains(double value) const {
  if (!std::isfinite(value)) return false;
  switch (type) {
    case COTUNE_PARAM_INT:
      if (std::floor(value) != value) return false;
      if (!values.empty()) {
        for (double v : values)
          if (v == value) return true;
        return false;
      }
      return value >= low && value <= high;
    case COTUNE_PARAM_FLOAT: return value >= low && value <= high;
    case COTUNE_PARAM_CATEGORICAL: return std::floor(value) == value && value >= 0 && value < double(choices.size());
    case COTUNE_PARAM_BOOL: return value == 0 || value == 1;
    default: return false;
  }
}

}  // namespace cotune::core
