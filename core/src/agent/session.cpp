#include "agent/session.hpp"

#include <cotune/core/agent/frame.hpp>
#include <cotune/core/studyfile/json_document.hpp>

#include "agent/trial_book.hpp"

namespace cotune::core::agent {
namespace {
constexpr size_t kMaxIdBytes = 256;

// A string field of at most max_len bytes, or nullopt.
std::optional<std::string> string_field(const nlohmann::json& m, const char* field, size_t max_len) {
  auto it = m.find(field);
  if (it == m.end() || !it->is_string()) return std::nullopt;
  const auto& s = it->get_ref<const std::string&>();
  if (s.empty() || s.size() > max_len) return std::nullopt;
  return s;
}
}  // namespace

Session::Session(SessionContext& context, uint64_t id, Send send)
    : context_(context), id_(id), send_(std::move(send)) {}

Session::~Session() {
  if (context_.trials != nullptr) context_.trials->unsubscribe(id_);
}

void Session::reply(nlohmann::json m) {
  m["v"] = kProtocolVersion;
  send_(m);
}

std::optional<std::string> Session::handle(std::string_view body) {
  // A frame is a few levels deep; a deeper one would be dumped and destroyed recursively.
  if (cotune::core::json_nesting_depth(body) > cotune::core::kMaxJsonNesting)
    return "malformed frame: nested deeper than " + std::to_string(cotune::core::kMaxJsonNesting) + " levels";
  const nlohmann::json m = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
  if (m.is_discarded()) return "malformed frame: not JSON";
  if (!m.is_object()) return "malformed frame: not a JSON object";
  auto v = m.find("v");
  if (v == m.end() || !v->is_number_integer()) return "malformed frame: no integer version field 'v'";
  if (v->get<int64_t>() != kProtocolVersion)
    return "unsupported protocol version " + v->dump() + " (this agent speaks " +
           std::to_string(kProtocolVersion) + ")";
  const auto type = string_field(m, "type", 32);
  if (!type) return "malformed frame: no string field 'type'";
  switch (stage_) {
    case Stage::kAwaitHello:
      if (*type != "hello") return "out-of-order frame: expected 'hello', got '" + *type + "'";
      return on_hello(m);
    case Stage::kAwaitAuth:
      if (*type != "auth") return "out-of-order frame: expected 'auth', got '" + *type + "'";
      return on_auth(m);
    case Stage::kReady:
      return on_request(*type, m);
  }
  return "internal error: unknown session stage";
}

std::optional<std::string> Session::on_hello(const nlohmann::json& m) {
  const auto nonce = string_field(m, "client_nonce", 2 * kNonceBytes);
  if (!nonce || !is_nonce(*nonce)) return "malformed hello: 'client_nonce' must be 64 hex digits";
  auto time = m.find("time");
  if (time == m.end() || !time->is_number_integer()) return "malformed hello: 'time' must be an integer";
  client_nonce_ = *nonce;
  client_time_ = time->get<int64_t>();
  const std::string refused = context_.replay.admit(client_nonce_, client_time_, context_.now_s());
  if (!refused.empty()) {
    reply({{"type", "error"}, {"reason", "handshake refused"}});
    return refused;
  }
  agent_nonce_ = random_nonce();
  stage_ = Stage::kAwaitAuth;
  reply({{"type", "challenge"},
         {"agent_nonce", agent_nonce_},
         {"proof", agent_proof(context_.secret, client_nonce_, agent_nonce_)},
         {"agent", context_.agent_name}});
  return std::nullopt;
}

std::optional<std::string> Session::on_auth(const nlohmann::json& m) {
  const auto proof = string_field(m, "proof", 64);
  const std::string expected = client_proof(context_.secret, client_nonce_, agent_nonce_, client_time_);
  if (!proof || !constant_time_equal(*proof, expected)) {
    // Say no more than "refused": the client learns nothing about why.
    reply({{"type", "error"}, {"reason", "authentication failed"}});
    return std::string("authentication failed: wrong client proof (wrong secret or replayed handshake)");
  }
  stage_ = Stage::kReady;
  reply({{"type", "welcome"},
         {"agent", context_.agent_name},
         {"capacity", context_.trials != nullptr ? context_.trials->capacity() : 0}});
  return std::nullopt;
}

std::optional<std::string> Session::on_request(const std::string& type, const nlohmann::json& m) {
  if (type == "ping") {
    reply({{"type", "pong"}});
    return std::nullopt;
  }
  const auto trial_id = string_field(m, "trial_id", kMaxIdBytes);
  if (!trial_id) return "malformed '" + type + "': 'trial_id' must be a string of 1 to 256 bytes";
  TrialBook& book = *context_.trials;
  if (type == "submit") {
    const auto space = string_field(m, "space", 128);
    if (!space) return std::string("malformed 'submit': 'space' must be a non-empty string");
    auto workload = m.find("workload");
    auto config = m.find("config");
    if (workload == m.end() || !workload->is_object())
      return std::string("malformed 'submit': 'workload' must be an object");
    if (config == m.end() || !config->is_object())
      return std::string("malformed 'submit': 'config' must be an object");
    if (context_.shutting_down && !book.subscribe(*trial_id, id_)) {
      reply({{"type", "rejected"}, {"trial_id", *trial_id}, {"reason", "agent is shutting down"}, {"retry", true}});
      return std::nullopt;
    }
    if (!book.has_room_for(*trial_id)) {
      reply({{"type", "rejected"},
             {"trial_id", *trial_id},
             {"reason", "the agent is at its --max-trials (" + std::to_string(book.max_trials()) +
                            " queued, running, or finished and not yet collected); retry once some are collected"},
             {"retry", true}});
      return std::nullopt;
    }
    const std::string refused = book.submit(*trial_id, *space, *workload, *config);
    if (!refused.empty()) {
      reply({{"type", "rejected"}, {"trial_id", *trial_id}, {"reason", refused}, {"retry", false}});
      return std::nullopt;
    }
    reply({{"type", "accepted"}, {"trial_id", *trial_id}});
    if (auto state = book.subscribe(*trial_id, id_)) reply(*state);
    book.tick();
    return std::nullopt;
  }
  if (type == "attach") {
    if (auto state = book.subscribe(*trial_id, id_))
      reply(*state);
    else
      reply({{"type", "unknown"}, {"trial_id", *trial_id}});
    return std::nullopt;
  }
  if (type == "cancel") {
    book.subscribe(*trial_id, id_);
    if (!book.cancel(*trial_id)) {
      if (auto state = book.subscribe(*trial_id, id_))
        reply(*state);
      else
        reply({{"type", "unknown"}, {"trial_id", *trial_id}});
    }
    book.tick();
    return std::nullopt;
  }
  if (type == "ack") {
    book.acknowledge(*trial_id);
    return std::nullopt;
  }
  return "unknown message type '" + type + "'";
}

}  // namespace cotune::core::agent
