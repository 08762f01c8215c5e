// The host-side wrapper of a search space (see components.hpp).
#include <cotune/core/abi/call_watch.hpp>
#include <cotune/core/abi/components.hpp>
#include <cotune/core/abi/isolation.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "abi/component_helpers.hpp"

namespace cotune::core {

using namespace abi_detail;

// ---- Space ---------------------------------------------------------------------------------------

Space::Space(ComponentRef ref, std::string_view workload_json, std::string_view options_json)
    : ref_(std::move(ref)), api_(static_cast<const cotune_space_api*>(ref_.api())) {
  const std::string& who = ref_.info.id;
  {
    CallWatch::Scope watch(CallKind::kSpace, ref_.info.id, "create");
    throw_if_error(ref_.isolated ? ref_.isolated->create_space(str(workload_json), str(options_json), &inst_)
                                 : api_->create(host_services(), str(workload_json), str(options_json), &inst_),
                   who);
  }
  if (inst_ == nullptr) throw PluginError(COTUNE_ERR_INTERNAL, who + ": create returned no instance");
  lower_ = optional_fn(api_, &cotune_space_api::lower);
  try {
    size_t n = 0;
    throw_if_error(api_->describe(inst_, &raw_params_, &n), who);
    if (n > 0 && raw_params_ == nullptr) throw PluginError(COTUNE_ERR_INTERNAL, who + ": describe returned NULL");
    for (size_t i = 0; i < n; ++i) {
      const cotune_param* p = raw_params_[i];
      if (p == nullptr || p->struct_size < COTUNE_STRUCT_SIZE(cotune_param, help))
        throw PluginError(COTUNE_ERR_INTERNAL, who + ": parameter " + std::to_string(i) + " is malformed");
      Param q;
      q.name = std::string(view(p->name));
      q.type = p->type;
      q.flags = p->flags;
      q.low = p->low;
      q.high = p->high;
      if (p->values != nullptr) q.values.assign(p->values, p->values + p->num_values);
      for (size_t c = 0; p->choices != nullptr && c < p->num_choices; ++c) q.choices.emplace_back(view(p->choices[c]));
      q.default_value = p->default_value;
      q.unit = std::string(view(p->unit));
      q.help = std::string(view(p->help));
      params_.push_back(std::move(q));
    }
    const cotune_str* names = nullptr;
    size_t nf = 0;
    throw_if_error(api_->describe_features(inst_, &names, &nf), who);
    for (size_t i = 0; i < nf; ++i) feature_names_.emplace_back(view(names[i]));
  } catch (...) {
    api_->destroy(inst_);
    throw;
  }
}

Space::~Space() { api_->destroy(inst_); }

void Space::check_unrestricted(const double* configs, size_t n, int32_t* out_valid) const {
  CallWatch::Scope watch(CallKind::kSpace, ref_.info.id, "check");
  throw_if_error(api_->check(inst_, configs, n, out_valid), ref_.info.id);
}

void Space::check(const double* configs, size_t n, int32_t* out_valid) const {
  if (!restricted_) return check_unrestricted(configs, n, out_valid);
  // Every kept row was judged when it was kept (restrict_to).
  const size_t p = params_.size();
  std::vector<double> row(p);
  for (size_t i = 0; i < n; ++i) {
    row.assign(configs + i * p, configs + (i + 1) * p);
    out_valid[i] = allowed_.count(row) != 0 ? 1 : 0;
  }
}

bool Space::valid(const double* config) const {
  int32_t v = 0;
  check(config, 1, &v);
  return v != 0;
}

std::string Space::explain_unrestricted(const double* config) const {
  StringSink s;
  CallWatch::Scope watch(CallKind::kSpace, ref_.info.id, "explain");
  throw_if_error(api_->explain(inst_, config, &s.sink), ref_.info.id);
  return std::move(s.data);
}

std::string Space::explain(const double* config) const {
  if (restricted_ && valid(config)) return "";  // kept, though the memory estimate may refuse it
  std::string why = explain_unrestricted(config);
  if (why.empty() && restricted_) return "not among the configurations the study may run: " + restriction_;
  return why;
}

size_t Space::sample(uint64_t seed, size_t n, double* out) const {
  if (restricted_) {
    // Distinct rows drawn uniformly (a partial Fisher-Yates over the kept rows), seeded.
    const size_t p = params_.size(), count = allowed_rows_.size() / p;
    std::vector<size_t> order(count);
    for (size_t i = 0; i < count; ++i) order[i] = i;
    std::mt19937_64 rng(seed);
    const size_t take = std::min(n, count);
    for (size_t i = 0; i < take; ++i) {
      std::swap(order[i], order[i + rng() % (count - i)]);
      std::copy(allowed_rows_.begin() + static_cast<std::ptrdiff_t>(order[i] * p),
                allowed_rows_.begin() + static_cast<std::ptrdiff_t>((order[i] + 1) * p), out + i * p);
    }
    return take;
  }
  size_t got = 0;
  CallWatch::Scope watch(CallKind::kSpace, ref_.info.id, "sample");
  throw_if_error(api_->sample(inst_, seed, n, out, &got), ref_.info.id);
  return got > n ? n : got;
}

size_t Space::RowHash::operator()(const std::vector<double>& row) const {
  size_t h = 1469598103934665603ull;
  for (double v : row) h = (h ^ std::hash<double>()(v)) * 1099511628211ull;
  return h;
}

Space::Restriction Space::restrict_to(const std::vector<double>& rows, std::string why) {
  const size_t p = params_.size();
  if (p == 0 || rows.size() % p != 0)
    throw PluginError(COTUNE_ERR_INVALID_ARGUMENT, ref_.info.id + ": restrict_to: rows of " + std::to_string(p) +
                                                       " values expected, got " + std::to_string(rows.size()) + " values");
  const size_t n = rows.size() / p;
  std::vector<int32_t> ok(n, 0);
  if (n > 0) check_unrestricted(rows.data(), n, ok.data());
  Restriction r;
  std::vector<double> kept;
  std::unordered_set<std::vector<double>, RowHash> set, refused;
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> row(rows.begin() + static_cast<std::ptrdiff_t>(i * p), rows.begin() + static_cast<std::ptrdiff_t>((i + 1) * p));
    if (set.count(row) != 0 || refused.count(row) != 0) continue;  // listed twice
    if (ok[i] == 0) {
      // The memory estimate is a prediction, and the executor has a measurement of this row (the
      // ABI's convention: an explanation that starts "out of memory" refuses a well-formed layout).
      const std::string reason = explain_unrestricted(row.data());
      if (reason.rfind("out of memory", 0) != 0) {
        refused.insert(row);
        if (r.dropped++ == 0) r.first_dropped = key(row.data()) + ": " + reason;
        continue;
      }
      ++r.over_memory;
    }
    set.insert(row);
    kept.insert(kept.end(), row.begin(), row.end());
  }
  allowed_ = std::move(set);
  allowed_rows_ = std::move(kept);
  restriction_ = std::move(why);
  restricted_ = true;
  r.kept = allowed_rows_.size() / p;
  return r;
}

void Space::featurize(const double* configs, size_t n, double* out) const {
  CallWatch::Scope watch(CallKind::kSpace, ref_.info.id, "featurize");
  throw_if_error(api_->featurize(inst_, configs, n, out), ref_.info.id);
}

const cotune_trace& Space::lower(const double* config) const {
  if (lower_ == nullptr) throw PluginError(COTUNE_ERR_UNSUPPORTED, ref_.info.id + ": this space does not lower to step traces");
  const cotune_trace* t = nullptr;
  CallWatch::Scope watch(CallKind::kSpace, ref_.info.id, "lower");
  throw_if_error(lower_(inst_, config, &t), ref_.info.id);
  if (t == nullptr) throw PluginError(COTUNE_ERR_INTERNAL, ref_.info.id + ": lower returned no trace");
  return *t;
}

bool Space::try_render(const double* config, int32_t format, std::string* out) const {
  auto render = optional_fn(api_, &cotune_space_api::render);
  if (render != nullptr) {
    StringSink s;
    cotune_error* err = render(inst_, config, format, &s.sink);
    if (err != nullptr && err->code == COTUNE_ERR_UNSUPPORTED) {
      if (err->destroy) err->destroy(err);
      if (format != COTUNE_RENDER_JSON) return false;
    } else {
      throw_if_error(err, ref_.info.id);
      *out = std::move(s.data);
      return true;
    }
  } else if (format != COTUNE_RENDER_JSON) {
    return false;
  }
  // The host renders JSON itself from the parameter descriptions.
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Param& p = params_[i];
    if (p.type == COTUNE_PARAM_CATEGORICAL) j[p.name] = p.format(config[i]);
    else if (p.type == COTUNE_PARAM_BOOL) j[p.name] = config[i] != 0;
    else if (p.type == COTUNE_PARAM_INT) j[p.name] = static_cast<long long>(config[i]);
    else j[p.name] = config[i];
  }
  *out = j.dump();
  return true;
}

std::string Space::render(const double* config, int32_t format) const {
  std::string out;
  if (!try_render(config, format, &out))
    throw PluginError(COTUNE_ERR_UNSUPPORTED, ref_.info.id + ": cannot render format " + std::to_string(format));
  return out;
}


std::optional<std::vector<std::string>> Space::metrics() const {
  auto fn = optional_fn(api_, &cotune_space_api::metrics);
  if (fn == nullptr) return std::nullopt;
  StringSink s;
  CallWatch::Scope watch(CallKind::kSpace, ref_.info.id, "metrics");
  throw_if_error(fn(inst_, &s.sink), ref_.info.id);
  return metric_names(s.data, ref_.info.id);
}

bool Space::set_target(const std::string& target) {
  // The kept rows were judged under the target of the moment (restrict_to).
  if (restricted_)
    throw PluginError(COTUNE_ERR_FAILED_PRECONDITION,
                      ref_.info.id + ": set_target after restrict_to: set the target first, then restrict");
  auto set = optional_fn(api_, &cotune_space_api::set_target);
  if (set == nullptr) return false;
  throw_if_error(set(inst_, str(target)), ref_.info.id);
  target_ = target;
  return true;
}

std::vector<double> Space::parse(std::string_view config_json) const {
  std::vector<double> out(params_.size());
  if (auto parse = optional_fn(api_, &cotune_space_api::parse)) {
    throw_if_error(parse(inst_, str(config_json), out.data()), ref_.info.id);
    return out;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config_json);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(std::string("configuration: not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw UserError("configuration: expected a JSON object");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Param& p = params_[i];
    out[i] = p.default_value;
    if (!j.contains(p.name)) continue;
    const auto& v = j[p.name];
    if (p.type == COTUNE_PARAM_CATEGORICAL && v.is_string()) {
      auto it = std::find(p.choices.begin(), p.choices.end(), v.get<std::string>());
      if (it == p.choices.end()) throw UserError("configuration: /" + p.name + ": unknown choice " + v.dump());
      out[i] = double(it - p.choices.begin());
    } else if (v.is_boolean()) {
      out[i] = v.get<bool>() ? 1 : 0;
    } else if (v.is_number()) {
      out[i] = v.get<double>();
    } else {
      throw UserError("configuration: /" + p.name + ": unexpected value " + v.dump());
    }
    if (!p.contains(out[i])) throw UserError("configuration: /" + p.name + ": " + v.dump() + " is outside its domain");
  }
  return out;
}

std::string Space::key(const double* config) const {
  std::string k;
  for (size_t i = 0; i < params_.size(); ++i) {
    // A parameter added to the space later is left out at its default: keys stored before it stay.
    if ((params_[i].flags & COTUNE_PARAM_OPTIONAL) && config[i] == params_[i].default_value) continue;
    if (!k.empty()) k += ';';
    k += params_[i].name;
    k += '=';
    k += params_[i].format(config[i]);
  }
  return k;
}

}  // namespace cotune::core
