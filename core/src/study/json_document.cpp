#include <cotune/core/errors.hpp>
#include <cotune/core/json_document.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

namespace cotune::core {
namespace {

// Follows the parser's callbacks to know the JSON pointer of each key, and remembers the first key
// that appears twice in one object.
class DuplicateKeyFinder {
 public:
  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (event) {
      case E::object_start:
        frames_.push_back(Frame{false, {}, 0, {}});
        break;
      case E::array_start:
        frames_.push_back(Frame{true, {}, 0, {}});
        break;
      case E::key: {
        Frame& top = frames_.back();
        top.key = parsed.get<std::string>();
        if (!top.keys.insert(top.key).second && !duplicate_) duplicate_ = pointer();
        break;
      }
      case E::value:
        element_done();
        break;
      case E::object_end:
      case E::array_end:
        frames_.pop_back();
        element_done();
        break;
    }
    return true;
  }

  const std::optional<std::string>& duplicate() const { return duplicate_; }

 private:
  struct Frame {
    bool array;
    std::string key;   // current key, in an object
    size_t index;      // current element, in an array
    std::set<std::string> keys;
  };

  void element_done() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }

  std::string pointer() const {
    std::string p;
    for (const Frame& f : frames_) p += "/" + (f.array ? std::to_string(f.index) : json_pointer_token(f.key));
    return p;
  }

  std::vector<Frame> frames_;
  std::optional<std::string> duplicate_;
};

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 1, column 2: "
// prefix, since we print the position ourselves.
std::string bare_message(const nlohmann::json::parse_error& e) {
  std::string what = e.what();
  const std::string marker = "parse error";
  size_t at = what.find(marker);
  if (at == std::string::npos) return what;
  size_t colon = what.find(": ", at);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

}  // namespace

std::string json_pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

nlohmann::json parse_json_document(std::string_view text, const std::string& label) {
  DuplicateKeyFinder finder;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.begin(), text.end(), std::ref(finder));
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts from 1 and points at the offending character (or one past the end).
    size_t end = std::min(e.byte == 0 ? 0 : e.byte - 1, text.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw UserError(label + ":" + std::to_string(line) + ":" + std::to_string(column) +
                    ": not valid JSON: " + bare_message(e));
  }
  if (finder.duplicate())
    throw UserError(label + ": " + *finder.duplicate() +
                    ": this field is given twice in the same object (only one may be given)");
  return doc;
}

std::string read_text_file(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UserError("cannot read " + std::string(what) + " " + path + ": it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read " + std::string(what) + " " + path + ": " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw UserError("cannot read " + std::string(what) + " " + path + ": read error");
  return buffer.str();
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json_document(read_text_file(path, "file"), path);
}

}  // namespace cotune::core
