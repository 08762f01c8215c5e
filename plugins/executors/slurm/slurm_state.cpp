#include "slurm_state.hpp"

#include <charconv>
#include <sstream>
#include <vector>

namespace cotune_slurm {
namespace {

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  size_t e = s.find_last_not_of(" \t\r");
  return b == std::string_view::npos ? "" : std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> split(std::string_view line, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = line.find(sep, start);
    parts.push_back(trim(line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start)));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

// A number field of squeue/sacct output (already trimmed); 0 when it is empty or not a number, as
// sacct prints for a job that has not ended.
int to_int(std::string_view field) {
  int value = 0;
  std::from_chars(field.data(), field.data() + field.size(), value);
  return value;
}

}  // namespace

SlurmOutcome classify_state(std::string_view state) {
  // sacct writes "CANCELLED by 1000"; squeue may add a '+' to a state with flags.
  std::string s(state.substr(0, state.find_first_of(" +")));
  if (s == "COMPLETED") return SlurmOutcome::kCompleted;
  if (s == "OUT_OF_MEMORY") return SlurmOutcome::kOom;
  if (s == "TIMEOUT") return SlurmOutcome::kTimeout;
  if (s == "NODE_FAIL" || s == "PREEMPTED") return SlurmOutcome::kRequeue;
  if (s == "CANCELLED") return SlurmOutcome::kCancelled;
  if (s == "FAILED" || s == "BOOT_FAIL" || s == "DEADLINE" || s == "SPECIAL_EXIT" || s == "REVOKED")
    return SlurmOutcome::kFailed;
  if (s == "RUNNING" || s == "COMPLETING" || s == "SIGNALING" || s == "STAGE_OUT" || s == "RESIZING")
    return SlurmOutcome::kRunning;
  return SlurmOutcome::kPending;  // PENDING, CONFIGURING, REQUEUED, REQUEUE_HOLD, SUSPENDED, ...
}

std::map<std::string, SlurmJobInfo> parse_squeue(std::string_view text) {
  std::map<std::string, SlurmJobInfo> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = split(line, '|');
    if (f.size() < 3 || f[0].empty()) continue;
    SlurmJobInfo info;
    info.state = f[1];
    int raw = to_int(f[2]);  // a wait status: code << 8 | signal
    info.exit_code = (raw >> 8) & 0xff;
    info.signal = raw & 0x7f;
    if (f.size() > 3) info.reason = f[3];
    out[f[0]] = info;
  }
  return out;
}

std::map<std::string, SlurmJobInfo> parse_sacct(std::string_view text) {
  std::map<std::string, SlurmJobInfo> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = split(line, '|');
    if (f.size() < 3 || f[0].empty()) continue;
    SlurmJobInfo info;
    info.state = f[1];
    const std::string_view code(f[2]);
    const size_t colon = code.find(':');
    info.exit_code = to_int(code.substr(0, colon));
    info.signal = colon == std::string_view::npos ? 0 : to_int(code.substr(colon + 1));
    out[f[0]] = info;
  }
  return out;
}

}  // namespace cotune_slurm
