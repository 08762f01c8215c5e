// Host-side wrappers of plugin components (see components.hpp).
#include <cotune/core/abi/call_watch.hpp>
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>

#include "loader/plugin_library.hpp"

namespace cotune::core {
namespace {

std::string_view sv(cotune_str s) { return s.data ? std::string_view(s.data, s.len) : std::string_view(); }
cotune_str cs(std::string_view s) { return {s.data(), s.size()}; }

struct StringSink {
  std::string data;
  cotune_sink sink{COTUNE_STRUCT_SIZE(cotune_sink, write), this, &StringSink::append};
  static int32_t append(void* ctx, const char* bytes, size_t len) {
    try {
      static_cast<StringSink*>(ctx)->data.append(bytes, len);
      return 0;
    } catch (...) {
      return 1;
    }
  }
};

// A function pointer of `table` at `field`, or nullptr when the plugin's table is too old to have it.
template <class Api, class Fn>
Fn optional_fn(const Api* api, Fn Api::*field) {
  const size_t end = reinterpret_cast<size_t>(&(static_cast<const Api*>(nullptr)->*field)) + sizeof(Fn);
  return api->struct_size >= end ? api->*field : nullptr;
}

std::string format_number(double v) {
  if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

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
    message += std::string(sv(err->message));
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
      const auto i = static_cast<long long>(value);
      if (value >= 0 && i < static_cast<long long>(choices.size()) && double(i) == value) return choices[size_t(i)];
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

// ---- Space ---------------------------------------------------------------------------------------

Space::Space(ComponentRef ref, std::string_view workload_json, std::string_view options_json)
    : ref_(std::move(ref)), api_(static_cast<const cotune_space_api*>(ref_.component->api)) {
  const std::string& who = ref_.info.id;
  {
    CallWatch::Scope watch(CallKind::kSpace, ref_.info.id, "create");
    throw_if_error(api_->create(host_services(), cs(workload_json), cs(options_json), &inst_), who);
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
      q.name = std::string(sv(p->name));
      q.type = p->type;
      q.flags = p->flags;
      q.low = p->low;
      q.high = p->high;
      if (p->values != nullptr) q.values.assign(p->values, p->values + p->num_values);
      for (size_t c = 0; p->choices != nullptr && c < p->num_choices; ++c) q.choices.emplace_back(sv(p->choices[c]));
      q.default_value = p->default_value;
      q.unit = std::string(sv(p->unit));
      q.help = std::string(sv(p->help));
      params_.push_back(std::move(q));
    }
    const cotune_str* names = nullptr;
    size_t nf = 0;
    throw_if_error(api_->describe_features(inst_, &names, &nf), who);
    for (size_t i = 0; i < nf; ++i) feature_names_.emplace_back(sv(names[i]));
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
  check_unrestricted(configs, n, out_valid);
  if (!restricted_) return;
  const size_t p = params_.size();
  std::vector<double> row(p);
  for (size_t i = 0; i < n; ++i) {
    if (out_valid[i] == 0) continue;
    row.assign(configs + i * p, configs + (i + 1) * p);
    if (allowed_.count(row) == 0) out_valid[i] = 0;
  }
}

bool Space::valid(const double* config) const {
  int32_t v = 0;
  check(config, 1, &v);
  return v != 0;
}

std::string Space::explain(const double* config) const {
  StringSink s;
  {
    CallWatch::Scope watch(CallKind::kSpace, ref_.info.id, "explain");
    throw_if_error(api_->explain(inst_, config, &s.sink), ref_.info.id);
  }
  if (s.data.empty() && restricted_ && !valid(config)) return "not among the configurations the study may run: " + restriction_;
  return s.data;
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

size_t Space::restrict_to(const std::vector<double>& rows, std::string why) {
  const size_t p = params_.size();
  if (p == 0 || rows.size() % p != 0)
    throw PluginError(COTUNE_ERR_INVALID_ARGUMENT, ref_.info.id + ": restrict_to: rows of " + std::to_string(p) +
                                                       " values expected, got " + std::to_string(rows.size()) + " values");
  const size_t n = rows.size() / p;
  std::vector<int32_t> ok(n, 0);
  if (n > 0) check_unrestricted(rows.data(), n, ok.data());
  std::vector<double> kept;
  std::unordered_set<std::vector<double>, RowHash> set;
  for (size_t i = 0; i < n; ++i) {
    if (ok[i] == 0) continue;
    std::vector<double> row(rows.begin() + static_cast<std::ptrdiff_t>(i * p), rows.begin() + static_cast<std::ptrdiff_t>((i + 1) * p));
    if (!set.insert(row).second) continue;  // listed twice
    kept.insert(kept.end(), row.begin(), row.end());
  }
  allowed_ = std::move(set);
  allowed_rows_ = std::move(kept);
  restriction_ = std::move(why);
  restricted_ = true;
  return allowed_rows_.size() / p;
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

namespace {
// A plugin's list of metric names (a JSON array of strings), or a PluginError naming it.
std::vector<std::string> metric_names(const std::string& text, const std::string& who) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  std::vector<std::string> out;
  if (j.is_array())
    for (const nlohmann::json& v : j) {
      if (!v.is_string() || v.get<std::string>().empty()) {
        out.clear();
        break;
      }
      out.push_back(v.get<std::string>());
    }
  if (out.empty() && !(j.is_array() && j.empty()))
    throw PluginError(COTUNE_ERR_INTERNAL, who + ": metrics() wrote " + text.substr(0, 200) +
                                               ", not a JSON array of metric names");
  return out;
}
}  // namespace

std::optional<std::vector<std::string>> Space::metrics() const {
  auto fn = optional_fn(api_, &cotune_space_api::metrics);
  if (fn == nullptr) return std::nullopt;
  StringSink s;
  CallWatch::Scope watch(CallKind::kSpace, ref_.info.id, "metrics");
  throw_if_error(fn(inst_, &s.sink), ref_.info.id);
  return metric_names(s.data, ref_.info.id);
}

bool Space::set_target(const std::string& target) {
  auto set = optional_fn(api_, &cotune_space_api::set_target);
  if (set == nullptr) return false;
  throw_if_error(set(inst_, cs(target)), ref_.info.id);
  target_ = target;
  return true;
}

std::vector<double> Space::parse(std::string_view config_json) const {
  std::vector<double> out(params_.size());
  if (auto parse = optional_fn(api_, &cotune_space_api::parse)) {
    throw_if_error(parse(inst_, cs(config_json), out.data()), ref_.info.id);
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

// ---- Predictor -----------------------------------------------------------------------------------

Predictor::Predictor(ComponentRef ref, std::string_view options_json)
    : ref_(std::move(ref)), api_(static_cast<const cotune_predictor_api*>(ref_.component->api)) {
  {
    CallWatch::Scope watch(CallKind::kPredictor, ref_.info.id, "create");
    throw_if_error(api_->create(host_services(), cs(options_json), &inst_), ref_.info.id);
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

// ---- Searcher ------------------------------------------------------------------------------------

Searcher::Searcher(ComponentRef ref, std::string_view options_json, const Space& space, uint64_t seed)
    : ref_(std::move(ref)), api_(static_cast<const cotune_searcher_api*>(ref_.component->api)) {
  {
    CallWatch::Scope watch(CallKind::kSearcher, ref_.info.id, "create");
    throw_if_error(api_->create(host_services(), cs(options_json), space.raw_params(), space.num_params(), seed, &inst_),
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

// ---- Executor ------------------------------------------------------------------------------------

Executor::Executor(ComponentRef ref, std::string_view options_json)
    : ref_(std::move(ref)), api_(static_cast<const cotune_executor_api*>(ref_.component->api)) {
  {
    CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "create");
    throw_if_error(api_->create(host_services(), cs(options_json), &inst_), ref_.info.id);
  }
  if (inst_ == nullptr) throw PluginError(COTUNE_ERR_INTERNAL, ref_.info.id + ": create returned no instance");
}
Executor::~Executor() { api_->destroy(inst_); }

bool Executor::can_attach() const { return optional_fn(api_, &cotune_executor_api::attach) != nullptr; }

bool Executor::has_candidates() const {
  return optional_fn(api_, &cotune_executor_api::candidates) != nullptr;
}

std::vector<double> Executor::candidates(const cotune_trial& study) const {
  auto fn = optional_fn(api_, &cotune_executor_api::candidates);
  if (fn == nullptr) throw PluginError(COTUNE_ERR_UNSUPPORTED, ref_.info.id + ": lists no candidates");
  size_t count = 0;
  CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "candidates");
  throw_if_error(fn(inst_, &study, nullptr, 0, &count), ref_.info.id);
  std::vector<double> rows(count * study.num_params);
  size_t again = 0;
  throw_if_error(fn(inst_, &study, rows.data(), count, &again), ref_.info.id);
  if (again != count)
    throw PluginError(COTUNE_ERR_INTERNAL, ref_.info.id + ": candidates() gave " + std::to_string(count) +
                                               " rows, then " + std::to_string(again));
  return rows;
}

std::optional<std::vector<std::string>> Executor::metrics(const cotune_trial& study) const {
  auto fn = optional_fn(api_, &cotune_executor_api::metrics);
  if (fn == nullptr) return std::nullopt;
  StringSink s;
  CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "metrics");
  throw_if_error(fn(inst_, &study, &s.sink), ref_.info.id);
  return metric_names(s.data, ref_.info.id);
}

int32_t Executor::capacity() const {
  int32_t c = 1;
  CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "capacity");
  throw_if_error(api_->capacity(inst_, &c), ref_.info.id);
  return c < 1 ? 1 : c;
}

std::unique_ptr<Executor::Job> Executor::submit(const cotune_trial& trial) {
  cotune_job* job = nullptr;
  CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "submit");
  throw_if_error(api_->submit(inst_, &trial, &job), ref_.info.id);
  if (job == nullptr) throw PluginError(COTUNE_ERR_INTERNAL, ref_.info.id + ": submit returned no job");
  return std::unique_ptr<Job>(new Job(this, job));
}

std::unique_ptr<Executor::Job> Executor::attach(const cotune_trial& trial, std::string_view external_id) {
  auto fn = optional_fn(api_, &cotune_executor_api::attach);
  if (fn == nullptr) throw PluginError(COTUNE_ERR_UNSUPPORTED, ref_.info.id + ": cannot re-attach to jobs");
  cotune_job* job = nullptr;
  CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "attach");
  throw_if_error(fn(inst_, &trial, cs(external_id), &job), ref_.info.id);
  if (job == nullptr) throw PluginError(COTUNE_ERR_INTERNAL, ref_.info.id + ": attach returned no job");
  return std::unique_ptr<Job>(new Job(this, job));
}

Executor::Job::~Job() { owner_->api_->release(owner_->inst_, job_); }

TrialResult Executor::Job::poll(int32_t timeout_ms) {
  cotune_trial_result r{};
  r.struct_size = COTUNE_STRUCT_SIZE(cotune_trial_result, external_id);
  CallWatch::Scope watch(CallKind::kExecutor, owner_->ref_.info.id, "poll");
  throw_if_error(owner_->api_->poll(owner_->inst_, job_, timeout_ms, &r), owner_->ref_.info.id);
  TrialResult t;
  t.status = r.status;
  t.attempts = r.attempts;
  t.metrics_json = std::string(sv(r.metrics_json));
  t.error = std::string(sv(r.error));
  t.log_path = std::string(sv(r.log_path));
  t.external_id = std::string(sv(r.external_id));
  return t;
}

void Executor::Job::cancel() {
  CallWatch::Scope watch(CallKind::kExecutor, owner_->ref_.info.id, "cancel");
  throw_if_error(owner_->api_->cancel(owner_->inst_, job_), owner_->ref_.info.id);
}

}  // namespace cotune::core
