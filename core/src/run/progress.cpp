#include "run/progress.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

namespace cotune::core {
namespace {

constexpr double kRedrawInterval_s = 0.2;
constexpr size_t kLiveWidth = 160;  // a live line longer than a terminal row would not redraw in place

// `with_config`: the live line names the best configuration; a line per trial does not repeat it
// (the trial that became the best named it on its own line).
std::string state_text(const ProgressState& s, bool with_config) {
  std::ostringstream line;
  line << s.done;
  if (s.budget) line << "/" << *s.budget;
  line << " trials, " << s.in_flight << " in flight | " << duration_text(s.elapsed_s);
  if (s.remaining_s) line << ", ~" << duration_text(*s.remaining_s) << " left";
  // The configuration goes last: a live line cut to the terminal's width loses only its tail.
  if (s.best) {
    line << " | best " << s.metric << " " << compact_number(*s.best);
    if (with_config) line << " [" << s.best_config << "]";
  }
  return line.str();
}

}  // namespace

std::string compact_number(double v) {
  std::ostringstream out;
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3)) {
    out.precision(3);
    out << std::scientific << v;
  } else {
    out.precision(4);
    out << v;
  }
  return out.str();
}

std::string duration_text(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  long long s = std::llround(seconds);
  std::ostringstream out;
  if (s >= 3600) out << s / 3600 << "h" << (s % 3600) / 60 << "m";
  else if (s >= 60) out << s / 60 << "m" << s % 60 << "s";
  else out << std::fixed << (seconds < 10 ? std::setprecision(1) : std::setprecision(0)) << seconds << "s";
  return out.str();
}

void Progress::trial_finished(const FinishedTrialLine& t, const ProgressState& state) {
  if (mode_ == ProgressMode::kQuiet) return;
  if (mode_ == ProgressMode::kLive) {
    if (t.improved) note("trial " + std::to_string(t.seq) + ": new best " + state.metric + " " +
                         compact_number(*t.value) + " [" + t.config + "]");
    update(state, -1);
    return;
  }
  std::ostringstream line;
  line << "trial " << t.seq << " " << t.status;
  if (t.value) line << " " << state.metric << "=" << compact_number(*t.value);
  if (t.predicted) line << " (predicted " << compact_number(*t.predicted) << ")";
  if (t.improved) line << " *new best*";
  if (!t.note.empty()) line << ": " << t.note;
  line << " [" << t.config << "] -- " << state_text(state, false);
  std::fprintf(out_, "%s\n", line.str().c_str());
  std::fflush(out_);
}

void Progress::update(const ProgressState& state, double now_s) {
  if (mode_ != ProgressMode::kLive) return;
  if (now_s >= 0 && drawn_ && now_s - last_draw_s_ < kRedrawInterval_s) return;
  if (now_s >= 0) last_draw_s_ = now_s;
  std::string text = state_text(state, true);
  if (text.size() > kLiveWidth) {
    text.resize(kLiveWidth - 3);
    text += "...";
  }
  std::fprintf(out_, "\r\033[K%s", text.c_str());
  std::fflush(out_);
  drawn_ = true;
}

void Progress::note(const std::string& message) {
  if (mode_ == ProgressMode::kQuiet) return;
  clear();
  std::fprintf(out_, "%s\n", message.c_str());
  std::fflush(out_);
}

void Progress::clear() {
  if (mode_ == ProgressMode::kLive && drawn_) {
    std::fprintf(out_, "\r\033[K");
    std::fflush(out_);
    drawn_ = false;
  }
}

}  // namespace cotune::core
