// Plugin calls watched against a deadline per component kind. A plugin call cannot be interrupted
// from outside (it runs in this process, through the C ABI), so the host cannot take a trial back
// from a call that never returns; what it can do is notice, name the plugin and the call, and stop
// the study cleanly instead of hanging until SIGKILL (cotune run's watchdog does this).
//
// Component wrappers (components.hpp) open a Scope around each call that may block; nested calls
// (a searcher calling back into the space) count as part of the outermost one. Watching is off until
// set_deadlines() is called, so commands that do not watch pay one relaxed load per call.
#ifndef COTUNE_CORE_ABI_CALL_WATCH_HPP_
#define COTUNE_CORE_ABI_CALL_WATCH_HPP_

#include <optional>
#include <string>

namespace cotune::core {

enum class CallKind { kSpace, kSearcher, kPredictor, kExecutor };
const char* to_string(CallKind kind);

// Seconds a single call of each kind may take; 0 or less: no deadline. The defaults leave room for
// a slow sbatch, a large predictor fit and a searcher scoring many candidates.
struct CallDeadlines {
  double space_s = 120;
  double searcher_s = 900;
  double predictor_s = 1800;
  double executor_s = 300;
  double for_kind(CallKind kind) const;
};

struct OverdueCall {
  CallKind kind = CallKind::kSpace;
  std::string plugin;  // the plugin's id
  std::string call;    // "propose", "poll", ...
  double running_s = 0;
  double deadline_s = 0;
};

class CallWatch {
 public:
  // Marks one plugin call for as long as it lives. `plugin` must outlive the scope.
  class Scope {
   public:
    Scope(CallKind kind, const std::string& plugin, const char* call);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

    // The call this one runs within (a searcher's propose calling back into the space), if any.
    struct Mark {
      CallKind kind;
      const std::string* plugin;
      const char* call;
      const Mark* outer;
    };

   private:
    bool counted_ = false, outermost_ = false;
    Mark mark_;
  };

  // Turns watching on (process-wide) with these deadlines.
  static void set_deadlines(const CallDeadlines& deadlines);
  // The call (on any thread) that has run longest past its deadline, if one has.
  static std::optional<OverdueCall> overdue();

  // Installs handlers for the signals of a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) that
  // write which plugin call was running on the crashing thread to stderr, then let the signal take
  // its course (the handler in place before, a sanitizer's included, or the default: the exit
  // status stays the signal's). A plugin run in-process cannot crash without taking the host down;
  // this says whose code it was.
  static void install_crash_report();
};

}  // namespace cotune::core

#endif  // COTUNE_CORE_ABI_CALL_WATCH_HPP_
