// One connection to a `cotune agent`: connect (TLS when configured), mutual authentication,
// frame I/O, keepalive, and reconnection with exponential backoff after any failure. Every
// member runs on the executor's I/O thread.
#ifndef COTUNE_REMOTE_AGENT_LINK_HPP_
#define COTUNE_REMOTE_AGENT_LINK_HPP_

#include "remote_options.hpp"
#include "wire.hpp"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace cotune_remote {

class AgentLink {
 public:
  using Clock = std::chrono::steady_clock;
  struct Callbacks {
    std::function<void(AgentLink&)> ready;                              // authenticated
    std::function<void(AgentLink&, const nlohmann::json&)> message;     // after ready
    std::function<void(AgentLink&, const std::string&)> down;           // lost or failed
  };

  AgentLink(boost::asio::io_context& io, AgentConfig config, const RemoteOptions& options, size_t index,
            Callbacks callbacks);
  ~AgentLink();
  AgentLink(const AgentLink&) = delete;
  AgentLink& operator=(const AgentLink&) = delete;

  void start();
  void stop();
  // Queues a message (version added). Dropped, returning false, unless the link is ready.
  bool send(nlohmann::json message);

  bool ready() const { return stage_ == Stage::kReady; }
  const AgentConfig& config() const { return config_; }
  size_t index() const { return index_; }
  // When the link last stopped being ready (or was created, before its first connection).
  Clock::time_point down_since() const { return down_since_; }

 private:
  enum class Stage { kIdle, kConnecting, kAwaitChallenge, kAwaitWelcome, kReady, kStopped };
  using Tls = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;

  void connect();
  void on_connected();
  void read_some();
  void on_frame(const std::string& body);
  void write_raw(std::string frame);
  void write_next();
  // Drops the connection and schedules a retry. `serious` failures (authentication, TLS) are
  // warnings even before the first connection; a refused connect is not.
  void fail(const std::string& why, bool serious = false);
  void schedule_reconnect();
  void arm_keepalive();
  boost::asio::ip::tcp::socket& raw();
  template <class F>
  void with_stream(F&& f) {
    if (tls_)
      f(*tls_);
    else
      f(*socket_);
  }

  boost::asio::io_context& io_;
  AgentConfig config_;
  const RemoteOptions& options_;
  size_t index_;
  Callbacks callbacks_;
  std::optional<boost::asio::ssl::context> tls_context_;
  std::unique_ptr<boost::asio::ip::tcp::socket> socket_;
  std::unique_ptr<Tls> tls_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer connect_timer_, retry_timer_, keepalive_timer_;
  Stage stage_ = Stage::kIdle;
  uint64_t generation_ = 0;  // bumps on every new connection; stale callbacks check it
  int backoff_ms_;
  Clock::time_point down_since_, last_heard_;
  // Failed attempts since the last connection: the first is a warning, and one a minute after it,
  // so that an agent never reached (a wrong port, a host that is down) is not only info lines.
  std::optional<Clock::time_point> failing_since_, warned_at_;
  std::string client_nonce_;
  int64_t client_time_ = 0;
  FrameDecoder decoder_;
  std::array<char, 16384> buffer_{};
  std::deque<std::string> out_;
  bool writing_ = false;
};

}  // namespace cotune_remote

#endif  // COTUNE_REMOTE_AGENT_LINK_HPP_
