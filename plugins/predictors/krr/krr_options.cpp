#include "krr_options.hpp"

#include <cotune/cotune.hpp>
#include <cotune/support/likely_meant.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

namespace cotune_krr {
namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "krr options: " + what);
}

double positive_number(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
    invalid("'" + key + "' is " + v.dump() + "; expected a number > 0");
  return v.get<double>();
}

size_t count_at_least(const nlohmann::json& v, const std::string& key, size_t low) {
  if (!v.is_number_integer() || v.get<long long>() < static_cast<long long>(low))
    invalid("'" + key + "' is " + v.dump() + "; expected an integer >= " + std::to_string(low));
  return static_cast<size_t>(v.get<long long>());
}

}  // namespace

Options parse_options(std::string_view json) {
  Options o;
  if (json.empty()) return o;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    invalid(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) invalid("expected a JSON object, got " + j.dump());
  for (const auto& [key, value] : j.items()) {
    if (key == "log") {
      if (!value.is_boolean()) invalid("'log' is " + value.dump() + "; expected true or false");
      o.log_target = value.get<bool>();
    } else if (key == "log_features") {
      if (!value.is_boolean()) invalid("'log_features' is " + value.dump() + "; expected true or false");
      o.log_features = value.get<bool>();
    } else if (key == "gamma") {
      o.gamma = positive_number(value, key);
    } else if (key == "lambda") {
      o.lambda = positive_number(value, key);
    } else if (key == "search_size") {
      o.search_size = count_at_least(value, key, 2);
    } else if (key == "max_basis") {
      o.max_basis = count_at_least(value, key, 2);
    } else if (key == "seed") {
      if (!value.is_number_integer() || value.get<long long>() < 0)
        invalid("'seed' is " + value.dump() + "; expected an integer >= 0");
      o.seed = value.get<uint64_t>();
    } else {
      constexpr const char* kKnown = "log, log_features, gamma, lambda, search_size, max_basis, seed";
      invalid("unknown option '" + key + "'" + cotune::support::did_you_mean_listed(key, kKnown) + "; expected one of " +
              kKnown);
    }
  }
  return o;
}

}  // namespace cotune_krr
