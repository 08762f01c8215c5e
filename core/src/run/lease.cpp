#include "run/lease.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <fstream>

namespace cotune::core {
namespace {

// Whether `pid` is a zombie: killed, not yet reaped by its parent (a shell, or an init that does
// not reap), so kill(pid, 0) still finds it.
bool zombie(std::int64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t close = text.rfind(')');  // "pid (comm) state ...": comm may hold spaces and parentheses
  return close != std::string::npos && close + 2 < text.size() && (text[close + 2] == 'Z' || text[close + 2] == 'X');
}

// Whether `pid` names a live process on this host (EPERM: alive, another user's).
bool alive(std::int64_t pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) && !zombie(pid);
}

}  // namespace

std::string lease_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

StudyLease this_process_lease() { return StudyLease{lease_host_name(), static_cast<std::int64_t>(::getpid()), 0}; }

bool lease_is_live(const StudyLease& holder) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (now - holder.heartbeat > kLeaseStaleAfterS) return false;
  return holder.host != lease_host_name() || alive(holder.pid);
}

bool lease_may_hold(const StudyLease& holder) {
  if (holder.host == lease_host_name()) return alive(holder.pid);
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return now - holder.heartbeat <= kLeaseStaleAfterS;
}

}  // namespace cotune::core
