#include <cotune/cotune.h>
#include <cotune/core/abi/log.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace cotune::core {
namespace {

int32_t level_from_env() {
  const char* v = std::getenv("COTUNE_LOG");
  if (v == nullptr) return COTUNE_LOG_INFO;
  if (std::strcmp(v, "debug") == 0) return COTUNE_LOG_DEBUG;
  if (std::strcmp(v, "warn") == 0) return COTUNE_LOG_WARN;
  if (std::strcmp(v, "error") == 0) return COTUNE_LOG_ERROR;
  return COTUNE_LOG_INFO;
}

std::atomic<int32_t> g_level{level_from_env()};
std::mutex g_mutex;  // one line at a time, and guards g_sink
LogSink g_sink;

const char* level_name(int32_t level) {
  switch (level) {
    case COTUNE_LOG_DEBUG: return "debug";
    case COTUNE_LOG_INFO: return "info";
    case COTUNE_LOG_WARN: return "warning";
    default: return "error";
  }
}

}  // namespace

void log(int32_t level, std::string_view component, std::string_view message) {
  if (level < g_level.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_sink) {
    g_sink(level, component, message);
    return;
  }
  std::string line = std::string("cotune: ") + level_name(level) + ": ";
  if (!component.empty()) line += "[" + std::string(component) + "] ";
  line.append(message.data(), message.size());
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void set_log_level(int32_t level) { g_level.store(level); }
int32_t log_level() { return g_level.load(); }

void set_log_sink(LogSink sink) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_sink = std::move(sink);
}

}  // namespace cotune::core
