// The cotune_host table: what the host offers every plugin (logging, errors, JSON, the performance
// model). Every entry catches everything: no exception crosses back into a plugin.
#include <cotune/core/errors.hpp>
#include <cotune/core/abi/log.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>

#include <nlohmann/json.hpp>

#include <cstring>
#include <new>
#include <string>

namespace cotune::core {
namespace {

struct HostError {
  cotune_error err;
  std::string message;
};

void destroy_error(cotune_error* err) {
  // err is the first member of HostError, so the cast recovers the allocation.
  delete reinterpret_cast<HostError*>(err);
}

cotune_error* error_new(int32_t code, cotune_str message) {
  // Never returns NULL: on allocation failure, a static error stands in (its destroy does nothing).
  static cotune_error out_of_memory{COTUNE_STRUCT_SIZE(cotune_error, destroy), COTUNE_ERR_RESOURCE_EXHAUSTED,
                                    {"out of memory", 13}, [](cotune_error*) {}};
  try {
    auto* e = new HostError();
    e->message.assign(message.data ? message.data : "", message.data ? message.len : 0);
    e->err.struct_size = COTUNE_STRUCT_SIZE(cotune_error, destroy);
    e->err.code = code;
    e->err.message = {e->message.data(), e->message.size()};
    e->err.destroy = &destroy_error;
    return &e->err;
  } catch (...) {
    return &out_of_memory;
  }
}

cotune_error* error_from_exception() {
  try {
    throw;
  } catch (const UserError& e) {
    return error_new(COTUNE_ERR_INVALID_ARGUMENT, {e.what(), std::strlen(e.what())});
  } catch (const nlohmann::json::exception& e) {
    return error_new(COTUNE_ERR_INVALID_ARGUMENT, {e.what(), std::strlen(e.what())});
  } catch (const std::bad_alloc&) {
    return error_new(COTUNE_ERR_RESOURCE_EXHAUSTED, {"out of memory", 13});
  } catch (const std::exception& e) {
    return error_new(COTUNE_ERR_INTERNAL, {e.what(), std::strlen(e.what())});
  } catch (...) {
    return error_new(COTUNE_ERR_INTERNAL, {"unknown exception", 17});
  }
}

std::string_view sv(cotune_str s) { return s.data ? std::string_view(s.data, s.len) : std::string_view(); }

void host_log(int32_t level, cotune_str component, cotune_str message) {
  try {
    log(level, sv(component), sv(message));
  } catch (...) {
    // Logging must never fail the caller.
  }
}

// Looks up `pointer` in `json`; nullptr when absent.
const nlohmann::json* lookup(const nlohmann::json& doc, cotune_str pointer) {
  nlohmann::json::json_pointer p{std::string(sv(pointer))};
  if (!doc.contains(p)) return nullptr;
  return &doc.at(p);
}

cotune_error* json_get_number(cotune_str json, cotune_str pointer, double* out) {
  try {
    const auto doc = nlohmann::json::parse(sv(json));
    const nlohmann::json* v = lookup(doc, pointer);
    if (v == nullptr) {
      const std::string m = "no value at " + std::string(sv(pointer));
      return error_new(COTUNE_ERR_NOT_FOUND, {m.data(), m.size()});
    }
    if (!v->is_number()) {
      const std::string m = std::string(sv(pointer)) + ": expected a number, got " + v->dump();
      return error_new(COTUNE_ERR_INVALID_ARGUMENT, {m.data(), m.size()});
    }
    *out = v->get<double>();
    return nullptr;
  } catch (...) {
    return error_from_exception();
  }
}

cotune_error* json_get_string(cotune_str json, cotune_str pointer, const cotune_sink* out) {
  try {
    const auto doc = nlohmann::json::parse(sv(json));
    const nlohmann::json* v = lookup(doc, pointer);
    if (v == nullptr) {
      const std::string m = "no value at " + std::string(sv(pointer));
      return error_new(COTUNE_ERR_NOT_FOUND, {m.data(), m.size()});
    }
    if (!v->is_string()) {
      const std::string m = std::string(sv(pointer)) + ": expected a string, got " + v->dump();
      return error_new(COTUNE_ERR_INVALID_ARGUMENT, {m.data(), m.size()});
    }
    const std::string& s = v->get_ref<const std::string&>();
    if (out == nullptr || out->write == nullptr || out->write(out->ctx, s.data(), s.size()) != 0)
      return error_new(COTUNE_ERR_RESOURCE_EXHAUSTED, {"output sink refused the string", 30});
    return nullptr;
  } catch (...) {
    return error_from_exception();
  }
}

cotune_error* resolve_hardware(cotune_str cluster_json, cotune_hardware* out) {
  try {
    if (out == nullptr) return error_new(COTUNE_ERR_INVALID_ARGUMENT, {"out is NULL", 11});
    perf::resolve_hardware(nlohmann::json::parse(sv(cluster_json)), out);
    return nullptr;
  } catch (...) {
    return error_from_exception();
  }
}

cotune_error* simulate_trace(const cotune_trace* trace, cotune_sim_result* out) {
  try {
    if (trace == nullptr || out == nullptr) return error_new(COTUNE_ERR_INVALID_ARGUMENT, {"trace or out is NULL", 20});
    perf::simulate(*trace, out);
    return nullptr;
  } catch (...) {
    return error_from_exception();
  }
}

}  // namespace

const cotune_host* host_services() {
  static const cotune_host table = [] {
    cotune_host h{};
    h.struct_size = COTUNE_STRUCT_SIZE(cotune_host, simulate_trace);
    h.abi_major = COTUNE_ABI_MAJOR;
    h.abi_minor = COTUNE_ABI_MINOR;
    h.host_version = {COTUNE_VERSION, sizeof(COTUNE_VERSION) - 1};
    h.log = &host_log;
    h.error_new = &error_new;
    h.json_get_number = &json_get_number;
    h.json_get_string = &json_get_string;
    h.resolve_hardware = &resolve_hardware;
    h.simulate_trace = &simulate_trace;
    return h;
  }();
  return &table;
}

}  // namespace cotune::core
