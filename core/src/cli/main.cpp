// The `cotune` command: dispatches to the subcommands registered with COTUNE_COMMAND.
#include <cotune/core/abi/call_watch.hpp>
#include <cotune/cotune.h>
#include <cotune/core/errors.hpp>
#include <cotune/core/store/store.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli/command.hpp"

namespace cotune::cli {
namespace {
std::vector<Command>& table() {
  static std::vector<Command> t;
  return t;
}

void usage(FILE* out) {
  std::fprintf(out, "usage: cotune <command> [options]\n\ncommands:\n");
  for (const Command& c : commands()) std::fprintf(out, "  %-16s %s\n", c.name, c.summary);
  std::fprintf(out, "\n'cotune <command> --help' describes a command. cotune %s\n", COTUNE_VERSION);
}
}  // namespace

RegisterCommand::RegisterCommand(Command c) { table().push_back(c); }

std::string default_store_path() {
  const char* env = std::getenv("COTUNE_STORE");  // NOLINT(concurrency-mt-unsafe): read before any thread starts
  return env != nullptr && env[0] != '\0' ? std::string(env) : std::string(core::kDefaultStorePath);
}

std::vector<Command> commands() {
  std::vector<Command> sorted = table();
  std::sort(sorted.begin(), sorted.end(),
            [](const Command& a, const Command& b) { return std::strcmp(a.name, b.name) < 0; });
  return sorted;
}
}  // namespace cotune::cli

int main(int argc, char** argv) {
  using cotune::cli::Command;
  // Output into a closed pipe (`cotune run | head`) is a failed write, not a kill: a run goes on to
  // the end of its study instead of dying with the study recorded as running.
  std::signal(SIGPIPE, SIG_IGN);
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    cotune::cli::usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "__plugin-host") == 0) return cotune::cli::plugin_host_main(argc, argv);
  // A plugin that crashes in this process takes it down: say whose call it was.
  cotune::core::CallWatch::install_crash_report();
  if (std::strcmp(argv[1], "--version") == 0) {
    std::printf("cotune %s (ABI %d.%d)\n", COTUNE_VERSION, COTUNE_ABI_MAJOR, COTUNE_ABI_MINOR);
    return 0;
  }
  for (const Command& c : cotune::cli::commands()) {
    if (std::strcmp(c.name, argv[1]) != 0) continue;
    std::string self = std::string("cotune ") + c.name;
    std::vector<char*> args(argv + 1, argv + argc);
    args[0] = self.data();
    try {
      return c.run(static_cast<int>(args.size()), args.data());
    } catch (const cotune::core::UserError& e) {
      std::fprintf(stderr, "cotune %s: error: %s\n", c.name, e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cotune %s: error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "cotune: unknown command '%s'\n\n", argv[1]);
  cotune::cli::usage(stderr);
  return 2;
}
