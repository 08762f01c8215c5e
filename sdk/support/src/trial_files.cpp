#include <cotune/support/trial_files.hpp>

#include <cotune/cotune.hpp>

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cerrno>
#include <algorithm>
#include <cmath>
#include <system_error>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cotune::support {

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

void make_directories(const std::string& dir) {
  if (dir.empty()) throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "empty directory name");
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "cannot create directory '" + part + "': " + std::generic_category().message(errno));
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "'" + dir + "' is not a directory");
}

void write_trial_file(const std::string& path, const cotune_trial& trial, const FormattedParams& params) {
  nlohmann::ordered_json doc;
  doc["trial_id"] = std::string(cotune::view(trial.trial_id));
  nlohmann::ordered_json p = nlohmann::ordered_json::object();
  for (const auto& [name, value] : params) p[name] = value;
  doc["params"] = std::move(p);
  std::string_view config = cotune::view(trial.config_json);
  doc["config"] = config.empty() ? nlohmann::ordered_json::object()
                                 : nlohmann::ordered_json::parse(config.begin(), config.end(), nullptr, false);
  if (doc["config"].is_discarded())
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "trial config_json is not valid JSON");
  doc["launch_args"] = std::string(cotune::view(trial.launch_args));
  std::string_view workload = cotune::view(trial.workload_json);
  auto w = workload.empty() ? nlohmann::ordered_json(nullptr)
                            : nlohmann::ordered_json::parse(workload.begin(), workload.end(), nullptr, false);
  doc["workload"] = w.is_discarded() ? nlohmann::ordered_json(nullptr) : w;
  std::ofstream out(path, std::ios::trunc);
  out << doc.dump(2) << "\n";
  if (!out) throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "cannot write trial file '" + path + "'");
}

namespace {

// A value for a message: at most 80 characters of it.
std::string shown(const std::string& text) { return text.size() <= 80 ? text : text.substr(0, 77) + "..."; }

// Whether `path` names a regular file (not a FIFO, a device or a folder, which would block or fail
// mid-read), with its size.
bool regular_file(const std::string& path, size_t* size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  *size = static_cast<size_t>(st.st_size);
  return true;
}

}  // namespace

int json_depth(const std::string& text) {
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

boost::regex compile_metric_regex(const std::string& pattern) {
  boost::regex re;
  try {
    re = boost::regex(pattern, boost::regex::perl);
  } catch (const boost::regex_error& e) {
    throw std::invalid_argument(std::string("a valid regular expression (") + e.what() + ")");
  }
  if (re.mark_count() < 1) throw std::invalid_argument("a regular expression with a capture group for the number");
  return re;
}

Metrics read_result_file(const std::string& path) {
  Metrics m;
  size_t size = 0;
  if (!regular_file(path, &size)) {
    m.error = "result file '" + path + "' is missing or not a regular file";
    return m;
  }
  if (size > kMaxResultBytes) {
    m.error = "result file '" + path + "' is " + std::to_string(size) + " bytes; at most " +
              std::to_string(kMaxResultBytes) + " are read (it holds a JSON object of numbers)";
    return m;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    m.error = "cannot read result file '" + path + "'";
    return m;
  }
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(in.gcount()));
  if (json_depth(text) > kMaxJsonDepth) {
    m.error = "result file '" + path + "' is nested deeper than " + std::to_string(kMaxJsonDepth) +
              " levels (it holds a JSON object of numbers)";
    return m;
  }
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    m.error = "result file '" + path + "' is not a JSON object";
    return m;
  }
  if (doc.empty()) {
    m.error = "result file '" + path + "' holds no metrics";
    return m;
  }
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (!it.value().is_number() || !std::isfinite(it.value().get<double>())) {
      m.error = "result file '" + path + "': field '" + shown(it.key()) + "' is not a number (" +
                shown(it.value().dump()) + ")";
      return m;
    }
    metrics[it.key()] = it.value().get<double>();
  }
  m.ok = true;
  m.json = metrics.dump();
  return m;
}

Metrics metrics_from_regex(const std::string& path, const std::vector<MetricRegex>& regexes) {
  Metrics m;
  size_t size = 0;
  std::ifstream in;
  if (regular_file(path, &size)) in.open(path, std::ios::binary);
  if (!in) {
    m.error = "cannot read '" + path + "' (missing or not a regular file)";
    return m;
  }
  std::vector<std::string> found(regexes.size());
  std::string line;
  size_t number = 0;
  while (in) {
    // One line, cut at kMaxLineBytes (the rest of a longer one is skipped).
    line.clear();
    int ch = 0;
    while ((ch = in.get()) != EOF && ch != '\n')
      if (line.size() < kMaxLineBytes) line.push_back(static_cast<char>(ch));
    if (ch == EOF && line.empty()) break;
    ++number;
    for (size_t i = 0; i < regexes.size(); ++i) {
      boost::smatch match;
      try {
        if (boost::regex_search(line, match, regexes[i].re) && match.size() > 1 && match[1].matched)
          found[i] = match[1].str();
      } catch (const std::runtime_error&) {
        m.error = "metric '" + regexes[i].name + "': /" + shown(regexes[i].pattern) + "/ is too complex to match line " +
                  std::to_string(number) + " of " + path;
        return m;
      }
    }
  }
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
  for (size_t i = 0; i < regexes.size(); ++i) {
    if (found[i].empty()) {
      m.error = "metric '" + regexes[i].name + "': /" + shown(regexes[i].pattern) + "/ matched no line of " + path;
      return m;
    }
    char* end = nullptr;
    double v = std::strtod(found[i].c_str(), &end);
    if (end == found[i].c_str() || *end != '\0' || !std::isfinite(v)) {
      m.error = "metric '" + regexes[i].name + "': captured '" + shown(found[i]) + "', which is not a number";
      return m;
    }
    metrics[regexes[i].name] = v;
  }
  m.ok = true;
  m.json = metrics.dump();
  return m;
}

std::string tail_lines(const std::string& path, int lines, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in || lines <= 0) return "";
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  std::streamoff start = size > static_cast<std::streamoff>(max_bytes) ? size - static_cast<std::streamoff>(max_bytes) : 0;
  in.seekg(start);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\n') text.pop_back();
  size_t pos = text.size();
  for (int n = 0; n < lines; ++n) {
    size_t nl = pos == 0 ? std::string::npos : text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;  // fewer lines than asked: all of them
    pos = nl;
  }
  return text.substr(pos + 1);
}

}  // namespace cotune::support
