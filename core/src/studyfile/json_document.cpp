#include <cotune/core/errors.hpp>
#include <cotune/core/studyfile/json_document.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <vector>

namespace cotune::core {
namespace {

constexpr size_t kMaxJsonDepth = 64;
constexpr std::uintmax_t kMaxDocumentBytes = 16u << 20;  // 16 MiB: far beyond any study or workload

// Follows the parser's callbacks to know the JSON pointer of each key, and remembers the first key
// that appears twice in one object.
class DuplicateKeyFinder {
 public:
  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        // Hand-written documents are shallow; a deep one is an accident or an attack, and what reads
        // it afterwards (hashing, checks) recurses.
        if (frames_.size() >= kMaxJsonDepth) throw TooDeep();
        frames_.push_back(Frame{event == E::array_start, {}, 0, {}});
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

  struct TooDeep {};
  const std::optional<std::string>& duplicate() const { return duplicate_; }
  // The pointer of the place where the nesting passed the limit (its first levels).
  std::string deep_place() const {
    std::string p = pointer();
    return p.size() > 80 ? p.substr(0, 80) + "..." : p;
  }

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

// "line:column" of byte `end` (0-based) of `text`.
std::string position(std::string_view text, size_t end) {
  end = std::min(end, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

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
    throw UserError(label + ":" + position(text, e.byte == 0 ? 0 : e.byte - 1) + ": not valid JSON: " + bare_message(e));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond a double ("number overflow parsing '1e400'"): the parser gives no position,
    // so look for the number's text.
    std::string what = e.what();
    size_t open = what.find('\''), close = what.rfind('\'');
    std::string number = open != std::string::npos && close > open ? what.substr(open + 1, close - open - 1) : "";
    size_t at = number.empty() ? std::string_view::npos : text.find(number);
    throw UserError(label + (at == std::string_view::npos ? "" : ":" + position(text, at)) + ": not valid JSON: the number " +
                    (number.empty() ? std::string("given") : number) + " is too large (beyond a double)");
  } catch (const DuplicateKeyFinder::TooDeep&) {
    throw UserError(label + ": " + finder.deep_place() + ": nested more than " + std::to_string(kMaxJsonDepth) +
                    " levels deep (arrays and objects); a study or workload needs a handful");
  }
  if (finder.duplicate())
    throw UserError(label + ": " + *finder.duplicate() +
                    ": this field is given twice in the same object (only one may be given)");
  return doc;
}

int json_nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return deepest;
}

std::string read_text_file(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UserError("cannot read " + std::string(what) + " " + path + ": it is a directory");
  // A FIFO would block the open until some writer came; a device never ends.
  const auto type = std::filesystem::status(path, ec).type();
  if (!ec && type != std::filesystem::file_type::regular)
    throw UserError("cannot read " + std::string(what) + " " + path + ": not a regular file");
  auto too_large = [&](const std::string& size) {
    return UserError("cannot read " + std::string(what) + " " + path + ": it is " + size + "; at most " +
                     std::to_string(kMaxDocumentBytes >> 20) + " MiB is read (is it the right file?)");
  };
  // Refused before reading: a (sparse) file of gigabytes must not be loaded to be rejected.
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxDocumentBytes) throw too_large(std::to_string(size) + " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot read " + std::string(what) + " " + path + ": " + std::generic_category().message(errno));
  // Read in chunks up to the limit: a pipe or a device has no size to check beforehand.
  std::string text;
  char chunk[65536];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxDocumentBytes) throw too_large("larger than that");
  }
  if (in.bad()) throw UserError("cannot read " + std::string(what) + " " + path + ": read error");
  return text;
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json_document(read_text_file(path, "file"), path);
}

}  // namespace cotune::core
