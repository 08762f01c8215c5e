#include "agent_link.hpp"

#include <cotune/cotune.hpp>

#include <ctime>

namespace cotune_remote {
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

namespace {
constexpr const char* kId = "org.cotune.executor.remote";
}

AgentLink::AgentLink(asio::io_context& io, AgentConfig config, const RemoteOptions& options, size_t index,
                     Callbacks callbacks)
    : io_(io), config_(std::move(config)), options_(options), index_(index), callbacks_(std::move(callbacks)),
      resolver_(io), connect_timer_(io), retry_timer_(io), keepalive_timer_(io), backoff_ms_(options.retry_min_ms),
      down_since_(Clock::now()) {
  if (config_.tls) {
    tls_context_.emplace(ssl::context::tls_client);
    tls_context_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                              ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    if (config_.tls_ca.empty())
      tls_context_->set_default_verify_paths(ec);
    else
      tls_context_->load_verify_file(config_.tls_ca, ec);
    if (ec)
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT,
                          "remote executor: agent " + config_.address + ": cannot load tls_ca '" + config_.tls_ca +
                              "': " + ec.message());
    tls_context_->set_verify_mode(ssl::verify_peer);
  }
}

AgentLink::~AgentLink() = default;

tcp::socket& AgentLink::raw() { return tls_? tls_->next_layer() : *socket_; }

void AgentLink::start() { connect(); }

void AgentLink::stop() {
  stage_ = Stage::kStopped;
  ++generation_;
  boost::system::error_code ec;
  resolver_.cancel();
  connect_timer_.cancel();
  retry_timer_.cancel();
  keepalive_timer_.cancel();
  if (socket_ || tls_) raw().close(ec);
}

void AgentLink::connect() {
  if (stage_ == Stage::kStopped) return;
  stage_ = Stage::kConnecting;
  const uint64_t gen = ++generation_;
  tls_.reset();
  socket_ = std::make_unique<tcp::socket>(io_);
  decoder_ = FrameDecoder();
  out_.clear();
  writing_ = false;
  connect_timer_.expires_after(std::chrono::milliseconds(options_.connect_timeout_ms));
  connect_timer_.async_wait([this, gen](const boost::system::error_code& ec) {
    if (ec || gen != generation_ || stage_ == Stage::kReady) return;
    fail("no authenticated connection within " + std::to_string(options_.connect_timeout_ms) + " ms");
  });
  resolver_.async_resolve(config_.host, std::to_string(config_.port),
                          [this, gen](const boost::system::error_code& ec, const tcp::resolver::results_type& results) {
                            if (gen != generation_) return;
                            if (ec) return fail("cannot resolve " + config_.host + ": " + ec.message());
                            asio::async_connect(*socket_, results,
                                                [this, gen](const boost::system::error_code& ec2, const tcp::endpoint&) {
                                                  if (gen != generation_) return;
                                                  if (ec2) return fail("connect failed: " + ec2.message());
                                                  on_connected();
                                                });
                          });
}

void AgentLink::on_connected() {
  const uint64_t gen = generation_;
  boost::system::error_code ignored;
  socket_->set_option(tcp::no_delay(true), ignored);
  auto hello = [this] {
    stage_ = Stage::kAwaitChallenge;
    client_nonce_ = random_nonce();
    client_time_ = static_cast<int64_t>(std::time(nullptr));
    nlohmann::json m{{"v", kProtocolVersion}, {"type", "hello"}, {"client_nonce", client_nonce_}, {"time", client_time_}};
    write_raw(encode_frame(m.dump()));
    read_some();
  };
  if (!tls_context_) return hello();
  tls_ = std::make_unique<Tls>(std::move(*socket_), *tls_context_);
  socket_.reset();
  SSL_set_tlsext_host_name(tls_->native_handle(), config_.server_name.c_str());
  tls_->set_verify_callback(ssl::host_name_verification(config_.server_name));
  tls_->async_handshake(ssl::stream_base::client, [this, gen, hello](const boost::system::error_code& ec) {
    if (gen != generation_) return;
    if (ec) return fail("TLS handshake failed: " + ec.message(), true);
    hello();
  });
}

void AgentLink::read_some() {
  const uint64_t gen = generation_;
  with_stream([&](auto& stream) {
    stream.async_read_some(asio::buffer(buffer_), [this, gen](const boost::system::error_code& ec, size_t n) {
      if (gen != generation_) return;
      if (ec) return fail(ec == asio::error::eof ? "the agent closed the connection" : "read failed: " + ec.message());
      last_heard_ = Clock::now();
      try {
        decoder_.feed(buffer_.data(), n);
        while (gen == generation_) {
          auto body = decoder_.next();
          if (!body) break;
          on_frame(*body);
        }
      } catch (const std::exception& e) {
        return fail(std::string("bad frame from the agent: ") + e.what());
      }
      if (gen == generation_) read_some();
    });
  });
}

void AgentLink::on_frame(const std::string& body) {
  const nlohmann::json m = nlohmann::json::parse(body, nullptr, false);
  if (m.is_discarded() || !m.is_object() || !m.contains("type") || !m["type"].is_string())
    return fail("malformed frame from the agent");
  if (m.value("v", 0) != kProtocolVersion) return fail("the agent speaks another protocol version");
  const std::string type = m["type"].get<std::string>();
  if (type == "error") {
    const std::string reason = m.value("reason", std::string("no reason"));
    if (stage_ != Stage::kReady) return fail("the agent refused the handshake: " + reason, true);
    cotune::log(COTUNE_LOG_WARN, kId, "agent " + config_.address + ": " + reason);
    return;
  }
  switch (stage_) {
    case Stage::kAwaitChallenge: {
      if (type != "challenge") return fail("expected 'challenge' from the agent, got '" + type + "'");
      const std::string agent_nonce = m.value("agent_nonce", std::string());
      const std::string proof = m.value("proof", std::string());
      if (agent_nonce.size() != 64 || agent_nonce == client_nonce_)
        return fail("the agent sent a malformed challenge");
      // The agent must prove it knows the secret before we prove anything to it.
      if (!constant_time_equal(proof, agent_proof(config_.secret, client_nonce_, agent_nonce)))
        return fail("the agent failed to prove it knows the shared secret (wrong secret, or not the agent we expect)", true);
      stage_ = Stage::kAwaitWelcome;
      nlohmann::json reply{{"v", kProtocolVersion}, {"type", "auth"},
                           {"proof", client_proof(config_.secret, client_nonce_, agent_nonce, client_time_)}};
      write_raw(encode_frame(reply.dump()));
      return;
    }
    case Stage::kAwaitWelcome:
      if (type != "welcome") return fail("expected 'welcome' from the agent, got '" + type + "'");
      stage_ = Stage::kReady;
      backoff_ms_ = options_.retry_min_ms;
      connect_timer_.cancel();
      cotune::log(COTUNE_LOG_INFO, kId, "connected to agent " + config_.address);
      failing_since_.reset();
      warned_at_.reset();
      arm_keepalive();
      if (callbacks_.ready) callbacks_.ready(*this);
      return;
    case Stage::kReady:
      if (callbacks_.message) callbacks_.message(*this, m);
      return;
    default:
      return;
  }
}

bool AgentLink::send(nlohmann::json message) {
  if (stage_ != Stage::kReady) return false;
  message["v"] = kProtocolVersion;
  write_raw(encode_frame(message.dump()));
  return true;
}

void AgentLink::write_raw(std::string frame) {
  out_.push_back(std::move(frame));
  if (!writing_) write_next();
}

void AgentLink::write_next() {
  if (out_.empty()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  const uint64_t gen = generation_;
  with_stream([&](auto& stream) {
    asio::async_write(stream, asio::buffer(out_.front()), [this, gen](const boost::system::error_code& ec, size_t) {
      if (gen != generation_) return;
      if (ec) return fail("write failed: " + ec.message());
      out_.pop_front();
      write_next();
    });
  });
}

void AgentLink::arm_keepalive() {
  const uint64_t gen = generation_;
  keepalive_timer_.expires_after(std::chrono::milliseconds(options_.keepalive_ms));
  keepalive_timer_.async_wait([this, gen](const boost::system::error_code& ec) {
    if (ec || gen != generation_ || stage_ != Stage::kReady) return;
    if (Clock::now() - last_heard_ > std::chrono::milliseconds(3 * options_.keepalive_ms))
      return fail("the agent has been silent for " + std::to_string(3 * options_.keepalive_ms) + " ms");
    send({{"type", "ping"}});
    arm_keepalive();
  });
}

void AgentLink::fail(const std::string& why, bool serious) {
  if (stage_ == Stage::kStopped) return;
  const bool was_ready = stage_ == Stage::kReady;
  ++generation_;
  boost::system::error_code ec;
  connect_timer_.cancel();
  keepalive_timer_.cancel();
  resolver_.cancel();
  if (socket_ || tls_) raw().close(ec);
  stage_ = Stage::kIdle;
  const Clock::time_point now = Clock::now();
  if (was_ready) down_since_ = now;
  if (!failing_since_) failing_since_ = now;
  const bool remind = !warned_at_ || now - *warned_at_ >= std::chrono::minutes(1);
  if (was_ready || serious || remind) warned_at_ = now;
  const auto failing_s = std::chrono::duration_cast<std::chrono::seconds>(now - *failing_since_).count();
  cotune::log(was_ready || serious || remind ? COTUNE_LOG_WARN : COTUNE_LOG_INFO, kId,
              "agent " + config_.address + ": " + why +
                  (failing_s > 0 ? " (not connected for " + std::to_string(failing_s) + " s)" : std::string()) +
                  "; retrying in " + std::to_string(backoff_ms_) + " ms");
  if (callbacks_.down) callbacks_.down(*this, why);
  schedule_reconnect();
}

void AgentLink::schedule_reconnect() {
  const uint64_t gen = generation_;
  retry_timer_.expires_after(std::chrono::milliseconds(backoff_ms_));
  backoff_ms_ = std::min(options_.retry_max_ms, backoff_ms_ * 2);
  retry_timer_.async_wait([this, gen](const boost::system::error_code& ec) {
    if (ec || gen != generation_) return;
    connect();
  });
}

}  // namespace cotune_remote
