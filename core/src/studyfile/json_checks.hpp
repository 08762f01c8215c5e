// Checks of hand-written JSON against what a field expects, with errors of the form
//   <label>: <JSON pointer>: expected <what>, got <value>
#ifndef COTUNE_STUDYFILE_JSON_CHECKS_HPP_
#define COTUNE_STUDYFILE_JSON_CHECKS_HPP_

#include <cotune/support/likely_meant.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cotune::core {

// The pointer of a member or an element below `pointer`.
std::string child_pointer(const std::string& pointer, std::string_view key);
std::string child_pointer(const std::string& pointer, size_t index);
// A short rendering of a value for messages (long values are cut).
std::string describe_json(const nlohmann::json& value);

// The name a misspelt key most likely means (cotune/support/likely_meant.hpp, which plugins share).
using support::likely_meant;

class JsonChecker {
 public:
  explicit JsonChecker(std::string label) : label_(std::move(label)) {}

  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const;
  [[noreturn]] void expected(const std::string& pointer, std::string_view what, const nlohmann::json& got) const;

  // Fails on the first member of `object` that is not in `known`, listing the known ones (and the
  // closest one, when a typo is likely).
  void only_known(const nlohmann::json& object, const std::string& pointer,
                  const std::vector<std::string>& known) const;
  // The member `key` of `object`, or nullptr when absent.
  static const nlohmann::json* member(const nlohmann::json& object, std::string_view key);
  // The member `key`; fails with "required field missing: expected <what>" when absent.
  const nlohmann::json& required(const nlohmann::json& object, const std::string& pointer, std::string_view key,
                                 std::string_view what) const;

  void object(const nlohmann::json& v, const std::string& pointer, std::string_view what = "an object") const;
  std::string string(const nlohmann::json& v, const std::string& pointer) const;  // non-empty
  std::int64_t positive_integer(const nlohmann::json& v, const std::string& pointer) const;
  std::int64_t integer_at_least(const nlohmann::json& v, const std::string& pointer, std::int64_t least) const;
  std::uint64_t unsigned_integer(const nlohmann::json& v, const std::string& pointer) const;
  double number(const nlohmann::json& v, const std::string& pointer) const;
  double positive_number(const nlohmann::json& v, const std::string& pointer) const;

  // One of a fixed set of words.
  template <class E>
  E one_of(const nlohmann::json& v, const std::string& pointer,
           const std::vector<std::pair<std::string_view, E>>& choices) const {
    std::string list;
    for (size_t i = 0; i < choices.size(); ++i)
      list += (i ? (i + 1 == choices.size() ? " or \"" : ", \"") : "\"") + std::string(choices[i].first) + "\"";
    if (v.is_string())
      for (const auto& [word, value] : choices)
        if (v.get_ref<const std::string&>() == word) return value;
    expected(pointer, "one of " + list, v);
  }

 private:
  std::string label_;
};

}  // namespace cotune::core

#endif  // COTUNE_STUDYFILE_JSON_CHECKS_HPP_
