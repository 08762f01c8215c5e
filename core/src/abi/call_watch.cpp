#include <cotune/core/abi/call_watch.hpp>

#include <atomic>
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

CallWatch::Scope::Scope(CallKind kind, const std::string& plugin, const char* call) {
  if (!g_watching.load(std::memory_order_relaxed)) return;
  counted_ = true;
  if (t_depth++ > 0) return;
  outermost_ = true;
  std::lock_guard<std::mutex> lock(g_mu);
  g_active[std::this_thread::get_id()] = Active{kind, &plugin, call, Clock::now()};
}

CallWatch::Scope::~Scope() {
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

}  // namespace cotune::core
