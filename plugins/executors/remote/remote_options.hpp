// Options of the remote executor, read from its JSON options (docs/remote-protocol.md).
#ifndef COTUNE_REMOTE_OPTIONS_HPP_
#define COTUNE_REMOTE_OPTIONS_HPP_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cotune_remote {

struct AgentConfig {
  std::string host;
  uint16_t port = 0;
  std::string address;  // "host:port" as written, the agent's name in external ids
  std::string secret;   // read from secret_file
  int capacity = 1;
  bool tls = false;
  std::string tls_ca;       // PEM bundle to verify the agent; "" with tls: the system's
  std::string server_name;  // name the certificate must carry (default: host)
};

struct RemoteOptions {
  std::string space;  // the search space the agents validate configurations against
  std::vector<AgentConfig> agents;
  int connect_timeout_ms = 5000;
  int retry_min_ms = 100;
  int retry_max_ms = 5000;
  int failover_ms = 10000;  // an agent down this long has its trials moved to others
  int keepalive_ms = 15000;
};

// Throws std::invalid_argument naming the field and what was expected.
RemoteOptions parse_remote_options(std::string_view json);

}  // namespace cotune_remote

#endif  // COTUNE_REMOTE_OPTIONS_HPP_
