// Reading JSON documents that people write by hand (study files, workloads): errors give the file,
// line and column, and a key given twice in one object is an error rather than "the last one wins".
#ifndef COTUNE_CORE_STUDYFILE_JSON_DOCUMENT_HPP_
#define COTUNE_CORE_STUDYFILE_JSON_DOCUMENT_HPP_

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace cotune::core {

// Parses `text`; `label` (usually the file name) starts every error message. Throws UserError:
//   "study.json:3:14: not valid JSON: syntax error while parsing object - unexpected '}'"
//   "study.json: /budget/trials: this field is given twice"
nlohmann::json parse_json_document(std::string_view text, const std::string& label);

// Reads and parses a file (UserError when it cannot be read).
nlohmann::json read_json_file(const std::string& path);

// Reads a whole file as bytes (UserError naming the file when it cannot be read).
std::string read_text_file(const std::string& path, std::string_view what = "file");

// The deepest nesting of arrays and objects in JSON text, counted without parsing (what is inside
// strings does not count): what comes from outside is checked against kMaxJsonNesting before it is
// parsed, since reading a deep document back (dump, compare, destroy) recurses.
int json_nesting_depth(std::string_view text);
inline constexpr int kMaxJsonNesting = 64;

// A JSON pointer token for an object key ('~' -> "~0", '/' -> "~1").
std::string json_pointer_token(std::string_view key);

}  // namespace cotune::core

#endif  // COTUNE_CORE_STUDYFILE_JSON_DOCUMENT_HPP_
