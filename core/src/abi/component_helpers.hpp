// What the four component wrappers share (components.cpp, space.cpp, predictor.cpp, searcher.cpp,
// executor.cpp): the SDK's string and sink helpers, the optional functions of a table older than
// this host, and the metric names a plugin lists.
#ifndef COTUNE_ABI_COMPONENT_HELPERS_HPP_
#define COTUNE_ABI_COMPONENT_HELPERS_HPP_

#include <cotune/core/errors.hpp>
#include <cotune/cotune.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace cotune::core::abi_detail {

// The SDK's helpers, which the host uses as plugins do: ABI strings as views and back, and a
// sink that collects a plugin's output.
using ::cotune::str;
using ::cotune::StringSink;
using ::cotune::view;

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
