// The host-side wrapper of a predictor (see components.hpp).
#include <cotune/core/abi/call_watch.hpp>
#include <cotune/core/abi/components.hpp>
#include <cotune/core/abi/isolation.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <string>

#include "abi/component_helpers.hpp"

namespace cotune::core {

using namespace abi_detail;

// ---- Predictor -----------------------------------------------------------------------------------

Predictor::Predictor(ComponentRef ref, std::string_view options_json)
    : ref_(std::move(ref)), api_(static_cast<const cotune_predictor_api*>(ref_.api())) {
  {
    CallWatch::Scope watch(CallKind::kPredictor, ref_.info.id, "create");
    throw_if_error(ref_.isolated ? ref_.isolated->create_predictor(str(options_json), &inst_)
                                 : api_->create(host_services(), str(options_json), &inst_),
                   ref_.info.id);
  }
  if (inst_ == nullptr) throw PluginError(COTUNE_ERR_INTERNAL, ref_.info.id + ": create returned no instance");
}
Predictor::~Predictor() { api_->destroy(inst_); }

bool Predictor::can_save() const {
  return optional_fn(api_, &cotune_predictor_api::save) && optional_fn(api_, &cotune_predictor_api::load);
}

void Predictor::fit(const double* x, size_t n, size_t d, const double* y, const double* w) {
  CallWatch::Scope watch(CallKind::kPredictor, ref_.info.id, "fit");
  throw_if_error(api_->fit(inst_, x, n, d, y, w), ref_.info.id);
}

void Predictor::predict(const double* x, size_t n, size_t d, double* out_mean, double* out_std) const {
  {
    CallWatch::Scope watch(CallKind::kPredictor, ref_.info.id, "predict");
    throw_if_error(api_->predict(inst_, x, n, d, out_mean, has_std() ? out_std : nullptr), ref_.info.id);
  }
  if (out_std != nullptr && !has_std())
    for (size_t i = 0; i < n; ++i) out_std[i] = 0;
}

std::string Predictor::save() const {
  auto fn = optional_fn(api_, &cotune_predictor_api::save);
  if (fn == nullptr) throw PluginError(COTUNE_ERR_UNSUPPORTED, ref_.info.id + ": cannot save its state");
  StringSink s;
  throw_if_error(fn(inst_, &s.sink), ref_.info.id);
  return s.data;
}

void Predictor::load(std::string_view bytes) {
  auto fn = optional_fn(api_, &cotune_predictor_api::load);
  if (fn == nullptr) throw PluginError(COTUNE_ERR_UNSUPPORTED, ref_.info.id + ": cannot load a saved state");
  throw_if_error(fn(inst_, bytes.data(), bytes.size()), ref_.info.id);
}

std::string Predictor::describe_fit() const {
  auto fn = optional_fn(api_, &cotune_predictor_api::describe_fit);
  if (fn == nullptr) return "{}";
  StringSink s;
  throw_if_error(fn(inst_, &s.sink), ref_.info.id);
  return s.data;
}

}  // namespace cotune::core
