#include <cotune/core/abi/call_watch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

namespace cotune::core {
namespace {
using Clock = std::chrono::steady_clock;

struct Active {
  CallKind kind;
  const std::string* plugin;
  const char* call;
  Clock::time_point started;
};

std::atomic<bool> g_watching{false};
std::mutex g_mu;
CallDeadlines g_deadlines;                      // guarded by g_mu
std::map<std::thread::id, Active> g_active;     // guarded by g_mu: the outermost call per thread
thread_local int t_depth = 0;
// The innermost plugin call of this thread, for the crash report (kept whether or not watching is
// on: two stores per call).
thread_local const CallWatch::Scope::Mark* t_mark = nullptr;

}  // namespace

const char* to_string(CallKind kind) {
  switch (kind) {
    case CallKind::kSpace: return "space";
    case CallKind::kSearcher: return "searcher";
    case CallKind::kPredictor: return "predictor";
    case CallKind::kExecutor: return "executor";
  }
  return "?";
}

double CallDeadlines::for_kind(CallKind kind) const {
  switch (kind) {
    case CallKind::kSpace: return space_s;
    case CallKind::kSearcher: return searcher_s;
    case CallKind::kPredictor: return predictor_s;
    case CallKind::kExecutor: return executor_s;
  }
  return 0;
}

CallWatch::Scope::Scope(CallKind kind, const std::string& plugin, const char* call)
    : mark_{kind, &plugin, call, t_mark} {
  t_mark = &mark_;
  if (!g_watching.load(std::memory_order_relaxed)) return;
  counted_ = true;
  if (t_depth++ > 0) return;
  outermost_ = true;
  std::lock_guard<std::mutex> lock(g_mu);
  g_active[std::this_thread::get_id()] = Active{kind, &plugin, call, Clock::now()};
}

CallWatch::Scope::~Scope() {
  t_mark = mark_.outer;
  if (!counted_) return;
  --t_depth;
  if (!outermost_) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_active.erase(std::this_thread::get_id());
}

void CallWatch::set_deadlines(const CallDeadlines& deadlines) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_deadlines = deadlines;
  g_watching.store(true);
}

std::optional<OverdueCall> CallWatch::overdue() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::optional<OverdueCall> worst;
  const Clock::time_point now = Clock::now();
  double worst_over = 0;
  for (const auto& [thread, a] : g_active) {
    const double limit = g_deadlines.for_kind(a.kind);
    if (limit <= 0) continue;
    const double running = std::chrono::duration<double>(now - a.started).count();
    if (running <= limit || running - limit < worst_over) continue;
    worst_over = running - limit;
    worst = OverdueCall{a.kind, *a.plugin, a.call, running, limit};
  }
  return worst;
}

namespace {

constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
struct sigaction g_before[sizeof kCrashSignals / sizeof kCrashSignals[0]];

const char* signal_name(int signo) {
  switch (signo) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
  }
  return "a signal";
}

// Only async-signal-safe calls from here on: write(2) of text assembled in a fixed buffer.
struct Line {
  char text[1024];
  size_t n = 0;
  void add(const char* s, size_t len) {
    len = std::min(len, sizeof text - n);
    std::memcpy(text + n, s, len);
    n += len;
  }
  void add(const char* s) { add(s, std::strlen(s)); }
};

extern "C" void on_crash_signal(int signo, siginfo_t* info, void* /*context*/) {
  size_t i = 0;
  while (kCrashSignals[i] != signo) ++i;
  // What was there before comes back first: a fault in what follows (a plugin that smashed the
  // stack may leave the mark unreadable) then goes to it, not here again.
  ::sigaction(signo, &g_before[i], nullptr);
  Line line;
  line.add("cotune: ");
  line.add(signal_name(signo));
  if (const CallWatch::Scope::Mark* m = t_mark) {
    line.add(" in the ");
    line.add(to_string(m->kind));
    line.add(" plugin ");
    line.add(m->plugin->data(), m->plugin->size());
    line.add(" during its ");
    line.add(m->call);
    line.add(" call");
    if (const CallWatch::Scope::Mark* o = m->outer) {
      line.add(" (within ");
      line.add(o->plugin->data(), o->plugin->size());
      line.add("'s ");
      line.add(o->call);
      line.add(")");
    }
    line.add(": a fault of the plugin's code, which runs in this process; a study may run it in its own "
             "process (\"isolation\": \"process\", docs/study-file.md), where a crash fails that call only\n");
  } else {
    line.add(" (not in a plugin call)\n");
  }
  ssize_t ignored = ::write(STDERR_FILENO, line.text, line.n);
  (void)ignored;
  // A fault returns to the faulting instruction, which faults again under the handler put back. A
  // signal that was sent (kill, raise, abort: si_code <= 0) would not come again: raise it.
  if (info == nullptr || info->si_code <= 0 || signo == SIGABRT) ::raise(signo);
}

}  // namespace

void CallWatch::install_crash_report() {
  for (size_t i = 0; i < sizeof kCrashSignals / sizeof kCrashSignals[0]; ++i) {
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer reports a fault from its own handler, and one chained to it loses the report's
    // stack; its builds keep their report.
    if (kCrashSignals[i] != SIGABRT) continue;
#endif
    struct sigaction sa {};
    sa.sa_sigaction = on_crash_signal;
    sigemptyset(&sa.sa_mask);
    // SA_ONSTACK: on the alternate stack when one is set (a sanitizer's, for a stack overflow).
    // SA_NODEFER: the signal raised again from the handler is delivered, to the handler put back.
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    ::sigaction(kCrashSignals[i], &sa, &g_before[i]);
  }
}

}  // namespace cotune::core
