// Logging for the host and, through cotune_host.log, for plugins. Lines go to stderr as
// "cotune: <level>: [<component>] <message>"; the threshold comes from COTUNE_LOG (debug, info, warn,
// error; default info) or set_log_level().
#ifndef COTUNE_CORE_ABI_LOG_HPP_
#define COTUNE_CORE_ABI_LOG_HPP_

#include <cstdint>
#include <functional>
#include <string_view>

namespace cotune::core {

void log(int32_t level, std::string_view component, std::string_view message);
void set_log_level(int32_t level);
int32_t log_level();

// Replaces the output (for tests and the live progress display); nullptr restores stderr.
using LogSink = std::function<void(int32_t level, std::string_view component, std::string_view message)>;
void set_log_sink(LogSink sink);

}  // namespace cotune::core

#endif  // COTUNE_CORE_ABI_LOG_HPP_
