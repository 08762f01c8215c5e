// What a server's accept loop does when accept() fails. EMFILE and ENFILE (no file descriptor
// left) last until connections close, so accepting again at once spins a core and writes a log
// line per try; this waits before the next accept, doubling the wait while failures last, and
// lets through at most one log line a second. Used by `cotune serve` and `cotune agent`.
#ifndef COTUNE_NET_ACCEPT_BACKOFF_HPP_
#define COTUNE_NET_ACCEPT_BACKOFF_HPP_

#include <algorithm>
#include <chrono>
#include <string>

namespace cotune::core::net {

class AcceptBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kFirst{5}, kMost{1000};

  // After a failed accept: the wait before the next one, and in *line the log line that is due
  // now (empty when one was written less than a second ago; it then counts the failures since).
  std::chrono::milliseconds failed(const std::string& error, std::string* line) {
    delay_ = delay_.count() == 0 ? kFirst : std::min(kMost, delay_ * 2);
    const Clock::time_point now = Clock::now();
    line->clear();
    if (logged_ == Clock::time_point{} || now - logged_ >= std::chrono::seconds(1)) {
      *line = "accept failed: " + error + "; waiting " + std::to_string(delay_.count()) + " ms before the next";
      if (suppressed_ > 0) *line += " (" + std::to_string(suppressed_) + " more failures since the last line)";
      logged_ = now;
      suppressed_ = 0;
    } else {
      ++suppressed_;
    }
    return delay_;
  }
  void succeeded() { delay_ = std::chrono::milliseconds{0}; }

 private:
  std::chrono::milliseconds delay_{0};
  Clock::time_point logged_{};
  long suppressed_ = 0;
};

}  // namespace cotune::core::net

#endif  // COTUNE_NET_ACCEPT_BACKOFF_HPP_
