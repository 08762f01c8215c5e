// What the four component wrappers share (components.cpp, space.cpp, predictor.cpp, searcher.cpp,
// executor.cpp): string views of ABI strings, a sink that collects a plugin's output, and the
// optional functions of a table older than this host, the metric names a plugin lists.
#ifndef COTUNE_ABI_COMPONENT_HELPERS_HPP_
#define COTUNE_ABI_COMPONENT_HELPERS_HPP_

#include <cotune/core/errors.hpp>
#include <cotune/cotune.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace cotune::core::abi_detail {

inline std::string_view sv(cotune_str s) { return s.data ? std::string_view(s.data, s.len) : std::string_view(); }
inline cotune_str cs(std::string_view s) { return {s.data(), s.size()}; }

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

inline std::string format_number(double v) {
  if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

// A plugin's list of metric names (a JSON array of strings), or a PluginError naming it.
inline std::vector<std::string> metric_names(const std::string& text, const std::string& who) {
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

}  // namespace cotune::core::abi_detail

#endif  // COTUNE_ABI_COMPONENT_HELPERS_HPP_
