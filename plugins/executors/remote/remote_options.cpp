#include "remote_options.hpp"

#include "wire.hpp"

#include <cotune/support/likely_meant.hpp>
#include <nlohmann/json.hpp>

#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace cotune_remote {
namespace {
[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument("remote executor options: " + what); }

int positive_int(const nlohmann::json& o, const char* key, int fallback) {
  auto it = o.find(key);
  if (it == o.end()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 86400000)
    bad(std::string("'") + key + "' must be a positive integer");
  return it->get<int>();
}

AgentConfig parse_agent(const nlohmann::json& a, size_t index) {
  const std::string where = "agents[" + std::to_string(index) + "]";
  if (!a.is_object()) bad(where + " must be an object");
  for (const auto& item : a.items()) {
    static const char* known[] = {"address", "secret_file", "capacity", "tls", "tls_ca", "server_name"};
    bool ok = false;
    for (const char* k : known) ok = ok || item.key() == k;
    if (!ok)
      bad(where + ": unknown field '" + item.key() + "'" +
          cotune::support::did_you_mean(item.key(), std::vector<std::string>(std::begin(known), std::end(known))));
  }
  AgentConfig c;
  auto addr = a.find("address");
  if (addr == a.end() || !addr->is_string()) bad(where + ".address must be a string \"host:port\"");
  c.address = addr->get<std::string>();
  const auto colon = c.address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == c.address.size())
    bad(where + ".address '" + c.address + "': expected host:port");
  c.host = c.address.substr(0, colon);
  if (c.host.size() > 2 && c.host.front() == '[' && c.host.back() == ']') c.host = c.host.substr(1, c.host.size() - 2);
  try {
    size_t used = 0;
    const unsigned long port = std::stoul(c.address.substr(colon + 1), &used);
    if (used != c.address.size() - colon - 1 || port == 0 || port > 65535) throw std::out_of_range("port");
    c.port = static_cast<uint16_t>(port);
  } catch (const std::exception&) {
    bad(where + ".address '" + c.address + "': the port must be 1..65535");
  }
  auto secret = a.find("secret_file");
  if (secret == a.end() || !secret->is_string()) bad(where + ".secret_file must be a path");
  try {
    c.secret = load_secret_file(home_expanded(secret->get<std::string>()));
  } catch (const std::exception& e) {
    bad(where + ".secret_file: " + e.what());
  }
  c.capacity = positive_int(a, "capacity", 1);
  if (auto ca = a.find("tls_ca"); ca != a.end()) {
    if (!ca->is_string()) bad(where + ".tls_ca must be a path to a PEM file");
    c.tls_ca = home_expanded(ca->get<std::string>());
    c.tls = true;
  }
  if (auto tls = a.find("tls"); tls != a.end()) {
    if (!tls->is_boolean()) bad(where + ".tls must be true or false");
    if (!tls->get<bool>() && !c.tls_ca.empty()) bad(where + ": tls_ca given with \"tls\": false");
    c.tls = tls->get<bool>();
  }
  // The agent refuses plain TCP beyond loopback; the client does not send trials to one in clear
  // either (a man in the middle would see and alter configurations and results).
  const bool loopback = c.host == "localhost" || c.host == "::1" || c.host.rfind("127.", 0) == 0;
  if (!c.tls && !loopback)
    bad(where + ": the agent at " + c.host + " is not on this machine: set \"tls\": true (with \"tls_ca\" for "
                "its certificate authority); plain TCP is for loopback agents only");
  c.server_name = c.host;
  if (auto sn = a.find("server_name"); sn != a.end()) {
    if (!sn->is_string()) bad(where + ".server_name must be a string");
    c.server_name = sn->get<std::string>();
  }
  return c;
}
}  // namespace

RemoteOptions parse_remote_options(std::string_view json) {
  const nlohmann::json o = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (o.is_discarded() || !o.is_object()) bad("expected a JSON object");
  for (const auto& item : o.items()) {
    static const char* known[] = {"space", "agents", "connect_timeout_ms", "retry_min_ms",
                                  "retry_max_ms", "failover_ms", "keepalive_ms"};
    bool ok = false;
    for (const char* k : known) ok = ok || item.key() == k;
    if (!ok)
      bad("unknown field '" + item.key() + "'" +
          cotune::support::did_you_mean(item.key(), std::vector<std::string>(std::begin(known), std::end(known))));
  }
  RemoteOptions r;
  auto space = o.find("space");
  if (space == o.end() || !space->is_string() || space->get<std::string>().empty())
    bad("'space' must name the search space the agents use (e.g. \"llm\")");
  r.space = space->get<std::string>();
  auto agents = o.find("agents");
  if (agents == o.end() || !agents->is_array() || agents->empty())
    bad("'agents' must be a non-empty list of {\"address\", \"secret_file\", \"capacity\", \"tls_ca\"}");
  for (size_t i = 0; i < agents->size(); ++i) r.agents.push_back(parse_agent((*agents)[i], i));
  for (size_t i = 0; i < r.agents.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (r.agents[i].address == r.agents[j].address) bad("agent '" + r.agents[i].address + "' is listed twice");
  r.connect_timeout_ms = positive_int(o, "connect_timeout_ms", r.connect_timeout_ms);
  r.retry_min_ms = positive_int(o, "retry_min_ms", r.retry_min_ms);
  r.retry_max_ms = positive_int(o, "retry_max_ms", r.retry_max_ms);
  r.failover_ms = positive_int(o, "failover_ms", r.failover_ms);
  r.keepalive_ms = positive_int(o, "keepalive_ms", r.keepalive_ms);
  if (r.retry_max_ms < r.retry_min_ms) bad("'retry_max_ms' must not be below 'retry_min_ms'");
  return r;
}

}  // namespace cotune_remote
