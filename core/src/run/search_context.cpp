#include <cotune/core/registry.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/run/search_context.hpp>

#include <cmath>
#include <limits>
#include <vector>

namespace cotune::core {
namespace {

constexpr double kWorst = -std::numeric_limits<double>::infinity();

// Runs `body`, turning any exception into an error object for the plugin (none may cross the ABI).
template <class F>
cotune_error* guarded(F&& body) {
  try {
    body();
    return nullptr;
  } catch (const PluginError& e) {
    std::string m = e.what();
    return host_services()->error_new(e.code(), {m.data(), m.size()});
  } catch (const UserError& e) {
    std::string m = e.what();
    return host_services()->error_new(COTUNE_ERR_INVALID_ARGUMENT, {m.data(), m.size()});
  } catch (const std::exception& e) {
    std::string m = std::string("host search context: ") + e.what();
    return host_services()->error_new(COTUNE_ERR_INTERNAL, {m.data(), m.size()});
  } catch (...) {
    static const char m[] = "host search context: unknown error";
    return host_services()->error_new(COTUNE_ERR_INTERNAL, {m, sizeof m - 1});
  }
}

SearchContext& self(void* ctx) { return *static_cast<SearchContext*>(ctx); }

}  // namespace

double normalised_score(double value, Direction direction) {
  if (!std::isfinite(value) || value <= 0) return kWorst;
  double s = std::log(value);
  return direction == Direction::kMaximize ? s : -s;
}

SearchContext::SearchContext(const Space& space, const Surrogate& surrogate, Direction direction,
                             const std::unordered_set<std::string>& seen, const ConstraintEstimate* constraints,
                             const OomBound* oom)
    : space_(space), surrogate_(surrogate), direction_(direction), seen_(seen), constraints_(constraints), oom_(oom) {
  context_.struct_size = COTUNE_STRUCT_SIZE(cotune_search_context, score_version);
  context_.score_version = surrogate.version();
  context_.ctx = this;
  context_.num_params = space.num_params();
  context_.sample = [](void* ctx, uint64_t seed, size_t n, double* out, size_t* out_count) {
    return guarded([&] { *out_count = self(ctx).space_.sample(seed, n, out); });
  };
  context_.check = [](void* ctx, const double* configs, size_t n, int32_t* out_valid) {
    return guarded([&] { self(ctx).space_.check(configs, n, out_valid); });
  };
  context_.score = [](void* ctx, const double* configs, size_t n, double* out_score, double* out_std) {
    return guarded([&] { self(ctx).score(configs, n, out_score, out_std); });
  };
  context_.seen = [](void* ctx, const double* configs, size_t n, int32_t* out_seen) {
    return guarded([&] { self(ctx).seen(configs, n, out_seen); });
  };
}

void SearchContext::score(const double* configs, size_t n, double* out_score, double* out_std) const {
  const size_t p = space_.num_params();
  std::vector<int32_t> valid(n);
  if (n > 0) space_.check(configs, n, valid.data());
  if (out_std != nullptr) std::fill(out_std, out_std + n, 0.0);
  // Only valid rows reach the surrogate: invalid ones may not even lower.
  std::vector<double> rows;
  std::vector<size_t> index;
  for (size_t i = 0; i < n; ++i) {
    out_score[i] = kWorst;
    if (!valid[i]) continue;
    rows.insert(rows.end(), configs + i * p, configs + (i + 1) * p);
    index.push_back(i);
  }
  // Rows expected to break a constraint or to run out of memory leave `rows` and `index`.
  const auto drop = [&](const std::vector<int32_t>& breaks) {
    std::vector<double> kept_rows;
    std::vector<size_t> kept;
    for (size_t j = 0; j < index.size(); ++j) {
      if (breaks[j]) continue;
      kept_rows.insert(kept_rows.end(), rows.begin() + j * p, rows.begin() + (j + 1) * p);
      kept.push_back(index[j]);
    }
    rows.swap(kept_rows);
    index.swap(kept);
  };
  if (constraints_ != nullptr && !constraints_->empty() && !index.empty()) {
    std::vector<int32_t> breaks(index.size());
    constraints_->breaks(rows.data(), index.size(), breaks.data());
    drop(breaks);
  }
  if (oom_ != nullptr && oom_->bound() && !index.empty()) {
    std::vector<int32_t> breaks(index.size());
    oom_->breaks(rows.data(), index.size(), breaks.data());
    drop(breaks);
  }
  if (index.empty()) return;
  if (!surrogate_.informed()) {
    for (size_t i : index) out_score[i] = 0.0;
    return;
  }
  std::vector<double> value(index.size()), log_std(index.size());
  surrogate_.predict(rows.data(), index.size(), value.data(), log_std.data());
  for (size_t j = 0; j < index.size(); ++j) {
    out_score[index[j]] = normalised_score(value[j], direction_);
    if (out_std != nullptr) out_std[index[j]] = log_std[j];
  }
}

void SearchContext::seen(const double* configs, size_t n, int32_t* out_seen) const {
  const size_t p = space_.num_params();
  for (size_t i = 0; i < n; ++i) out_seen[i] = seen_.count(space_.key(configs + i * p)) ? 1 : 0;
}

}  // namespace cotune::core
