#include "mlp_options.hpp"

#include <cotune/cotune.hpp>
#include <cotune/support/likely_meant.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

namespace cotune_mlp {
namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "mlp options: " + what);
}

size_t integer_in(const nlohmann::json& v, const std::string& key, long long low, long long high) {
  if (!v.is_number_integer() || v.get<long long>() < low || v.get<long long>() > high)
    invalid("'" + key + "' is " + v.dump() + "; expected an integer in [" + std::to_string(low) + ", " +
            std::to_string(high) + "]");
  return static_cast<size_t>(v.get<long long>());
}

double number_in(const nlohmann::json& v, const std::string& key, double low, double high, bool open_low) {
  const bool ok = v.is_number() && std::isfinite(v.get<double>()) &&
                  (open_low ? v.get<double>() > low : v.get<double>() >= low) && v.get<double>() <= high;
  if (!ok)
    invalid("'" + key + "' is " + v.dump() + "; expected a number in " + (open_low ? "(" : "[") +
            std::to_string(low) + ", " + std::to_string(high) + "]");
  return v.get<double>();
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
    if (key == "hidden") {
      if (!value.is_array() || value.size() < 2 || value.size() > 3)
        invalid("'hidden' is " + value.dump() + "; expected 2 or 3 layer sizes, e.g. [64, 64]");
      o.hidden.clear();
      for (const auto& h : value) o.hidden.push_back(static_cast<long>(integer_in(h, "hidden", 1, 4096)));
    } else if (key == "ensemble") {
      o.ensemble = integer_in(value, key, 1, 64);
    } else if (key == "max_epochs") {
      o.max_epochs = integer_in(value, key, 1, 100000);
    } else if (key == "patience") {
      o.patience = integer_in(value, key, 1, 100000);
    } else if (key == "validation_fraction") {
      o.validation_fraction = number_in(value, key, 0.0, 0.5, true);
    } else if (key == "batch_size") {
      o.batch_size = integer_in(value, key, 1, 65536);
    } else if (key == "learning_rate") {
      o.learning_rate = number_in(value, key, 0.0, 1.0, true);
    } else if (key == "weight_decay") {
      o.weight_decay = number_in(value, key, 0.0, 1.0, false);
    } else if (key == "seed") {
      if (!value.is_number_integer() || value.get<long long>() < 0)
        invalid("'seed' is " + value.dump() + "; expected an integer >= 0");
      o.seed = value.get<uint64_t>();
    } else if (key == "log") {
      if (!value.is_boolean()) invalid("'log' is " + value.dump() + "; expected true or false");
      o.log_target = value.get<bool>();
    } else {
      constexpr const char* kKnown =
          "hidden, ensemble, max_epochs, patience, validation_fraction, batch_size, learning_rate, weight_decay, seed, "
          "log";
      invalid("unknown option '" + key + "'" + cotune::support::did_you_mean_listed(key, kKnown) + "; expected one of " +
              kKnown);
    }
  }
  return o;
}

}  // namespace cotune_mlp
