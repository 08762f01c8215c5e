// The host-side wrapper of a searcher (see components.hpp).
#include <cotune/core/abi/call_watch.hpp>
#include <cotune/core/abi/components.hpp>
#include <cotune/core/abi/isolation.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <string>

#include "abi/component_helpers.hpp"

namespace cotune::core {

using namespace abi_detail;

// ---- Searcher ------------------------------------------------------------------------------------

Searcher::Searcher(ComponentRef ref, std::string_view options_json, const Space& space, uint64_t seed)
    : ref_(std::move(ref)), api_(static_cast<const cotune_searcher_api*>(ref_.api())) {
  {
    CallWatch::Scope watch(CallKind::kSearcher, ref_.info.id, "create");
    throw_if_error(
        ref_.isolated
            ? ref_.isolated->create_searcher(str(options_json), space.raw_params(), space.num_params(), seed, &inst_)
            : api_->create(host_services(), str(options_json), space.raw_params(), space.num_params(), seed, &inst_),
        ref_.info.id);
  }
  if (inst_ == nullptr) throw PluginError(COTUNE_ERR_INTERNAL, ref_.info.id + ": create returned no instance");
}
Searcher::~Searcher() { api_->destroy(inst_); }

bool Searcher::can_save() const {
  return optional_fn(api_, &cotune_searcher_api::save) && optional_fn(api_, &cotune_searcher_api::load);
}

size_t Searcher::propose(const cotune_search_context& context, size_t n, double* out) {
  size_t got = 0;
  CallWatch::Scope watch(CallKind::kSearcher, ref_.info.id, "propose");
  throw_if_error(api_->propose(inst_, &context, n, out, &got), ref_.info.id);
  return got > n ? n : got;
}

void Searcher::observe(const double* configs, size_t n, const double* scores, const int32_t* statuses) {
  CallWatch::Scope watch(CallKind::kSearcher, ref_.info.id, "observe");
  throw_if_error(api_->observe(inst_, configs, n, scores, statuses), ref_.info.id);
}

std::string Searcher::save() const {
  auto fn = optional_fn(api_, &cotune_searcher_api::save);
  if (fn == nullptr) throw PluginError(COTUNE_ERR_UNSUPPORTED, ref_.info.id + ": cannot save its state");
  StringSink s;
  throw_if_error(fn(inst_, &s.sink), ref_.info.id);
  return s.data;
}

void Searcher::load(std::string_view bytes) {
  auto fn = optional_fn(api_, &cotune_searcher_api::load);
  if (fn == nullptr) throw PluginError(COTUNE_ERR_UNSUPPORTED, ref_.info.id + ": cannot load a saved state");
  throw_if_error(fn(inst_, bytes.data(), bytes.size()), ref_.info.id);
}

}  // namespace cotune::core
