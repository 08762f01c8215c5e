// cotune.hpp - header-only C++17 helpers for writing cotune plugins as plain classes.
//
// A plugin author writes a class per component and registers them with one macro:
//
//   class MySpace {
//    public:
//     MySpace(std::string_view workload_json, std::string_view options_json);
//     const cotune::ParamList& params() const;
//     void check(const double* configs, size_t n, int32_t* out_valid);
//     std::string explain(const double* config);
//     size_t sample(uint64_t seed, size_t n, double* out);
//     const std::vector<std::string>& feature_names() const;
//     void featurize(const double* configs, size_t n, double* out);
//     std::string render(const double* config, int32_t format);
//     // optional: const cotune_trace* lower(const double* config);
//     // optional: void parse(std::string_view config_json, double* out_config);
//     // optional: void set_target(std::string_view target);  // "megatron@core_v0.19.0"
//     // optional: std::vector<std::string> metrics();            // what its trials are measured in
//     // optional, all three (static: a row says its own workload; JSON text in and out, cotune.h):
//     //   static std::string table_schema();
//     //   static std::string table_read(std::string_view row_json);
//     //   static std::string table_write(std::string_view workload_json, std::string_view config_json);
//   };
//   COTUNE_PLUGIN(cotune::space<MySpace>({"org.example.space.mine", "mine", "My model.", "1.0.0"}))
//
// Errors: throw cotune::Error(code, message) (or any std::exception). Every entry point generated
// here catches everything and turns it into a cotune_error, so no exception crosses the boundary.
// The other kinds follow the same pattern; see docs/PLUGIN_GUIDE.md and the member lists below.
#ifndef COTUNE_COTUNE_HPP_
#define COTUNE_COTUNE_HPP_

#include <cotune/cotune.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace cotune {

// ------------------------------------------------------------------------------------------------
// Strings, errors, host access
// ------------------------------------------------------------------------------------------------

inline std::string_view view(cotune_str s) { return s.data ? std::string_view(s.data, s.len) : std::string_view(); }
inline cotune_str str(std::string_view s) { return cotune_str{s.data(), s.size()}; }

// An error with a cotune error code. Throw it from any component method.
class Error : public std::runtime_error {
 public:
  Error(int32_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int32_t code() const { return code_; }

 private:
  int32_t code_;
};

namespace detail {
// The host table this library was loaded with (one per plugin library: symbols are hidden).
inline const cotune_host* g_host = nullptr;
}  // namespace detail

inline const cotune_host& host() {
  if (detail::g_host == nullptr) throw Error(COTUNE_ERR_FAILED_PRECONDITION, "cotune host not set");
  return *detail::g_host;
}

inline void log(int32_t level, std::string_view component_id, std::string_view message) {
  if (detail::g_host != nullptr && detail::g_host->log != nullptr)
    detail::g_host->log(level, str(component_id), str(message));
}

// Takes ownership of an error returned across the boundary and throws it as cotune::Error.
inline void check(cotune_error* err) {
  if (err == nullptr) return;
  const int32_t code = err->code;
  const std::string message(view(err->message));
  if (err->destroy != nullptr) err->destroy(err);
  throw Error(code, message);
}

// Writes bytes into a sink, throwing when the receiver refuses them.
inline void write(const cotune_sink* sink, std::string_view data) {
  if (sink == nullptr || sink->write == nullptr) throw Error(COTUNE_ERR_INVALID_ARGUMENT, "no output sink");
  if (sink->write(sink->ctx, data.data(), data.size()) != 0)
    throw Error(COTUNE_ERR_RESOURCE_EXHAUSTED, "output sink refused the data");
}

// A list of names as a JSON array of strings (quotes, backslashes and control characters escaped).
inline std::string json_string_array(const std::vector<std::string>& names) {
  static const char* const hex = "0123456789abcdef";
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) {
    out += i == 0 ? "\"" : ",\"";
    for (const char ch : names[i]) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        out += "\\u00";
        out += hex[c >> 4];
        out += hex[c & 15];
      } else {
        out += static_cast<char>(c);
      }
    }
    out += '"';
  }
  return out + "]";
}

// A sink that appends into a std::string (for calling other components, or the host).
struct StringSink {
  std::string data;
  cotune_sink sink{COTUNE_STRUCT_SIZE(cotune_sink, write), this, &StringSink::append};
  StringSink() = default;
  StringSink(const StringSink&) = delete;
  StringSink& operator=(const StringSink&) = delete;
  static int32_t append(void* ctx, const char* bytes, size_t len) {
    try {
      static_cast<StringSink*>(ctx)->data.append(bytes, len);
      return 0;
    } catch (...) {
      return 1;
    }
  }
};

// Host conveniences that throw on error.
inline double json_number(std::string_view json, std::string_view pointer) {
  double v = 0;
  check(host().json_get_number(str(json), str(pointer), &v));
  return v;
}
inline std::string json_string(std::string_view json, std::string_view pointer) {
  StringSink s;
  check(host().json_get_string(str(json), str(pointer), &s.sink));
  return std::move(s.data);
}
inline cotune_hardware resolve_hardware(std::string_view cluster_json) {
  cotune_hardware hw{};
  hw.struct_size = COTUNE_STRUCT_SIZE(cotune_hardware, block_scaled_gemm_efficiency);
  check(host().resolve_hardware(str(cluster_json), &hw));
  return hw;
}
inline cotune_sim_result simulate(const cotune_trace& trace) {
  cotune_sim_result r{};
  r.struct_size = COTUNE_STRUCT_SIZE(cotune_sim_result, launch_bound_s);
  check(host().simulate_trace(&trace, &r));
  return r;
}

namespace detail {
// Runs f and converts any exception into a cotune_error created by the host.
template <class F>
cotune_error* guarded(F&& f) noexcept {
  auto make = [](int32_t code, const char* msg) -> cotune_error* {
    if (g_host == nullptr || g_host->error_new == nullptr) return nullptr;  // cannot report
    return g_host->error_new(code, cotune_str{msg, std::strlen(msg)});
  };
  try {
    f();
    return nullptr;
  } catch (const Error& e) {
    return make(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return make(COTUNE_ERR_RESOURCE_EXHAUSTED, "out of memory");
  } catch (const std::exception& e) {
    return make(COTUNE_ERR_INTERNAL, e.what());
  } catch (...) {
    return make(COTUNE_ERR_INTERNAL, "unknown exception");
  }
}

// Detection of optional members.
template <class, class = void> struct has_lower : std::false_type {};
template <class T> struct has_lower<T, std::void_t<decltype(std::declval<T&>().lower(static_cast<const double*>(nullptr)))>> : std::true_type {};
template <class, class = void> struct has_parse : std::false_type {};
template <class T> struct has_parse<T, std::void_t<decltype(std::declval<T&>().parse(std::string_view(), static_cast<double*>(nullptr)))>> : std::true_type {};
template <class, class = void> struct has_set_target : std::false_type {};
template <class T> struct has_set_target<T, std::void_t<decltype(std::declval<T&>().set_target(std::string_view()))>> : std::true_type {};
template <class, class = void> struct has_save : std::false_type {};
template <class T> struct has_save<T, std::void_t<decltype(std::declval<T&>().save()), decltype(std::declval<T&>().load(std::string_view()))>> : std::true_type {};
template <class, class = void> struct has_attach : std::false_type {};
template <class, class = void> struct has_candidates : std::false_type {};
template <class T> struct has_candidates<T, std::void_t<decltype(std::declval<T&>().candidates(std::declval<const cotune_trial&>()))>> : std::true_type {};
template <class T> struct has_attach<T, std::void_t<decltype(std::declval<T&>().attach(std::declval<const cotune_trial&>(), std::string_view()))>> : std::true_type {};
template <class, class = void> struct has_space_metrics : std::false_type {};
template <class T> struct has_space_metrics<T, std::void_t<decltype(std::declval<T&>().metrics())>> : std::true_type {};
template <class, class = void> struct has_executor_metrics : std::false_type {};
template <class T> struct has_executor_metrics<T, std::void_t<decltype(std::declval<T&>().metrics(std::declval<const cotune_trial&>()))>> : std::true_type {};
template <class, class = void> struct has_check_study : std::false_type {};
template <class T> struct has_check_study<T, std::void_t<decltype(std::declval<T&>().check_study(std::declval<const cotune_trial&>()))>> : std::true_type {};
template <class, class = void> struct has_table : std::false_type {};
template <class T>
struct has_table<T, std::void_t<decltype(T::table_schema()), decltype(T::table_read(std::string_view())),
                                decltype(T::table_write(std::string_view(), std::string_view()))>> : std::true_type {};
template <class, class = void> struct has_describe_fit : std::false_type {};
template <class T> struct has_describe_fit<T, std::void_t<decltype(std::declval<T&>().describe_fit())>> : std::true_type {};
}  // namespace detail

// ------------------------------------------------------------------------------------------------
// Parameter lists
// ------------------------------------------------------------------------------------------------

// Owns the storage behind an array of cotune_param (strings, value lists, choices).
class ParamList {
 public:
  ParamList() = default;
  ParamList(const ParamList&) = delete;
  ParamList& operator=(const ParamList&) = delete;

  // An integer parameter with an explicit list of allowed values (increasing).
  size_t add_int(std::string name, std::vector<double> values, double default_value,
                 std::string unit = "", std::string help = "") {
    Entry& e = add(std::move(name), COTUNE_PARAM_INT, std::move(unit), std::move(help));
    e.values = std::move(values);
    e.p.low = e.values.empty() ? 0 : e.values.front();
    e.p.high = e.values.empty() ? 0 : e.values.back();
    e.p.default_value = default_value;
    return finish(e);
  }
  // An integer parameter over every integer in [low, high].
  size_t add_int_range(std::string name, double low, double high, double default_value,
                       std::string unit = "", std::string help = "", uint32_t flags = 0) {
    Entry& e = add(std::move(name), COTUNE_PARAM_INT, std::move(unit), std::move(help));
    e.p.low = low;
    e.p.high = high;
    e.p.flags = flags;
    e.p.default_value = default_value;
    return finish(e);
  }
  size_t add_float(std::string name, double low, double high, double default_value,
                   std::string unit = "", std::string help = "", uint32_t flags = 0) {
    Entry& e = add(std::move(name), COTUNE_PARAM_FLOAT, std::move(unit), std::move(help));
    e.p.low = low;
    e.p.high = high;
    e.p.flags = flags;
    e.p.default_value = default_value;
    return finish(e);
  }
  size_t add_categorical(std::string name, std::vector<std::string> choices, size_t default_index,
                         std::string help = "") {
    Entry& e = add(std::move(name), COTUNE_PARAM_CATEGORICAL, "", std::move(help));
    e.choices = std::move(choices);
    e.p.low = 0;
    e.p.high = e.choices.empty() ? 0 : double(e.choices.size() - 1);
    e.p.default_value = double(default_index);
    return finish(e);
  }
  size_t add_bool(std::string name, bool default_value, std::string help = "") {
    Entry& e = add(std::move(name), COTUNE_PARAM_BOOL, "", std::move(help));
    e.p.low = 0;
    e.p.high = 1;
    e.p.default_value = default_value ? 1 : 0;
    return finish(e);
  }

  // Adds COTUNE_PARAM_* flags to parameter `index` (COTUNE_PARAM_OPTIONAL for one added later).
  void add_flags(size_t index, uint32_t flags) { entries_.at(index)->p.flags |= flags; }

  size_t size() const { return entries_.size(); }
  const cotune_param& operator[](size_t i) const { return entries_[i]->p; }
  const cotune_param* const* data() const { return pointers_.data(); }
  // Index of a parameter by name, or size() when absent.
  size_t find(std::string_view name) const {
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i]->name == name) return i;
    return entries_.size();
  }

 private:
  struct Entry {
    cotune_param p{};
    std::string name, unit, help;
    std::vector<double> values;
    std::vector<std::string> choices;
    std::vector<cotune_str> choice_strs;
  };
  Entry& add(std::string name, int32_t type, std::string unit, std::string help) {
    entries_.push_back(std::make_unique<Entry>());
    Entry& e = *entries_.back();
    e.name = std::move(name);
    e.unit = std::move(unit);
    e.help = std::move(help);
    e.p.struct_size = COTUNE_STRUCT_SIZE(cotune_param, help);
    e.p.type = type;
    return e;
  }
  size_t finish(Entry& e) {
    // Entries are heap-allocated, so the pointers taken here stay valid as the list grows.
    e.p.name = str(e.name);
    e.p.unit = str(e.unit);
    e.p.help = str(e.help);
    e.p.values = e.values.empty() ? nullptr : e.values.data();
    e.p.num_values = e.values.size();
    for (const auto& c : e.choices) e.choice_strs.push_back(str(c));
    e.p.choices = e.choice_strs.empty() ? nullptr : e.choice_strs.data();
    e.p.num_choices = e.choice_strs.size();
    pointers_.push_back(&e.p);
    return entries_.size() - 1;
  }
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<const cotune_param*> pointers_;
};

// ------------------------------------------------------------------------------------------------
// Searcher context and executor results
// ------------------------------------------------------------------------------------------------

// Throwing wrapper around the host's cotune_search_context.
class SearchContext {
 public:
  explicit SearchContext(const cotune_search_context* c) : c_(c) {}
  size_t num_params() const { return c_->num_params; }
  size_t sample(uint64_t seed, size_t n, double* out) const {
    size_t got = 0;
    check(c_->sample(c_->ctx, seed, n, out, &got));
    return got;
  }
  void check_valid(const double* configs, size_t n, int32_t* out_valid) const {
    check(c_->check(c_->ctx, configs, n, out_valid));
  }
  void score(const double* configs, size_t n, double* out_score, double* out_std = nullptr) const {
    check(c_->score(c_->ctx, configs, n, out_score, out_std));
  }
  void seen(const double* configs, size_t n, int32_t* out_seen) const {
    check(c_->seen(c_->ctx, configs, n, out_seen));
  }
  // See cotune_search_context.score_version; 0 when the host does not say.
  uint64_t score_version() const { return COTUNE_HAS_FIELD(c_, score_version) ? c_->score_version : 0; }

 private:
  const cotune_search_context* c_;
};

// The state of a job, as an executor keeps it; the adapter hands its strings out through poll().
struct JobResult {
  int32_t status = COTUNE_STATUS_PENDING;
  int32_t attempts = 0;
  std::string metrics_json, error, log_path, external_id;
  void fill(cotune_trial_result* out) const {
    out->status = status;
    out->attempts = attempts;
    out->metrics_json = str(metrics_json);
    out->error = str(error);
    out->log_path = str(log_path);
    out->external_id = str(external_id);
  }
};

// ------------------------------------------------------------------------------------------------
// Component descriptions and adapters
// ------------------------------------------------------------------------------------------------

// The descriptor of a component, in cotune_component's order: id, name, description, version, then
// the capabilities (those of the adapter are added). Earlier SDKs took the version before the
// description; the host refuses a version that is not MAJOR.MINOR.PATCH, so an initializer in the
// old order is refused with that message instead of loading with the two swapped.
struct ComponentInfo {
  const char* id;
  const char* name;
  const char* description;
  const char* version;
  uint32_t capabilities = 0;
};

namespace detail {
inline cotune_component make_component(int32_t kind, const ComponentInfo& info, uint32_t caps, const void* api) {
  cotune_component c{};
  c.struct_size = COTUNE_STRUCT_SIZE(cotune_component, api);
  c.kind = kind;
  c.capabilities = info.capabilities | caps;
  c.id = cotune_str{info.id, std::strlen(info.id)};
  c.name = cotune_str{info.name, std::strlen(info.name)};
  c.description = cotune_str{info.description, std::strlen(info.description)};
  c.version = cotune_str{info.version, std::strlen(info.version)};
  c.api = api;
  return c;
}

template <class T>
struct SpaceHolder {
  template <class... A>
  explicit SpaceHolder(A&&... a) : obj(std::forward<A>(a)...) {}
  T obj;
  std::vector<cotune_str> feature_strs;
};

template <class T>
struct SpaceAdapter {
  using H = SpaceHolder<T>;
  static T& self(cotune_space_instance* s) { return reinterpret_cast<H*>(s)->obj; }
  static cotune_error* create(const cotune_host*, cotune_str w, cotune_str o, cotune_space_instance** out) {
    return guarded([&] {
      if (out == nullptr) throw Error(COTUNE_ERR_INVALID_ARGUMENT, "out is NULL");
      *out = reinterpret_cast<cotune_space_instance*>(new H(view(w), view(o)));
    });
  }
  static void destroy(cotune_space_instance* s) { delete reinterpret_cast<H*>(s); }
  static cotune_error* describe(cotune_space_instance* s, const cotune_param* const** p, size_t* n) {
    return guarded([&] {
      const ParamList& list = self(s).params();
      *p = list.data();
      *n = list.size();
    });
  }
  static cotune_error* check(cotune_space_instance* s, const double* c, size_t n, int32_t* v) {
    return guarded([&] { self(s).check(c, n, v); });
  }
  static cotune_error* explain(cotune_space_instance* s, const double* c, const cotune_sink* out) {
    return guarded([&] {
      std::string why = self(s).explain(c);
      if (!why.empty()) write(out, why);
    });
  }
  static cotune_error* sample(cotune_space_instance* s, uint64_t seed, size_t n, double* out, size_t* count) {
    return guarded([&] { *count = self(s).sample(seed, n, out); });
  }
  static cotune_error* describe_features(cotune_space_instance* s, const cotune_str** names, size_t* n) {
    return guarded([&] {
      H* h = reinterpret_cast<H*>(s);
      const std::vector<std::string>& f = h->obj.feature_names();
      h->feature_strs.clear();
      for (const auto& name : f) h->feature_strs.push_back(str(name));
      *names = h->feature_strs.data();
      *n = h->feature_strs.size();
    });
  }
  static cotune_error* featurize(cotune_space_instance* s, const double* c, size_t n, double* out) {
    return guarded([&] { self(s).featurize(c, n, out); });
  }
  static cotune_error* lower(cotune_space_instance* s, const double* c, const cotune_trace** out) {
    if constexpr (has_lower<T>::value) {
      return guarded([&] { *out = self(s).lower(c); });
    } else {
      (void)s, (void)c, (void)out;
      return nullptr;
    }
  }
  static cotune_error* render(cotune_space_instance* s, const double* c, int32_t format, const cotune_sink* out) {
    return guarded([&] { write(out, self(s).render(c, format)); });
  }
  static cotune_error* parse(cotune_space_instance* s, cotune_str json, double* out) {
    if constexpr (has_parse<T>::value) {
      return guarded([&] { self(s).parse(view(json), out); });
    } else {
      (void)s, (void)json, (void)out;
      return nullptr;
    }
  }
  static cotune_error* set_target(cotune_space_instance* s, cotune_str target) {
    if constexpr (has_set_target<T>::value) {
      return guarded([&] { self(s).set_target(view(target)); });
    } else {
      (void)s, (void)target;
      return nullptr;
    }
  }
  static cotune_error* metrics(cotune_space_instance* s, const cotune_sink* out) {
    if constexpr (has_space_metrics<T>::value) {
      return guarded([&] { write(out, json_string_array(self(s).metrics())); });
    } else {
      (void)s, (void)out;
      return nullptr;
    }
  }
  static cotune_error* table_schema(const cotune_host*, const cotune_sink* out) {
    if constexpr (has_table<T>::value) {
      return guarded([&] { write(out, T::table_schema()); });
    } else {
      (void)out;
      return nullptr;
    }
  }
  static cotune_error* table_read(const cotune_host*, cotune_str row, const cotune_sink* out) {
    if constexpr (has_table<T>::value) {
      return guarded([&] { write(out, T::table_read(view(row))); });
    } else {
      (void)row, (void)out;
      return nullptr;
    }
  }
  static cotune_error* table_write(const cotune_host*, cotune_str workload, cotune_str config, const cotune_sink* out) {
    if constexpr (has_table<T>::value) {
      return guarded([&] { write(out, T::table_write(view(workload), view(config))); });
    } else {
      (void)workload, (void)config, (void)out;
      return nullptr;
    }
  }
  static const cotune_space_api* api() {
    static const cotune_space_api a = [] {
      cotune_space_api t{};
      t.struct_size = COTUNE_STRUCT_SIZE(cotune_space_api, table_write);
      t.create = &create;
      t.destroy = &destroy;
      t.describe = &describe;
      t.check = &check;
      t.explain = &explain;
      t.sample = &sample;
      t.describe_features = &describe_features;
      t.featurize = &featurize;
      t.lower = has_lower<T>::value ? &lower : nullptr;
      t.render = &render;
      t.parse = has_parse<T>::value ? &parse : nullptr;
      t.set_target = has_set_target<T>::value ? &set_target : nullptr;
      t.metrics = has_space_metrics<T>::value ? &metrics : nullptr;
      t.table_schema = has_table<T>::value ? &table_schema : nullptr;
      t.table_read = has_table<T>::value ? &table_read : nullptr;
      t.table_write = has_table<T>::value ? &table_write : nullptr;
      return t;
    }();
    return &a;
  }
  static uint32_t caps() { return has_lower<T>::value ? COTUNE_CAP_LOWER_TRACE : 0u; }
};

template <class T>
struct PredictorAdapter {
  static T& self(cotune_predictor_instance* p) { return *reinterpret_cast<T*>(p); }
  static cotune_error* create(const cotune_host*, cotune_str o, cotune_predictor_instance** out) {
    return guarded([&] {
      if (out == nullptr) throw Error(COTUNE_ERR_INVALID_ARGUMENT, "out is NULL");
      *out = reinterpret_cast<cotune_predictor_instance*>(new T(view(o)));
    });
  }
  static void destroy(cotune_predictor_instance* p) { delete reinterpret_cast<T*>(p); }
  static cotune_error* fit(cotune_predictor_instance* p, const double* x, size_t n, size_t d, const double* y, const double* w) {
    return guarded([&] { self(p).fit(x, n, d, y, w); });
  }
  static cotune_error* predict(cotune_predictor_instance* p, const double* x, size_t n, size_t d, double* mean, double* sd) {
    return guarded([&] { self(p).predict(x, n, d, mean, sd); });
  }
  static cotune_error* save(cotune_predictor_instance* p, const cotune_sink* out) {
    if constexpr (has_save<T>::value) {
      return guarded([&] { write(out, self(p).save()); });
    } else {
      (void)p, (void)out;
      return nullptr;
    }
  }
  static cotune_error* load(cotune_predictor_instance* p, const void* data, size_t len) {
    if constexpr (has_save<T>::value) {
      return guarded([&] { self(p).load(std::string_view(static_cast<const char*>(data), len)); });
    } else {
      (void)p, (void)data, (void)len;
      return nullptr;
    }
  }
  static cotune_error* describe_fit(cotune_predictor_instance* p, const cotune_sink* out) {
    if constexpr (has_describe_fit<T>::value) {
      return guarded([&] { write(out, self(p).describe_fit()); });
    } else {
      return guarded([&] { (void)p; write(out, "{}"); });
    }
  }
  static const cotune_predictor_api* api() {
    static const cotune_predictor_api a = [] {
      cotune_predictor_api t{};
      t.struct_size = COTUNE_STRUCT_SIZE(cotune_predictor_api, describe_fit);
      t.create = &create;
      t.destroy = &destroy;
      t.fit = &fit;
      t.predict = &predict;
      t.save = has_save<T>::value ? &save : nullptr;
      t.load = has_save<T>::value ? &load : nullptr;
      t.describe_fit = &describe_fit;
      return t;
    }();
    return &a;
  }
  static uint32_t caps() { return has_save<T>::value ? COTUNE_CAP_SAVE_STATE : 0u; }
};

template <class T>
struct SearcherAdapter {
  static T& self(cotune_searcher_instance* s) { return *reinterpret_cast<T*>(s); }
  static cotune_error* create(const cotune_host*, cotune_str o, const cotune_param* const* params, size_t n,
                              uint64_t seed, cotune_searcher_instance** out) {
    return guarded([&] {
      if (out == nullptr) throw Error(COTUNE_ERR_INVALID_ARGUMENT, "out is NULL");
      *out = reinterpret_cast<cotune_searcher_instance*>(new T(view(o), params, n, seed));
    });
  }
  static void destroy(cotune_searcher_instance* s) { delete reinterpret_cast<T*>(s); }
  static cotune_error* propose(cotune_searcher_instance* s, const cotune_search_context* c, size_t n, double* out,
                               size_t* count) {
    return guarded([&] {
      SearchContext ctx(c);
      *count = self(s).propose(ctx, n, out);
    });
  }
  static cotune_error* observe(cotune_searcher_instance* s, const double* c, size_t n, const double* scores,
                               const int32_t* statuses) {
    return guarded([&] { self(s).observe(c, n, scores, statuses); });
  }
  static cotune_error* save(cotune_searcher_instance* s, const cotune_sink* out) {
    if constexpr (has_save<T>::value) {
      return guarded([&] { write(out, self(s).save()); });
    } else {
      (void)s, (void)out;
      return nullptr;
    }
  }
  static cotune_error* load(cotune_searcher_instance* s, const void* data, size_t len) {
    if constexpr (has_save<T>::value) {
      return guarded([&] { self(s).load(std::string_view(static_cast<const char*>(data), len)); });
    } else {
      (void)s, (void)data, (void)len;
      return nullptr;
    }
  }
  static const cotune_searcher_api* api() {
    static const cotune_searcher_api a = [] {
      cotune_searcher_api t{};
      t.struct_size = COTUNE_STRUCT_SIZE(cotune_searcher_api, load);
      t.create = &create;
      t.destroy = &destroy;
      t.propose = &propose;
      t.observe = &observe;
      t.save = has_save<T>::value ? &save : nullptr;
      t.load = has_save<T>::value ? &load : nullptr;
      return t;
    }();
    return &a;
  }
  static uint32_t caps() { return has_save<T>::value ? COTUNE_CAP_SAVE_STATE : 0u; }
};

// Executors declare `using Job = ...;` and implement:
//   explicit T(std::string_view options_json);
//   int32_t capacity();
//   std::unique_ptr<Job> submit(const cotune_trial& trial);
//   const cotune::JobResult& poll(Job& job, int32_t timeout_ms);
//   void cancel(Job& job);
//   optional: std::unique_ptr<Job> attach(const cotune_trial& trial, std::string_view external_id);
//   optional: std::vector<double> candidates(const cotune_trial& study);  // rows of num_params values
//   optional: std::vector<std::string> metrics(const cotune_trial& study);  // every metric it reports
//   optional: void check_study(const cotune_trial& study);  // throws cotune::Error on a mismatch
template <class T>
struct ExecutorAdapter {
  using Job = typename T::Job;
  static T& self(cotune_executor_instance* e) { return *reinterpret_cast<T*>(e); }
  static Job& job(cotune_job* j) { return *reinterpret_cast<Job*>(j); }
  static cotune_error* create(const cotune_host*, cotune_str o, cotune_executor_instance** out) {
    return guarded([&] {
      if (out == nullptr) throw Error(COTUNE_ERR_INVALID_ARGUMENT, "out is NULL");
      *out = reinterpret_cast<cotune_executor_instance*>(new T(view(o)));
    });
  }
  static void destroy(cotune_executor_instance* e) { delete reinterpret_cast<T*>(e); }
  static cotune_error* capacity(cotune_executor_instance* e, int32_t* out) {
    return guarded([&] { *out = self(e).capacity(); });
  }
  static cotune_error* submit(cotune_executor_instance* e, const cotune_trial* t, cotune_job** out) {
    return guarded([&] {
      if (t == nullptr || out == nullptr) throw Error(COTUNE_ERR_INVALID_ARGUMENT, "trial or out is NULL");
      *out = reinterpret_cast<cotune_job*>(self(e).submit(*t).release());
    });
  }
  static cotune_error* poll(cotune_executor_instance* e, cotune_job* j, int32_t timeout_ms, cotune_trial_result* out) {
    return guarded([&] {
      if (j == nullptr || out == nullptr) throw Error(COTUNE_ERR_INVALID_ARGUMENT, "job or out is NULL");
      self(e).poll(job(j), timeout_ms).fill(out);
    });
  }
  static cotune_error* cancel(cotune_executor_instance* e, cotune_job* j) {
    return guarded([&] {
      if (j == nullptr) throw Error(COTUNE_ERR_INVALID_ARGUMENT, "job is NULL");
      self(e).cancel(job(j));
    });
  }
  static void release(cotune_executor_instance*, cotune_job* j) { delete reinterpret_cast<Job*>(j); }
  static cotune_error* attach(cotune_executor_instance* e, const cotune_trial* t, cotune_str id, cotune_job** out) {
    if constexpr (has_attach<T>::value) {
      return guarded([&] { *out = reinterpret_cast<cotune_job*>(self(e).attach(*t, view(id)).release()); });
    } else {
      (void)e, (void)t, (void)id, (void)out;
      return nullptr;
    }
  }
  static cotune_error* candidates(cotune_executor_instance* e, const cotune_trial* study, double* out,
                                  size_t capacity, size_t* out_count) {
    if constexpr (has_candidates<T>::value) {
      return guarded([&] {
        if (study == nullptr || out_count == nullptr || (out == nullptr && capacity > 0))
          throw Error(COTUNE_ERR_INVALID_ARGUMENT, "study or out_count is NULL, or out is NULL with a capacity");
        const std::vector<double> rows = self(e).candidates(*study);
        const size_t width = study->num_params;
        if (width == 0 || rows.size() % width != 0)
          throw Error(COTUNE_ERR_INTERNAL, "candidates(): the rows do not have num_params values each");
        *out_count = rows.size() / width;
        std::copy(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(std::min(*out_count, capacity) * width), out);
      });
    } else {
      (void)e, (void)study, (void)out, (void)capacity, (void)out_count;
      return nullptr;
    }
  }
  static cotune_error* metrics(cotune_executor_instance* e, const cotune_trial* study, const cotune_sink* out) {
    if constexpr (has_executor_metrics<T>::value) {
      return guarded([&] {
        if (study == nullptr) throw Error(COTUNE_ERR_INVALID_ARGUMENT, "study is NULL");
        write(out, json_string_array(self(e).metrics(*study)));
      });
    } else {
      (void)e, (void)study, (void)out;
      return nullptr;
    }
  }
  static cotune_error* check_study(cotune_executor_instance* e, const cotune_trial* study) {
    if constexpr (has_check_study<T>::value) {
      return guarded([&] {
        if (study == nullptr) throw Error(COTUNE_ERR_INVALID_ARGUMENT, "study is NULL");
        self(e).check_study(*study);
      });
    } else {
      (void)e, (void)study;
      return nullptr;
    }
  }
  static const cotune_executor_api* api() {
    static const cotune_executor_api a = [] {
      cotune_executor_api t{};
      t.struct_size = COTUNE_STRUCT_SIZE(cotune_executor_api, check_study);
      t.create = &create;
      t.destroy = &destroy;
      t.capacity = &capacity;
      t.submit = &submit;
      t.poll = &poll;
      t.cancel = &cancel;
      t.release = &release;
      t.attach = has_attach<T>::value ? &attach : nullptr;
      t.candidates = has_candidates<T>::value ? &candidates : nullptr;
      t.metrics = has_executor_metrics<T>::value ? &metrics : nullptr;
      t.check_study = has_check_study<T>::value ? &check_study : nullptr;
      return t;
    }();
    return &a;
  }
  static uint32_t caps() {
    return (has_attach<T>::value ? COTUNE_CAP_ATTACH : 0u) | (has_candidates<T>::value ? COTUNE_CAP_CANDIDATES : 0u);
  }
};
}  // namespace detail

// Component factories for COTUNE_PLUGIN(...).
template <class T> cotune_component space(const ComponentInfo& i) {
  return detail::make_component(COTUNE_KIND_SPACE, i, detail::SpaceAdapter<T>::caps(), detail::SpaceAdapter<T>::api());
}
template <class T> cotune_component predictor(const ComponentInfo& i) {
  return detail::make_component(COTUNE_KIND_PREDICTOR, i, detail::PredictorAdapter<T>::caps(), detail::PredictorAdapter<T>::api());
}
template <class T> cotune_component searcher(const ComponentInfo& i) {
  return detail::make_component(COTUNE_KIND_SEARCHER, i, detail::SearcherAdapter<T>::caps(), detail::SearcherAdapter<T>::api());
}
template <class T> cotune_component executor(const ComponentInfo& i) {
  return detail::make_component(COTUNE_KIND_EXECUTOR, i, detail::ExecutorAdapter<T>::caps(), detail::ExecutorAdapter<T>::api());
}

namespace detail {
// Builds the static plugin descriptor from the components given to COTUNE_PLUGIN.
inline const cotune_plugin* make_plugin(const cotune_host* h, std::vector<cotune_component> (*list)()) noexcept {
  g_host = h;
  try {
    static const std::vector<cotune_component> components = list();
    static const std::vector<const cotune_component*> pointers = [] {
      std::vector<const cotune_component*> p;
      for (const auto& c : components) p.push_back(&c);
      return p;
    }();
    static const cotune_plugin plugin{COTUNE_STRUCT_SIZE(cotune_plugin, num_components), COTUNE_ABI_MAJOR,
                                      COTUNE_ABI_MINOR, pointers.data(), pointers.size()};
    return &plugin;
  } catch (...) {
    return nullptr;
  }
}
}  // namespace detail
}  // namespace cotune

// Defines the plugin's entry point from a comma-separated list of cotune::space<T>(...),
// cotune::predictor<T>(...), cotune::searcher<T>(...) and cotune::executor<T>(...).
#define COTUNE_PLUGIN(...)                                                                         \
  extern "C" COTUNE_EXPORT const cotune_plugin* cotune_plugin_entry_v1(const cotune_host* host) { \
    return ::cotune::detail::make_plugin(                                                          \
        host, [] { return std::vector<cotune_component>{__VA_ARGS__}; });                         \
  }

#endif  // COTUNE_COTUNE_HPP_
