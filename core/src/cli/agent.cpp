// `cotune agent`: serves trials to remote cotune hosts (core/include/cotune/core/agent/agent.hpp).
#include <cotune/core/agent/agent.hpp>
#include <cotune/core/errors.hpp>

#include <boost/program_options.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;

// "HOST:PORT", "[v6]:PORT".
void parse_listen(const std::string& text, core::agent::AgentOptions& o) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    throw core::UserError("--listen '" + text + "': expected HOST:PORT (e.g. 127.0.0.1:7070)");
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = text.substr(colon + 1);
  unsigned long value = 0;
  try {
    size_t used = 0;
    value = std::stoul(port, &used);
    if (used != port.size()) throw std::invalid_argument(port);
  } catch (const std::exception&) {
    throw core::UserError("--listen '" + text + "': port '" + port + "' is not a number");
  }
  if (value > 65535) throw core::UserError("--listen '" + text + "': port must be at most 65535");
  o.listen_host = host;
  o.listen_port = static_cast<uint16_t>(value);
}

int run_agent(int argc, char** argv) {
  core::agent::AgentOptions o;
  std::string listen, on_shutdown = "finish";
  long long max_trials = 0;
  po::options_description desc(
      "usage: cotune agent --listen HOST:PORT --secret-file FILE --executor NAME [options]\n\n"
      "Runs trials for remote cotune hosts (the 'remote' executor) with a locally configured executor.\n"
      "Clients send parameter values only; the local executor decides what runs. TLS is required\n"
      "beyond loopback. SIGTERM stops gracefully.\n\noptions");
  desc.add_options()
      ("help,h", "this help")
      ("listen", po::value(&listen)->required(), "address and port to listen on, HOST:PORT (port 0: any free port)")
      ("secret-file", po::value(&o.secret_file)->required(), "shared secret (mode 0600, at least 16 bytes)")
      ("executor", po::value(&o.executor)->default_value("process"), "local executor: process, cuda, sim, ...")
      ("executor-options", po::value(&o.executor_options)->default_value("{}"), "JSON options of the local executor")
      ("tls-cert", po::value(&o.tls_cert), "PEM certificate chain (enables TLS)")
      ("tls-key", po::value(&o.tls_key), "PEM private key")
      ("max-parallel", po::value(&o.max_parallel)->default_value(1), "trials run at once")
      ("state-dir", po::value(&o.state_dir), "keep unacknowledged results here across restarts")
      ("workdir", po::value(&o.workdir), "parent directory of the per-trial directories")
      ("plugin-dir", po::value(&o.plugin_dirs)->composing(), "extra plugin directory (repeatable)")
      ("on-shutdown", po::value(&on_shutdown)->default_value("finish"), "SIGTERM: 'finish' or 'cancel' running trials")
      ("max-frame-bytes", po::value(&o.max_frame_bytes)->default_value(o.max_frame_bytes), "largest frame accepted")
      ("rate", po::value(&o.rate_per_s)->default_value(o.rate_per_s), "frames per second per connection")
      ("burst", po::value(&o.rate_burst)->default_value(o.rate_burst), "frames a connection may send at once")
      ("handshake-timeout-ms", po::value(&o.handshake_timeout_ms)->default_value(o.handshake_timeout_ms), "time to authenticate")
      ("frame-timeout-ms", po::value(&o.frame_timeout_ms)->default_value(o.frame_timeout_ms), "time to finish a started frame")
      ("idle-timeout-ms", po::value(&o.idle_timeout_ms)->default_value(o.idle_timeout_ms), "idle connections are closed after this")
      ("max-connections", po::value(&o.max_connections)->default_value(o.max_connections), "connections open at once")
      ("max-trials", po::value(&max_trials)->default_value(static_cast<long long>(o.max_trials)),
       "trials held at once (queued, running, finished and unacknowledged); more are turned away to retry later")
      ("keep-trial-dirs", po::bool_switch(&o.keep_trial_dirs), "keep each trial's directory after its result is acknowledged");
  po::variables_map vm;
  try {
    // No positional words: a stray one ("--keep-trial-dirs no") is an error, not ignored.
    po::store(po::command_line_parser(argc, argv).options(desc).positional(po::positional_options_description()).run(), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::too_many_positional_options_error&) {
    throw core::UserError("unexpected argument: cotune agent takes options only (see 'cotune agent --help')");
  } catch (const po::error& e) {
    throw core::UserError(std::string(e.what()) + " (see 'cotune agent --help')");
  }
  parse_listen(listen, o);
  if (on_shutdown != "finish" && on_shutdown != "cancel")
    throw core::UserError("--on-shutdown must be 'finish' or 'cancel', got '" + on_shutdown + "'");
  o.cancel_on_shutdown = on_shutdown == "cancel";
  if (max_trials < 1) throw core::UserError("--max-trials must be at least 1, got " + std::to_string(max_trials));
  o.max_trials = static_cast<size_t>(max_trials);
  if (o.max_connections < 1)
    throw core::UserError("--max-connections must be at least 1, got " + std::to_string(o.max_connections));
  core::agent::AgentServer server(o);
  // The port on stdout, so that scripts and tests can listen on port 0 and learn the real one.
  std::cout << "listening on port " << server.port() << std::endl;
  server.run(/*handle_signals=*/true);
  return 0;
}
}  // namespace

COTUNE_COMMAND("agent", "serve trials to remote cotune hosts with a local executor", run_agent);

}  // namespace cotune::cli
