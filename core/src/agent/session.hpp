// One client connection's protocol state, apart from the transport: takes decoded frame bodies,
// answers through a send callback, and says when the connection must close and why. Keeping it
// free of sockets lets the fuzz harness drive it directly.
#ifndef COTUNE_AGENT_SESSION_HPP_
#define COTUNE_AGENT_SESSION_HPP_

#include <cotune/core/agent/auth.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace cotune::core::agent {

class TrialBook;

// What all sessions of an agent share.
struct SessionContext {
  std::string secret;
  std::string agent_name;
  ReplayGuard replay;
  TrialBook* trials = nullptr;
  bool shutting_down = false;
  std::function<int64_t()> now_s;  // the clock for handshake timestamps
};

class Session {
 public:
  using Send = std::function<void(const nlohmann::json& message)>;
  Session(SessionContext& context, uint64_t id, Send send);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Handles one frame body. Returns the reason to close the connection, or nullopt to go on.
  std::optional<std::string> handle(std::string_view body);
  bool authenticated() const { return stage_ == Stage::kReady; }
  uint64_t id() const { return id_; }

 private:
  enum class Stage { kAwaitHello, kAwaitAuth, kReady };
  std::optional<std::string> on_hello(const nlohmann::json& m);
  std::optional<std::string> on_auth(const nlohmann::json& m);
  std::optional<std::string> on_request(const std::string& type, const nlohmann::json& m);
  void reply(nlohmann::json m);

  SessionContext& context_;
  uint64_t id_;
  Send send_;
  Stage stage_ = Stage::kAwaitHello;
  std::string client_nonce_, agent_nonce_;
  int64_t client_time_ = 0;
};

}  // namespace cotune::core::agent

#endif  // COTUNE_AGENT_SESSION_HPP_
