// Host-side C++ wrappers around plugin components. Each wrapper owns its instance, keeps the
// plugin library loaded for as long as it lives, and turns cotune_error objects into exceptions
// (core::PluginError, message prefixed with the component id).
#ifndef COTUNE_CORE_ABI_COMPONENTS_HPP_
#define COTUNE_CORE_ABI_COMPONENTS_HPP_

#include <cotune/cotune.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace cotune::core {

class PluginLibrary;      // a loaded shared library (plugin_library.hpp)
class IsolatedComponent;  // its calls forwarded to child processes (isolation.hpp)

// A component found in a loaded library: what `cotune plugins` lists.
struct ComponentInfo {
  int32_t kind = 0;
  uint32_t capabilities = 0;
  std::string id, name, description, version;
  uint32_t abi_major = 0, abi_minor = 0;
  std::string file;  // the library it came from
};

// A reference to a component that keeps its library loaded.
struct ComponentRef {
  std::shared_ptr<const PluginLibrary> library;
  const cotune_component* component = nullptr;  // inside `library`'s static storage
  ComponentInfo info;
  // Set for "isolation": "process": the wrappers call its table instead of the component's.
  std::shared_ptr<const IsolatedComponent> isolated;

  const void* api() const;  // the table the wrappers call
};

const char* kind_name(int32_t kind);  // "space", "predictor", "searcher", "executor"
int32_t kind_from_name(std::string_view name);  // 0 when unknown

// Turns an error returned across the ABI into a PluginError naming `who` (and frees it).
void throw_if_error(cotune_error* err, std::string_view who);

// A copied parameter description (outlives the instance it came from).
struct Param {
  std::string name;
  int32_t type = 0;
  uint32_t flags = 0;
  double low = 0, high = 0;
  std::vector<double> values;        // INT: explicit values (empty: every integer in range)
  std::vector<std::string> choices;  // CATEGORICAL
  double default_value = 0;
  std::string unit, help;

  // The domain as a list of values when it is finite and small (INT lists, ranges, choices,
  // bools); empty for FLOAT and unbounded ranges.
  std::vector<double> domain() const;
  // A value as text: the choice name, "true"/"false", or the number.
  std::string format(double value) const;
  // True when `value` lies in the domain.
  bool contains(double value) const;
};

class Space {
 public:
  Space(ComponentRef ref, std::string_view workload_json, std::string_view options_json);
  ~Space();
  Space(const Space&) = delete;
  Space& operator=(const Space&) = delete;

  const ComponentInfo& info() const { return ref_.info; }
  const std::vector<Param>& params() const { return params_; }
  const cotune_param* const* raw_params() const { return raw_params_; }
  size_t num_params() const { return params_.size(); }
  const std::vector<std::string>& feature_names() const { return feature_names_; }
  bool can_lower() const { return lower_ != nullptr; }

  void check(const double* configs, size_t n, int32_t* out_valid) const;
  bool valid(const double* config) const;
  std::string explain(const double* config) const;  // "" when valid
  size_t sample(uint64_t seed, size_t n, double* out) const;
  void featurize(const double* configs, size_t n, double* out) const;
  const cotune_trace& lower(const double* config) const;  // borrowed until the next lower()
  std::string render(const double* config, int32_t format) const;  // throws on UNSUPPORTED
  bool try_render(const double* config, int32_t format, std::string* out) const;
  std::vector<double> parse(std::string_view config_json) const;  // parse() or the host fallback
  // The framework and version configurations will be launched with ("megatron@core_v0.19.0"):
  // check/explain/sample then also apply its rules, and render() writes its format. False when the
  // space has no launch targets (it renders its formats without version); throws PluginError for
  // a target the space does not know.
  bool set_target(const std::string& target);
  const std::string& target() const { return target_; }
  // The metrics its trials are measured in (ABI 1.3), or nullopt when the space names none.
  std::optional<std::vector<std::string>> metrics() const;

  // Canonical key of a configuration: "name=value;..." in parameter order, values formatted.
  std::string key(const double* config) const;

  // What restrict_to kept of the rows it was given.
  struct Restriction {
    size_t kept = 0;            // distinct rows kept
    size_t over_memory = 0;     // of them, rows the space's memory estimate alone refuses
    size_t dropped = 0;         // rows the space refuses (duplicates are neither)
    std::string first_dropped;  // the first of those, and why: "{...}: pp = 12 is outside its domain ..."
  };
  // Narrows the space to `rows` (configurations, row-major) that are valid, or that only the
  // memory estimate refuses (explain() says "out of memory": the executor measured them, so they
  // ran): check() and valid() then require membership, explain() says why a configuration is out,
  // and sample() draws among them. Used when the executor can answer only a fixed set (a table of
  // runs). `why` ends the explanation of an excluded configuration ("the replay table has no run of it").
  Restriction restrict_to(const std::vector<double>& rows, std::string why);
  bool restricted() const { return restricted_; }

 private:
  struct RowHash {
    size_t operator()(const std::vector<double>& row) const;
  };
  // The plugin's own verdict and explanation, before any restriction.
  void check_unrestricted(const double* configs, size_t n, int32_t* out_valid) const;
  std::string explain_unrestricted(const double* config) const;

  std::string target_;
  bool restricted_ = false;
  std::vector<double> allowed_rows_;  // the kept rows, in the order given
  std::unordered_set<std::vector<double>, RowHash> allowed_;
  std::string restriction_;

  ComponentRef ref_;
  const cotune_space_api* api_ = nullptr;
  cotune_space_instance* inst_ = nullptr;
  decltype(cotune_space_api::lower) lower_ = nullptr;
  const cotune_param* const* raw_params_ = nullptr;
  std::vector<Param> params_;
  std::vector<std::string> feature_names_;
};

class Predictor {
 public:
  Predictor(ComponentRef ref, std::string_view options_json);
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  const ComponentInfo& info() const { return ref_.info; }
  bool has_std() const { return (ref_.info.capabilities & COTUNE_CAP_PREDICT_STD) != 0; }
  bool can_save() const;

  void fit(const double* x, size_t n, size_t d, const double* y, const double* w = nullptr);
  void predict(const double* x, size_t n, size_t d, double* out_mean, double* out_std = nullptr) const;
  std::string save() const;
  void load(std::string_view bytes);
  std::string describe_fit() const;

 private:
  ComponentRef ref_;
  const cotune_predictor_api* api_ = nullptr;
  cotune_predictor_instance* inst_ = nullptr;
};

class Searcher {
 public:
  Searcher(ComponentRef ref, std::string_view options_json, const Space& space, uint64_t seed);
  ~Searcher();
  Searcher(const Searcher&) = delete;
  Searcher& operator=(const Searcher&) = delete;

  const ComponentInfo& info() const { return ref_.info; }
  bool can_save() const;

  // Returns how many rows of `out` (capacity n x num_params) were filled.
  size_t propose(const cotune_search_context& context, size_t n, double* out);
  void observe(const double* configs, size_t n, const double* scores, const int32_t* statuses);
  std::string save() const;
  void load(std::string_view bytes);

 private:
  ComponentRef ref_;
  const cotune_searcher_api* api_ = nullptr;
  cotune_searcher_instance* inst_ = nullptr;
};

// A trial's state as the host keeps it (strings copied out of the plugin).
struct TrialResult {
  int32_t status = COTUNE_STATUS_PENDING;
  int32_t attempts = 0;
  std::string metrics_json, error, log_path, external_id;
  bool finished() const { return status != COTUNE_STATUS_PENDING && status != COTUNE_STATUS_RUNNING; }
};

const char* status_name(int32_t status);  // "ok", "failed", "oom", ...
int32_t status_from_name(std::string_view name);  // -1 when unknown

class Executor {
 public:
  Executor(ComponentRef ref, std::string_view options_json);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  const ComponentInfo& info() const { return ref_.info; }
  bool needs_trace() const { return (ref_.info.capabilities & COTUNE_CAP_NEEDS_TRACE) != 0; }
  bool can_attach() const;
  // Whether it has the optional entry points metrics (ABI 1.3) and check_study (ABI 1.10).
  bool has_metrics() const;
  bool has_check_study() const;
  // Whether the executor lists every configuration it can answer (COTUNE_CAP_CANDIDATES).
  bool has_candidates() const;
  // Those configurations, rows of study.num_params values (study: a trial without a configuration).
  std::vector<double> candidates(const cotune_trial& study) const;
  // Every metric its results carry for this study (ABI 1.3), or nullopt when it reports whatever
  // each job reports.
  std::optional<std::vector<std::string>> metrics(const cotune_trial& study) const;
  // Checks its options against the study (ABI 1.10); throws the plugin's error on a mismatch, does
  // nothing for an executor without the check.
  void check_study(const cotune_trial& study) const;

  // A job handle; released with the Job object.
  class Job {
   public:
    ~Job();
    Job(const Job&) = delete;
    Job& operator=(const Job&) = delete;
    TrialResult poll(int32_t timeout_ms = 0);
    void cancel();

   private:
    friend class Executor;
    Job(Executor* owner, cotune_job* job) : owner_(owner), job_(job) {}
    Executor* owner_;
    cotune_job* job_;
  };

  int32_t capacity() const;
  std::unique_ptr<Job> submit(const cotune_trial& trial);
  std::unique_ptr<Job> attach(const cotune_trial& trial, std::string_view external_id);

 private:
  ComponentRef ref_;
  const cotune_executor_api* api_ = nullptr;
  cotune_executor_instance* inst_ = nullptr;
};

// A cotune_trial with struct_size set and every string empty.
cotune_trial empty_trial();

}  // namespace cotune::core

#endif  // COTUNE_CORE_ABI_COMPONENTS_HPP_
