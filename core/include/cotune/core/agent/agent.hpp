// `cotune agent`: a server that runs trials for remote cotune hosts with its own, locally
// configured executor. Clients authenticate with a shared secret and send parameter values only;
// the agent validates them against the space's domain and its own executor decides what runs.
// Protocol: docs/remote-protocol.md.
#ifndef COTUNE_CORE_AGENT_AGENT_HPP_
#define COTUNE_CORE_AGENT_AGENT_HPP_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cotune::core::agent {

struct AgentOptions {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;  // 0: an ephemeral port (see AgentServer::port())
  std::string secret_file;
  std::string executor = "process";
  std::string executor_options = "{}";
  std::string tls_cert, tls_key;  // both or neither; required beyond loopback
  int max_parallel = 1;
  std::vector<std::string> plugin_dirs;  // searched after the default plugin path
  std::string state_dir;  // where finished, unacknowledged results survive a restart ("": memory)
  std::string workdir;    // per-trial working directories ("": a temporary directory)
  bool cancel_on_shutdown = false;  // SIGTERM: cancel running trials (true) or let them finish
  size_t max_frame_bytes = size_t{1} << 20;
  double rate_per_s = 2000;  // frames per second per connection, sustained
  double rate_burst = 4000;  // frames a connection may send at once
  int handshake_timeout_ms = 5000;  // from accept to an authenticated session
  int frame_timeout_ms = 10000;     // from the first byte of a frame to its last
  int idle_timeout_ms = 300000;     // between frames of an authenticated session
  int max_connections = 512;
  size_t max_trials = 10000;     // queued, running and unacknowledged trials held at once
  bool keep_trial_dirs = false;  // keep each trial's directory after its result is acknowledged
  int shutdown_drain_ms = 2000;  // after the last trial ends, time for clients to acknowledge
  // Where log lines go (one line per call); stderr when empty.
  std::function<void(const std::string&)> log;
};

class AgentServer {
 public:
  // Reads the secret, loads the executor, binds the listening socket. Throws UserError for bad
  // options (unsafe secret file, non-loopback address without TLS, unknown executor, ...).
  explicit AgentServer(AgentOptions options);
  ~AgentServer();  // NOLINT(bugprone-exception-escape): see the definition
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  uint16_t port() const;
  // Serves until shutdown completes. With handle_signals, SIGTERM and SIGINT start a shutdown.
  void run(bool handle_signals = false);
  // Starts a graceful shutdown from any thread (what SIGTERM does).
  void shutdown();
  // Connections currently open (any thread).
  size_t connections() const;

  struct Impl;  // opaque; public only so that the connection class beside it can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cotune::core::agent

#endif  // COTUNE_CORE_AGENT_AGENT_HPP_
