#include "process_options.hpp"

#include <cotune/cotune.hpp>
#include <cotune/support/likely_meant.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

namespace cotune_process {
namespace {

using nlohmann::json;

[[noreturn]] void invalid(const std::string& field, const std::string& expected) {
  throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "process executor options: '" + field + "': expected " + expected);
}

std::vector<std::string> string_list(const json& v, const std::string& field) {
  if (!v.is_array()) invalid(field, "an array of strings");
  std::vector<std::string> out;
  for (const json& s : v) {
    if (!s.is_string()) invalid(field, "an array of strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

double number(const json& v, const std::string& field, double low, double high) {
  if (!v.is_number() || v.get<double>() < low || v.get<double>() > high)
    invalid(field, "a number in [" + json(low).dump() + ", " + json(high).dump() + "]");
  return v.get<double>();
}

int integer(const json& v, const std::string& field, int low, int high) {
  if (!v.is_number_integer() || v.get<long long>() < low || v.get<long long>() > high)
    invalid(field, "an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  return v.get<int>();
}

bool env_name_ok(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool device_ok(const std::string& d) {
  return !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; });
}

}  // namespace

int ProcessOptions::capacity() const {
  if (gpus.empty()) return parallel;
  return std::max(1, std::min<int>(parallel, static_cast<int>(gpus.size()) / gpus_per_trial));
}

ProcessOptions parse_process_options(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "process executor options: expected a JSON object");
  static const std::set<std::string> known = {"command", "parallel", "timeout_s", "kill_grace_s", "result_file",
                                              "metrics_regex", "gpus", "gpus_per_trial", "env", "workdir",
                                              "log_tail_lines", "oom_patterns"};
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (!known.count(it.key()))
      invalid(it.key(), "no such option" +
                            cotune::support::did_you_mean(it.key(), std::vector<std::string>(known.begin(), known.end())) +
                            " (known: command, parallel, timeout_s, kill_grace_s, result_file, metrics_regex, gpus, "
                            "gpus_per_trial, env, workdir, log_tail_lines, oom_patterns)");
  ProcessOptions o;
  if (!doc.contains("command")) invalid("command", "the command to run, as an array of strings");
  std::vector<std::string> argv = string_list(doc["command"], "command");
  // A relative program path ("./train.sh") names a file from where cotune runs, as the replay
  // executor's table does; each trial runs in its own directory, so it is made absolute here.
  if (!argv.empty() && argv[0].find('/') != std::string::npos && argv[0][0] != '/' &&
      argv[0].find('{') == std::string::npos) {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(argv[0], ec);
    if (!ec) argv[0] = absolute.lexically_normal().string();
  }
  o.command = CommandTemplate(argv, "command");
  if (doc.contains("parallel")) o.parallel = integer(doc["parallel"], "parallel", 1, 4096);
  if (doc.contains("timeout_s")) o.timeout_s = number(doc["timeout_s"], "timeout_s", 0, 1e9);
  if (doc.contains("kill_grace_s")) o.kill_grace_s = number(doc["kill_grace_s"], "kill_grace_s", 0, 3600);
  if (doc.contains("result_file")) {
    if (!doc["result_file"].is_boolean()) invalid("result_file", "true or false");
    o.result_file = doc["result_file"].get<bool>();
  }
  if (doc.contains("metrics_regex")) {
    const json& m = doc["metrics_regex"];
    if (!m.is_object()) invalid("metrics_regex", "an object {metric: regex with one capture group}");
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string field = "metrics_regex." + it.key();
      if (!it.value().is_string()) invalid(field, "a regular expression string");
      MetricRegex r{it.key(), it.value().get<std::string>(), boost::regex()};
      try {
        r.re = compile_metric_regex(r.pattern);
      } catch (const std::invalid_argument& e) {
        invalid(field, e.what());
      }
      o.metrics_regex.push_back(std::move(r));
    }
  }
  if (!o.result_file && o.metrics_regex.empty())
    invalid("result_file", "true, or metrics_regex given: otherwise no metric can be read");
  if (doc.contains("gpus")) {
    o.gpus = string_list(doc["gpus"], "gpus");
    for (const std::string& d : o.gpus)
      if (!device_ok(d)) invalid("gpus", "device ids of letters, digits and '-' (got \"" + d + "\")");
  }
  if (doc.contains("gpus_per_trial")) o.gpus_per_trial = integer(doc["gpus_per_trial"], "gpus_per_trial", 1, 1024);
  if (!o.gpus.empty() && static_cast<int>(o.gpus.size()) < o.gpus_per_trial)
    invalid("gpus", "at least gpus_per_trial (" + std::to_string(o.gpus_per_trial) + ") devices");
  if (doc.contains("env")) {
    const json& e = doc["env"];
    if (!e.is_object()) invalid("env", "an object of strings");
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (!env_name_ok(it.key())) invalid("env." + it.key(), "a variable name of letters, digits and _");
      if (!it.value().is_string()) invalid("env." + it.key(), "a string");
      o.env[it.key()] = it.value().get<std::string>();
    }
  }
  if (doc.contains("workdir")) {
    if (!doc["workdir"].is_string() || doc["workdir"].get<std::string>().empty())
      invalid("workdir", "a directory path");
    o.workdir = doc["workdir"].get<std::string>();
  }
  if (doc.contains("log_tail_lines")) o.log_tail_lines = integer(doc["log_tail_lines"], "log_tail_lines", 0, 10000);
  o.oom_patterns = {"CUDA out of memory", "OutOfMemoryError", "out of memory"};
  if (doc.contains("oom_patterns")) o.oom_patterns = string_list(doc["oom_patterns"], "oom_patterns");
  return o;
}

}  // namespace cotune_process
