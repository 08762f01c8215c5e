#include <cotune/core/studyfile/canonical_json.hpp>

#include <openssl/evp.h>

#include <cmath>
#include <stdexcept>

namespace cotune::core {
namespace {

// Largest magnitude below which every integer is exactly representable as a double.
constexpr double kExactIntegerLimit = 9007199254740992.0;  // 2^53

nlohmann::json normalized(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::object: {
      nlohmann::json out = nlohmann::json::object();  // std::map: keys come out sorted
      for (auto it = v.begin(); it != v.end(); ++it) out[it.key()] = normalized(it.value());
      return out;
    }
    case nlohmann::json::value_t::array: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& e : v) out.push_back(normalized(e));
      return out;
    }
    case nlohmann::json::value_t::number_float: {
      double d = v.get<double>();
      if (std::isfinite(d) && std::trunc(d) == d && std::fabs(d) <= kExactIntegerLimit)
        return nlohmann::json(static_cast<std::int64_t>(d));
      return v;
    }
    case nlohmann::json::value_t::number_unsigned: {
      // 5 parsed as unsigned and 5 built as int64 must print alike; they already do, but keep the
      // signed form where it fits so that equality checks on the normalized tree agree too.
      auto u = v.get<std::uint64_t>();
      if (u <= static_cast<std::uint64_t>(INT64_MAX)) return nlohmann::json(static_cast<std::int64_t>(u));
      return v;
    }
    default:
      return v;
  }
}

}  // namespace

std::string canonical_json(const nlohmann::json& value) {
  // Invalid UTF-8 in strings is replaced rather than thrown on: a key must always be computable.
  return normalized(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed (OpenSSL EVP_Digest)");
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(size_t{2} * length);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 0xF]);
  }
  return out;
}

std::string config_key(const nlohmann::json& config) { return canonical_json(config); }

std::string workload_key(const nlohmann::json& workload, std::string_view space_name) {
  // A calibration changes the model's constants, not what runs: runs of the same workload share a
  // key with and without one.
  std::string material;
  if (workload.is_object() && workload.contains("cluster") && workload["cluster"].is_object() &&
      workload["cluster"].contains("calibration")) {
    nlohmann::json w = workload;
    w["cluster"].erase("calibration");
    material = canonical_json(w);
  } else {
    material = canonical_json(workload);
  }
  material += '\n';
  material += space_name;
  return sha256_hex(material);
}

}  // namespace cotune::core
