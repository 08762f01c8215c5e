// What a running study shows: on a terminal one live line (trials done / in flight / budget, the
// best so far and its configuration, elapsed and remaining time), redrawn in place; otherwise one
// log line per finished trial; nothing when quiet.
#ifndef COTUNE_RUN_PROGRESS_HPP_
#define COTUNE_RUN_PROGRESS_HPP_

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace cotune::core {

enum class ProgressMode { kLive, kLines, kQuiet };

struct ProgressState {
  std::int64_t done = 0;  // counted trials
  std::int64_t in_flight = 0;
  std::optional<std::int64_t> budget;  // trials
  std::string metric;
  std::optional<double> best;
  std::string best_config;
  double elapsed_s = 0;
  std::optional<double> remaining_s;
};

// One finished trial, for the per-trial line.
struct FinishedTrialLine {
  std::int64_t seq = 0;
  std::string status;
  std::optional<double> value;      // the objective metric, when measured
  std::optional<double> predicted;  // what the surrogate expected
  std::string note;                 // an error or a violated constraint
  std::string config;
  bool improved = false;
};

class Progress {
 public:
  Progress(std::FILE* out, ProgressMode mode) : out_(out), mode_(mode) {}
  ~Progress() { clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void trial_finished(const FinishedTrialLine& line, const ProgressState& state);
  // Redraws the live line (at most a few times a second).
  void update(const ProgressState& state, double now_s);
  // A message of its own (the live line is cleared first and redrawn on the next update).
  void note(const std::string& message);
  // Removes the live line.
  void clear();

 private:
  std::FILE* out_;
  ProgressMode mode_;
  bool drawn_ = false;
  double last_draw_s_ = -1;
};

// 1234567 -> "1.23e+06"; small numbers as they are: a compact rendering for status lines.
std::string compact_number(double v);
// 75 -> "1m15s".
std::string duration_text(double seconds);

}  // namespace cotune::core

#endif  // COTUNE_RUN_PROGRESS_HPP_
