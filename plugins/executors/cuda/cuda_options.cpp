// Parsing of the cuda executor's options (see cuda_options.hpp).
#include "cuda_options.hpp"

#include <cotune/support/likely_meant.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <stdexcept>
#include <string>

namespace cotune_cuda {
namespace {

double number(const nlohmann::json& j, const std::string& field, double low, double high) {
  const auto& v = j.at(field);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < low || v.get<double>() > high)
    throw std::invalid_argument("cuda executor options: \"" + field + "\" must be a number in [" +
                                std::to_string(low) + ", " + std::to_string(high) + "], got " + v.dump());
  return v.get<double>();
}

int integer(const nlohmann::json& j, const std::string& field, int low, int high) {
  const double v = number(j, field, low, high);
  if (v != std::floor(v))
    throw std::invalid_argument("cuda executor options: \"" + field + "\" must be an integer, got " + j.at(field).dump());
  return static_cast<int>(v);
}

}  // namespace

CudaOptions parse_cuda_options(std::string_view text) {
  CudaOptions o;
  if (text.empty()) return o;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(std::string("cuda executor options: not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument("cuda executor options: expected a JSON object, got " + j.dump());
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    if (key == "device")
      o.device = integer(j, key, 0, 1023);
    else if (key == "warmup")
      o.timing.warmup = integer(j, key, 0, 1000);
    else if (key == "repeats")
      o.timing.repeats = integer(j, key, 1, 10000);
    else if (key == "reserve_gib")
      o.reserve_bytes = number(j, key, 0, 1024) * double(1ull << 30);
    else if (key == "max_measurement_gib")
      o.limits.max_measurement_bytes = number(j, key, 1.0 / 1024, 1024) * double(1ull << 30);
    else
      throw std::invalid_argument(
          "cuda executor options: unknown field \"" + key + "\"" +
          cotune::support::did_you_mean_listed(key, "device, warmup, repeats, reserve_gib, max_measurement_gib") +
          " (expected device, warmup, repeats, reserve_gib, max_measurement_gib)");
  }
  return o;
}

}  // namespace cotune_cuda
