#include "trial_files.hpp"

#include <cotune/cotune.hpp>

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <system_error>
#include <fstream>
#include <sstream>

namespace cotune_exec {

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
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

Metrics read_result_file(const std::string& path) {
  Metrics m;
  std::ifstream in(path);
  if (!in) {
    m.error = "cannot read result file '" + path + "'";
    return m;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto doc = nlohmann::json::parse(text.str(), nullptr, false);
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
      m.error = "result file '" + path + "': field '" + it.key() + "' is not a number (" + it.value().dump() + ")";
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
  std::ifstream in(path);
  if (!in) {
    m.error = "cannot read '" + path + "'";
    return m;
  }
  std::vector<std::string> found(regexes.size());
  std::string line;
  while (std::getline(in, line)) {
    for (size_t i = 0; i < regexes.size(); ++i) {
      std::smatch match;
      if (std::regex_search(line, match, regexes[i].re) && match.size() > 1 && match[1].matched)
        found[i] = match[1].str();
    }
  }
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
  for (size_t i = 0; i < regexes.size(); ++i) {
    if (found[i].empty()) {
      m.error = "metric '" + regexes[i].name + "': /" + regexes[i].pattern + "/ matched no line of " + path;
      return m;
    }
    char* end = nullptr;
    double v = std::strtod(found[i].c_str(), &end);
    if (end == found[i].c_str() || *end != '\0' || !std::isfinite(v)) {
      m.error = "metric '" + regexes[i].name + "': captured '" + found[i] + "', which is not a number";
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

}  // namespace cotune_exec
