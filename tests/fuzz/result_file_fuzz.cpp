// Fuzz target: what a job leaves for the process and Slurm executors (they share the reader): the
// bytes as result.json and as stdout, read by read_result_file and by metrics_from_regex with the
// metric regexes a study might configure. Whatever the bytes, the reading ends with metrics or an
// error of bounded size, and never crashes (std::regex once recursed per character of a line).
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.hpp"
#include <cotune/support/trial_files.hpp>

namespace {

using namespace cotune::support;

const std::string& scratch() {
  static const std::string path = "/tmp/cotune-result-fuzz-" + std::to_string(::getpid());
  return path;
}

const std::vector<MetricRegex>& regexes() {
  static const std::vector<MetricRegex> r = [] {
    std::vector<MetricRegex> out;
    for (const auto& [name, pattern] : std::vector<std::pair<std::string, std::string>>{
             {"step_time_s", "step time: ([0-9.]+)"},
             {"tokens_per_s", "([0-9.eE+-]+) tokens/s"},
             {"loss", "loss[ =:]+(\\S+)"}})
      out.push_back({name, pattern, compile_metric_regex(pattern)});
    return out;
  }();
  return r;
}

void check(const Metrics& m) {
  if (m.ok) {
    const nlohmann::json j = nlohmann::json::parse(m.json, nullptr, false);
    FUZZ_CHECK(j.is_object() && !j.empty());
    for (const auto& item : j.items()) FUZZ_CHECK(item.value().is_number());
  } else {
    FUZZ_CHECK(!m.error.empty());
    FUZZ_CHECK(m.error.size() < 1000);  // no copy of the output in the error
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream out(scratch(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const Metrics result = read_result_file(scratch());
  check(result);
  // A result is taken only from a shallow document.
  if (result.ok) FUZZ_CHECK(json_depth(std::string(reinterpret_cast<const char*>(data), size)) <= kMaxJsonDepth);
  check(metrics_from_regex(scratch(), regexes()));
  std::remove(scratch().c_str());
  return 0;
}
