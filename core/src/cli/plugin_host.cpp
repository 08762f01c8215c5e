// `cotune __plugin-host --fd N --library PATH --component ID`: the child process of a plugin run with
// "isolation": "process" (core/abi/isolation.hpp). Started by the host, never by hand; not listed.
#include <cotune/core/abi/isolation.hpp>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "cli/command.hpp"

namespace cotune::cli {

int plugin_host_main(int argc, char** argv) {
  int fd = -1;
  std::string library, component;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--fd") == 0) fd = static_cast<int>(std::strtol(argv[i + 1], nullptr, 10));
    else if (std::strcmp(argv[i], "--library") == 0) library = argv[i + 1];
    else if (std::strcmp(argv[i], "--component") == 0) component = argv[i + 1];
  }
  if (fd < 0 || library.empty() || component.empty()) {
    std::fprintf(stderr, "cotune __plugin-host: started by the host for \"isolation\": \"process\", not by hand\n");
    return 2;
  }
  // Ctrl-C reaches the whole process group: the host decides what stops (on_stop), and still needs
  // this process to cancel the trials in flight.
  std::signal(SIGINT, SIG_IGN);
  // A host that dies without a word (kill -9) takes this process with it, even in a call that never
  // returns, as the plugin would have gone with the host's own process.
  const pid_t host = ::getppid();
  std::thread([host] {
    while (::getppid() == host) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::_Exit(0);
  }).detach();
  return core::serve_isolated_component(fd, library, component);
}

}  // namespace cotune::cli
