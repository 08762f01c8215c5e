#include "studyfile/json_checks.hpp"

#include <cotune/core/errors.hpp>
#include <cotune/core/studyfile/json_document.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

namespace cotune::core {
namespace {

// An integer (not 3.0: hand-written floats are not counts) that fits in int64.
bool fits_int64(const nlohmann::json& v) {
  return v.is_number_integer() &&
         (!v.is_number_unsigned() || v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX));
}

}  // namespace

std::string child_pointer(const std::string& pointer, std::string_view key) {
  return pointer + "/" + json_pointer_token(key);
}

std::string child_pointer(const std::string& pointer, size_t index) { return pointer + "/" + std::to_string(index); }

std::string describe_json(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  constexpr size_t kMax = 60;
  if (text.size() > kMax) {
    text.resize(kMax);
    text += "...";
  }
  return text;
}

void JsonChecker::fail(const std::string& pointer, const std::string& message) const {
  throw UserError(label_ + ": " + (pointer.empty() ? std::string() : pointer + ": ") + message);
}

void JsonChecker::expected(const std::string& pointer, std::string_view what, const nlohmann::json& got) const {
  fail(pointer, "expected " + std::string(what) + ", got " + describe_json(got));
}

void JsonChecker::only_known(const nlohmann::json& object, const std::string& pointer,
                             const std::vector<std::string>& known) const {
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string& key = it.key();
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    const std::string closest = likely_meant(key, known);
    std::string hint = closest.empty() ? "" : " (did you mean \"" + closest + "\"?)";
    fail(child_pointer(pointer, key), "unknown field" + hint + "; known fields here: " + list);
  }
}

const nlohmann::json* JsonChecker::member(const nlohmann::json& object, std::string_view key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const nlohmann::json& JsonChecker::required(const nlohmann::json& object, const std::string& pointer,
                                            std::string_view key, std::string_view what) const {
  const nlohmann::json* v = member(object, key);
  if (!v) fail(child_pointer(pointer, key), "required field missing: expected " + std::string(what));
  return *v;
}

void JsonChecker::object(const nlohmann::json& v, const std::string& pointer, std::string_view what) const {
  if (!v.is_object()) expected(pointer, what, v);
}

std::string JsonChecker::string(const nlohmann::json& v, const std::string& pointer) const {
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) expected(pointer, "a non-empty string", v);
  return v.get<std::string>();
}

std::int64_t JsonChecker::positive_integer(const nlohmann::json& v, const std::string& pointer) const {
  if (!fits_int64(v) || v.get<std::int64_t>() <= 0) expected(pointer, "a positive integer", v);
  return v.get<std::int64_t>();
}

std::int64_t JsonChecker::integer_at_least(const nlohmann::json& v, const std::string& pointer,
                                           std::int64_t least) const {
  if (!fits_int64(v) || v.get<std::int64_t>() < least) expected(pointer, "an integer >= " + std::to_string(least), v);
  return v.get<std::int64_t>();
}

std::uint64_t JsonChecker::unsigned_integer(const nlohmann::json& v, const std::string& pointer) const {
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0))
    expected(pointer, "a non-negative integer", v);
  return v.get<std::uint64_t>();
}

double JsonChecker::number(const nlohmann::json& v, const std::string& pointer) const {
  if (!v.is_number() || !std::isfinite(v.get<double>())) expected(pointer, "a number", v);
  return v.get<double>();
}

double JsonChecker::positive_number(const nlohmann::json& v, const std::string& pointer) const {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
    expected(pointer, "a positive number", v);
  return v.get<double>();
}

}  // namespace cotune::core
