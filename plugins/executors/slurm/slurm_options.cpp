#include "slurm_options.hpp"

#include <cotune/cotune.hpp>
#include <cotune/support/likely_meant.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

namespace cotune_slurm {
namespace {

using nlohmann::json;

[[noreturn]] void invalid(const std::string& field, const std::string& expected) {
  throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "slurm executor options: '" + field + "': expected " + expected);
}

std::vector<std::string> string_list(const json& v, const std::string& field) {
  if (!v.is_array()) invalid(field, "an array of strings");
  std::vector<std::string> out;
  for (const json& s : v) {
    if (!s.is_string()) invalid(field, "an array of strings");
    if (s.get<std::string>().find('\n') != std::string::npos) invalid(field, "strings without newlines");
    out.push_back(s.get<std::string>());
  }
  return out;
}

// Names that go into #SBATCH lines: no spaces, quotes or newlines.
std::string word(const json& v, const std::string& field) {
  static const std::regex ok("^[A-Za-z0-9_.,:+-]+$");
  if (!v.is_string() || !std::regex_match(v.get<std::string>(), ok))
    invalid(field, "a name of letters, digits and _ . , : + -");
  return v.get<std::string>();
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

bool boolean(const json& v, const std::string& field) {
  if (!v.is_boolean()) invalid(field, "true or false");
  return v.get<bool>();
}

std::string path(const json& v, const std::string& field) {
  if (!v.is_string() || v.get<std::string>().empty()) invalid(field, "a path");
  std::string p = v.get<std::string>();
  for (char c : p)
    if (static_cast<unsigned char>(c) < 0x20) invalid(field, "a path without control characters");
  return p;
}

}  // namespace

SlurmOptions parse_slurm_options(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "slurm executor options: expected a JSON object");
  static const std::vector<std::string> known = {
      "command", "partition", "account", "qos", "nodes", "gpus_per_node", "cpus_per_task", "mem", "time_limit",
      "sbatch_options", "setup", "env", "parallel", "array", "max_attempts", "poll_min_s", "poll_max_s",
      "cancel_on_destroy", "result_file", "metrics_regex", "log_dir", "workdir", "slurm_bin", "job_name",
      "command_timeout_s", "log_tail_lines", "check_on_create"};
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    invalid(it.key(), "no such option" + cotune::support::did_you_mean(it.key(), known) + " (known: " + list + ")");
  }
  SlurmOptions o;
  if (!doc.contains("command")) invalid("command", "the command to run, as an array of strings");
  o.command = CommandTemplate(string_list(doc["command"], "command"), "command");
  if (doc.contains("partition")) o.partition = word(doc["partition"], "partition");
  if (doc.contains("account")) o.account = word(doc["account"], "account");
  if (doc.contains("qos")) o.qos = word(doc["qos"], "qos");
  if (doc.contains("mem")) o.mem = word(doc["mem"], "mem");
  if (doc.contains("job_name")) o.job_name = word(doc["job_name"], "job_name");
  if (doc.contains("time_limit")) {
    static const std::regex limit("^([0-9]+-)?[0-9]+(:[0-9]+){0,2}$");
    if (!doc["time_limit"].is_string() || !std::regex_match(doc["time_limit"].get<std::string>(), limit))
      invalid("time_limit", "a Slurm time limit: minutes, MM:SS, HH:MM:SS or D-HH:MM:SS");
    o.time_limit = doc["time_limit"].get<std::string>();
  }
  if (doc.contains("nodes")) o.nodes = integer(doc["nodes"], "nodes", 1, 100000);
  if (doc.contains("gpus_per_node")) o.gpus_per_node = integer(doc["gpus_per_node"], "gpus_per_node", 0, 1024);
  if (doc.contains("cpus_per_task")) o.cpus_per_task = integer(doc["cpus_per_task"], "cpus_per_task", 1, 100000);
  if (doc.contains("sbatch_options")) {
    o.sbatch_options = string_list(doc["sbatch_options"], "sbatch_options");
    for (const auto& s : o.sbatch_options)
      if (s.rfind("--", 0) != 0 || s.find_first_of(" \t'\"") != std::string::npos)
        invalid("sbatch_options", "long options without spaces or quotes (\"--constraint=h100\"), got \"" + s + "\"");
  }
  if (doc.contains("setup")) o.setup = string_list(doc["setup"], "setup");
  if (doc.contains("env")) {
    static const std::regex name("^[A-Za-z_][A-Za-z0-9_]*$");
    if (!doc["env"].is_object()) invalid("env", "an object of strings");
    for (auto it = doc["env"].begin(); it != doc["env"].end(); ++it) {
      if (!std::regex_match(it.key(), name)) invalid("env." + it.key(), "a variable name of letters, digits and _");
      if (!it.value().is_string()) invalid("env." + it.key(), "a string");
      o.env[it.key()] = it.value().get<std::string>();
    }
  }
  if (doc.contains("parallel")) o.parallel = integer(doc["parallel"], "parallel", 1, 100000);
  if (doc.contains("array")) o.array = boolean(doc["array"], "array");
  if (doc.contains("max_attempts")) o.max_attempts = integer(doc["max_attempts"], "max_attempts", 1, 100);
  if (doc.contains("poll_min_s")) o.poll_min_s = number(doc["poll_min_s"], "poll_min_s", 0.01, 3600);
  if (doc.contains("poll_max_s")) o.poll_max_s = number(doc["poll_max_s"], "poll_max_s", 0.01, 3600);
  if (o.poll_max_s < o.poll_min_s) invalid("poll_max_s", "a value >= poll_min_s");
  if (doc.contains("cancel_on_destroy")) o.cancel_on_destroy = boolean(doc["cancel_on_destroy"], "cancel_on_destroy");
  if (doc.contains("result_file")) o.result_file = boolean(doc["result_file"], "result_file");
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
  if (doc.contains("log_dir")) o.log_dir = path(doc["log_dir"], "log_dir");
  if (doc.contains("workdir")) o.workdir = path(doc["workdir"], "workdir");
  if (doc.contains("slurm_bin")) o.slurm_bin = path(doc["slurm_bin"], "slurm_bin");
  if (doc.contains("command_timeout_s")) o.command_timeout_s = number(doc["command_timeout_s"], "command_timeout_s", 1, 3600);
  if (doc.contains("log_tail_lines")) o.log_tail_lines = integer(doc["log_tail_lines"], "log_tail_lines", 0, 10000);
  if (doc.contains("check_on_create")) o.check_on_create = boolean(doc["check_on_create"], "check_on_create");
  return o;
}

}  // namespace cotune_slurm
