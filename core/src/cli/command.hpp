// Subcommands of the `cotune` command. Each lives in its own file under core/src/cli/ and registers
// itself with COTUNE_COMMAND; main.cpp dispatches on the first argument.
#ifndef COTUNE_CLI_COMMAND_HPP_
#define COTUNE_CLI_COMMAND_HPP_

#include <string>
#include <vector>

namespace cotune::cli {

// A subcommand. `run` receives argv with argv[0] set to "cotune <name>" and returns the exit status
// (0 ok, 1 failure of the work, 2 bad usage or input). It may throw core::UserError (printed, exit
// 2) or any std::exception (printed, exit 1).
struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

struct RegisterCommand {
  explicit RegisterCommand(Command c);
};

// Every registered command, sorted by name.
std::vector<Command> commands();

// The store a command uses without --store: $COTUNE_STORE when set and not empty, else ./cotune.db.
// A store is a file path (SQLite) or a postgresql:// URL (store_location.hpp); Store decides which.
std::string default_store_path();

// `cotune __plugin-host ...`: the child process of a plugin run with "isolation": "process"
// (plugin_host.cpp). Dispatched before the commands, and not listed among them.
int plugin_host_main(int argc, char** argv);
inline constexpr const char* kStoreHelp =
    "the study store: an SQLite file, or postgresql://user@host:port/dbname (default: $COTUNE_STORE, else "
    "./cotune.db)";

}  // namespace cotune::cli

#define COTUNE_CLI_CONCAT2(a, b) a##b
#define COTUNE_CLI_CONCAT(a, b) COTUNE_CLI_CONCAT2(a, b)
#define COTUNE_COMMAND(name, summary, fn) \
  static ::cotune::cli::RegisterCommand COTUNE_CLI_CONCAT(cotune_command_, __LINE__)({name, summary, fn})

#endif  // COTUNE_CLI_COMMAND_HPP_
