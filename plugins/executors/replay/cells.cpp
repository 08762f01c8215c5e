#include "cells.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace cotune_replay {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<double> parse_number(std::string_view cell) {
  const std::string t(trim(cell));
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<bool> parse_bool(std::string_view cell) {
  std::string t(trim(cell));
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "true" || t == "1" || t == "yes") return true;
  if (t == "false" || t == "0" || t == "no") return false;
  return std::nullopt;
}

std::string number_key(double v) {
  if (v == 0) v = 0;  // -0 and 0 are one value
  // The shortest of %.15g, %.16g, %.17g that reads back as the same double.
  char buf[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string name_key(std::string_view text) {
  std::string k(trim(text));
  for (char& c : k) c = c == '_' || c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return k;
}

std::string canonical(std::string_view cell) {
  if (std::optional<double> v = parse_number(cell)) return number_key(*v);
  if (std::optional<bool> b = parse_bool(cell)) return *b ? "true" : "false";
  return name_key(trim(cell));
}

bool cell_matches(std::string_view cell, const nlohmann::json& value) {
  if (value.is_array()) return std::any_of(value.begin(), value.end(), [&](const nlohmann::json& v) { return cell_matches(cell, v); });
  if (value.is_boolean()) {
    std::optional<bool> b = parse_bool(cell);
    return b && *b == value.get<bool>();
  }
  if (value.is_number()) {
    std::optional<double> v = parse_number(cell);
    return v && *v == value.get<double>();
  }
  if (value.is_string()) return name_key(trim(cell)) == name_key(value.get_ref<const std::string&>());
  return false;
}

std::string cell_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number()) return number_key(value.get<double>());
  return value.dump();
}

void collect_fields(const nlohmann::json& obj, std::map<std::string, std::optional<nlohmann::json>>& out) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const nlohmann::json& v = it.value();
    if (v.is_object()) {
      collect_fields(v, out);
    } else if (v.is_string() || v.is_number() || v.is_boolean()) {
      auto [slot, fresh] = out.emplace(it.key(), v);
      if (!fresh && slot->second && !(*slot->second == v)) slot->second = std::nullopt;
    }
  }
}

}  // namespace cotune_replay
