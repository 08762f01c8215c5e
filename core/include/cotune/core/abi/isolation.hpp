// "isolation": "process": a plugin component whose every instance runs in a child process of its
// own (the cotune executable, started as `cotune __plugin-host`), behind the same C ABI. The host
// calls a table of the component's kind whose functions forward each call over a socket; a plugin
// that aborts, segfaults or exits in a call becomes an error object naming it, the call and the
// signal, so the study stops cleanly (or fails the trial) instead of dying with it.
#ifndef COTUNE_CORE_ABI_ISOLATION_HPP_
#define COTUNE_CORE_ABI_ISOLATION_HPP_

#include <cotune/core/abi/components.hpp>
#include <cotune/cotune.h>

#include <memory>
#include <string>
#include <string_view>

namespace cotune::core {

enum class Isolation { kNone, kProcess };
std::string_view to_string(Isolation i);  // "none", "process"

// The forwarding table of one component. The wrappers (components.hpp) call api() in place of the
// plugin's table and create_*() in place of its create.
class IsolatedComponent {
 public:
  explicit IsolatedComponent(const ComponentRef& real);
  ~IsolatedComponent();
  IsolatedComponent(const IsolatedComponent&) = delete;
  IsolatedComponent& operator=(const IsolatedComponent&) = delete;

  const void* api() const;  // a cotune_space_api, _predictor_api, ... like the plugin's own

  cotune_error* create_space(cotune_str workload_json, cotune_str options_json, cotune_space_instance** out) const;
  cotune_error* create_predictor(cotune_str options_json, cotune_predictor_instance** out) const;
  cotune_error* create_searcher(cotune_str options_json, const cotune_param* const* params, size_t num_params,
                                uint64_t seed, cotune_searcher_instance** out) const;
  cotune_error* create_executor(cotune_str options_json, cotune_executor_instance** out) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// `ref` with its calls run in child processes (ComponentRef::isolated set).
ComponentRef isolate(const ComponentRef& ref);

// The child's side (`cotune __plugin-host`): loads `library`, serves the component `component_id`
// on the connected socket `fd` until the host closes it, then destroys the instance. Returns the
// process's exit status.
int serve_isolated_component(int fd, const std::string& library, const std::string& component_id);

}  // namespace cotune::core

#endif  // COTUNE_CORE_ABI_ISOLATION_HPP_
