#include "agent/config_values.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace cotune::core::agent {
namespace {
[[noreturn]] void refuse(const Param& p, const std::string& what) {
  throw std::invalid_argument("parameter '" + p.name + "': " + what);
}

double value_of(const Param& p, const nlohmann::json& v) {
  switch (p.type) {
    case COTUNE_PARAM_BOOL:
      if (!v.is_boolean()) refuse(p, "expected true or false");
      return v.get<bool>() ? 1.0 : 0.0;
    case COTUNE_PARAM_CATEGORICAL: {
      if (!v.is_string()) refuse(p, "expected one of its choices as a string");
      const std::string s = v.get<std::string>();
      for (size_t i = 0; i < p.choices.size(); ++i)
        if (p.choices[i] == s) return static_cast<double>(i);
      refuse(p, "'" + s + "' is not one of its choices");
    }
    case COTUNE_PARAM_INT: {
      if (!v.is_number()) refuse(p, "expected an integer");
      const double d = v.get<double>();
      if (!std::isfinite(d) || d != std::floor(d)) refuse(p, "expected an integer, got " + v.dump());
      return d;
    }
    case COTUNE_PARAM_FLOAT: {
      if (!v.is_number()) refuse(p, "expected a number");
      const double d = v.get<double>();
      if (!std::isfinite(d)) refuse(p, "expected a finite number");
      return d;
    }
    default:
      refuse(p, "has an unknown type " + std::to_string(p.type));
  }
}
}  // namespace

std::vector<double> config_from_values(const std::vector<Param>& params, const nlohmann::json& values) {
  if (!values.is_object()) throw std::invalid_argument("'config' must be an object of parameter values");
  for (const auto& item : values.items()) {
    bool known = false;
    for (const Param& p : params) known = known || p.name == item.key();
    if (!known) throw std::invalid_argument("'config' names unknown parameter '" + item.key() + "'");
  }
  std::vector<double> config;
  config.reserve(params.size());
  for (const Param& p : params) {
    auto it = values.find(p.name);
    if (it == values.end()) refuse(p, "missing from 'config'");
    const double d = value_of(p, *it);
    if (!p.contains(d)) refuse(p, "value " + it->dump() + " is outside its domain");
    config.push_back(d);
  }
  return config;
}

}  // namespace cotune::core::agent
