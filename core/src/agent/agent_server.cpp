#include <cotune/core/agent/agent.hpp>
#include <cotune/core/agent/auth.hpp>
#include <cotune/core/agent/frame.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/abi/log.hpp>
#include <cotune/core/registry.hpp>

#include "agent/session.hpp"
#include "agent/trial_book.hpp"
#include "net/accept_backoff.hpp"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/filesystem.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <optional>
#include <system_error>

namespace cotune::core::agent {
namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {
constexpr size_t kMaxQueuedOutputBytes = size_t{64} << 20;
constexpr auto kTickInterval = std::chrono::milliseconds(2);
}  // namespace

class Connection;

struct AgentServer::Impl {
  explicit Impl(AgentOptions o) : opt(std::move(o)) {}

  AgentOptions opt;
  asio::io_context io;
  std::optional<ssl::context> tls;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_timer{io};
  net::AcceptBackoff accept_backoff;
  Registry registry;
  std::unique_ptr<TrialBook> book;
  std::string temporary_workdir;  // the agent made it (no --workdir)
  SessionContext context;
  std::map<uint64_t, std::weak_ptr<Connection>> connections;
  std::atomic<size_t> open_connections{0};
  uint64_t next_id = 1;
  asio::steady_timer tick_timer{io};
  bool ticking = false;
  bool stopping = false;
  asio::steady_timer drain_timer{io};
  Clock::time_point drain_started;
  bool draining = false;
  asio::signal_set signals{io};

  // One line per event: control characters from a client (a trial id with a newline, say) are
  // written as \xNN, so no client can forge or split a line of the log.
  void log(const std::string& text) const {
    std::string line;
    for (unsigned char ch : text) {
      if (ch >= 0x20 && ch != 0x7f) {
        line += static_cast<char>(ch);
      } else {
        static const char* const hex = "0123456789abcdef";
        line += std::string("\\x") + hex[ch >> 4] + hex[ch & 15];
      }
    }
    if (opt.log) {
      opt.log(line);
      return;
    }
    core::log(COTUNE_LOG_INFO, "agent", line);
  }
  void accept();
  void schedule_tick();
  void deliver(uint64_t connection, const nlohmann::json& message);
  void begin_shutdown();
  void drain();
};

// Before a client has signed in it sends a hello and an auth of a few hundred bytes: larger frames
// are refused then, so that unauthenticated connections cannot hold a megabyte each.
constexpr size_t kMaxFrameBytesBeforeSignIn = size_t{16} * 1024;

// One client connection: TLS (optional), framing, deadlines and the rate limit around a Session.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(AgentServer::Impl& server, tcp::socket socket, uint64_t id)
      : server_(server), socket_(std::move(socket)), id_(id),
        decoder_(std::min(server.opt.max_frame_bytes, kMaxFrameBytesBeforeSignIn)),
        deadline_(server.io), tokens_(server.opt.rate_burst), refilled_(Clock::now()) {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? "?" : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  void start() {
    auto self = shared_from_this();
    boost::system::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);  // replies are small frames: no Nagle delay
    session_.emplace(server_.context, id_, [this](const nlohmann::json& m) { send(m); });
    handshake_deadline_ = Clock::now() + std::chrono::milliseconds(server_.opt.handshake_timeout_ms);
    arm_deadline();
    if (server_.tls) {
      tls_.emplace(std::move(socket_), *server_.tls);
      tls_->async_handshake(ssl::stream_base::server, [this, self](const boost::system::error_code& ec) {
        if (ec) return close("TLS handshake failed: " + ec.message());
        read_some();
      });
    } else {
      read_some();
    }
  }

  void send(const nlohmann::json& m) {
    if (closed_) return;
    std::string frame = encode_frame(m.dump());
    queued_bytes_ += frame.size();
    out_.push_back(std::move(frame));
    if (queued_bytes_ > kMaxQueuedOutputBytes) return close("client does not read its replies");
    if (!writing_) write_next();
  }

  // Closes once the queued replies (an error message, say) are written.
  void close_after_flush(const std::string& reason) {
    if (closed_ || closing_) return;
    closing_ = true;
    close_reason_ = reason;
    if (!writing_) close(reason);
  }

  void close(const std::string& reason) {
    if (closed_) return;
    closed_ = true;
    server_.log("connection #" + std::to_string(id_) + " from " + peer_ + " closed: " + reason);
    boost::system::error_code ec;
    deadline_.cancel();
    raw().shutdown(tcp::socket::shutdown_both, ec);
    raw().close(ec);
    session_.reset();  // unsubscribes from its trials; their results stay held
    server_.connections.erase(id_);
    --server_.open_connections;
  }

  bool closed() const { return closed_; }

 private:
  tcp::socket& raw() { return tls_ ? tls_->next_layer() : socket_; }

  template <class F>
  void with_stream(F&& f) {
    if (tls_)
      f(*tls_);
    else
      f(socket_);
  }

  void read_some() {
    if (closed_) return;
    auto self = shared_from_this();
    with_stream([&](auto& stream) {
      stream.async_read_some(asio::buffer(buffer_), [this, self](const boost::system::error_code& ec, size_t n) {
        on_read(ec, n);
      });
    });
  }

  void on_read(const boost::system::error_code& ec, size_t n) {
    if (closed_) return;
    if (ec) return close(ec == asio::error::eof ? "client closed the connection" : "read failed: " + ec.message());
    const bool was_mid_frame = decoder_.mid_frame();
    try {
      decoder_.feed(buffer_.data(), n);
      while (!closed_ && !closing_) {
        std::optional<std::string> body = decoder_.next();
        if (!body) break;
        if (!take_token()) return close_after_flush("rate limit exceeded (" + std::to_string(server_.opt.rate_per_s) + " frames/s)");
        if (auto reason = session_->handle(*body)) return close_after_flush(*reason);
        if (session_->authenticated()) decoder_.set_limit(server_.opt.max_frame_bytes);
        server_.schedule_tick();
      }
    } catch (const FrameError& e) {
      return close(std::string("bad frame: ") + e.what());
    } catch (const std::exception& e) {
      return close(std::string("error handling a frame: ") + e.what());
    }
    if (closed_ || closing_) return;
    if (decoder_.mid_frame() && !was_mid_frame) frame_started_ = Clock::now();
    arm_deadline();
    read_some();
  }

  bool take_token() {
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - refilled_).count();
    refilled_ = now;
    tokens_ = std::min(server_.opt.rate_burst, tokens_ + elapsed * server_.opt.rate_per_s);
    if (tokens_ < 1.0) return false;
    tokens_ -= 1.0;
    return true;
  }

  // Before authentication, the whole handshake has one deadline (so a slow client cannot hold a
  // connection open); after it, a started frame must finish in frame_timeout and an idle
  // connection is closed after idle_timeout.
  void arm_deadline() {
    Clock::time_point at;
    std::string why;
    if (!session_ || !session_->authenticated()) {
      at = handshake_deadline_;
      why = "handshake not completed in " + std::to_string(server_.opt.handshake_timeout_ms) + " ms";
    } else if (decoder_.mid_frame()) {
      at = frame_started_ + std::chrono::milliseconds(server_.opt.frame_timeout_ms);
      why = "frame not completed in " + std::to_string(server_.opt.frame_timeout_ms) + " ms";
    } else {
      at = Clock::now() + std::chrono::milliseconds(server_.opt.idle_timeout_ms);
      why = "idle for " + std::to_string(server_.opt.idle_timeout_ms) + " ms";
    }
    deadline_reason_ = why;
    deadline_.expires_at(at);
    auto self = shared_from_this();
    deadline_.async_wait([this, self](const boost::system::error_code& ec) {
      if (ec || closed_) return;
      if (Clock::now() >= deadline_.expiry()) close("timeout: " + deadline_reason_);
    });
  }

  void write_next() {
    if (closed_) return;
    if (out_.empty()) {
      writing_ = false;
      if (closing_) close(close_reason_);
      return;
    }
    writing_ = true;
    auto self = shared_from_this();
    with_stream([&](auto& stream) {
      asio::async_write(stream, asio::buffer(out_.front()), [this, self](const boost::system::error_code& ec, size_t) {
        if (closed_) return;
        if (ec) return close("write failed: " + ec.message());
        queued_bytes_ -= out_.front().size();
        out_.pop_front();
        write_next();
      });
    });
  }

  AgentServer::Impl& server_;
  tcp::socket socket_;
  std::optional<ssl::stream<tcp::socket>> tls_;
  uint64_t id_;
  std::string peer_;
  std::optional<Session> session_;
  FrameDecoder decoder_;
  std::array<char, 16384> buffer_{};
  asio::steady_timer deadline_;
  std::string deadline_reason_;
  Clock::time_point handshake_deadline_, frame_started_;
  double tokens_;
  Clock::time_point refilled_;
  std::deque<std::string> out_;
  size_t queued_bytes_ = 0;
  bool writing_ = false, closing_ = false, closed_ = false;
  std::string close_reason_;
};

void AgentServer::Impl::accept() {
  acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (stopping || !acceptor.is_open()) return;
    if (ec.value() == 0) {
      if (open_connections.load() >= static_cast<size_t>(opt.max_connections)) {
        log("refusing a connection: " + std::to_string(opt.max_connections) + " connections are open");
        boost::system::error_code ignored;
        socket.close(ignored);
      } else {
        const uint64_t id = next_id++;
        auto c = std::make_shared<Connection>(*this, std::move(socket), id);
        connections[id] = c;
        ++open_connections;
        c->start();
      }
      accept_backoff.succeeded();
    } else {
      // Out of file descriptors (or another lasting failure): wait, then try again. Only the
      // error's number is read: it is an errno from accept(2).
      std::string line;
      accept_timer.expires_after(accept_backoff.failed(std::system_category().message(ec.value()), &line));
      if (!line.empty()) log(line);
      accept_timer.async_wait([this](const boost::system::error_code&) {
        if (!stopping && acceptor.is_open()) accept();
      });
      return;
    }
    accept();
  });
}

void AgentServer::Impl::schedule_tick() {
  if (ticking || book->active() == 0) return;
  ticking = true;
  tick_timer.expires_after(kTickInterval);
  tick_timer.async_wait([this](const boost::system::error_code& ec) {
    ticking = false;
    if (ec) return;
    book->tick();
    schedule_tick();
  });
}

void AgentServer::Impl::deliver(uint64_t connection, const nlohmann::json& message) {
  auto it = connections.find(connection);
  if (it == connections.end()) return;
  if (auto c = it->second.lock()) c->send(message);
}

void AgentServer::Impl::begin_shutdown() {
  if (stopping) return;
  stopping = true;
  context.shutting_down = true;
  boost::system::error_code ec;
  acceptor.close(ec);
  accept_timer.cancel();
  signals.cancel(ec);
  log(std::string("shutting down: ") + std::to_string(book->active()) + " trial(s) in flight will be " +
      (opt.cancel_on_shutdown ? "cancelled" : "finished"));
  if (opt.cancel_on_shutdown) book->cancel_all();
  book->tick();
  drain();
}

// Waits for the trials in flight, then gives clients shutdown_drain_ms to acknowledge results,
// then closes everything and stops the loop.
void AgentServer::Impl::drain() {
  if (book->active() == 0 && !draining) {
    draining = true;
    drain_started = Clock::now();
  }
  const bool done = draining && (book->held() == 0 ||
                                 Clock::now() - drain_started >= std::chrono::milliseconds(opt.shutdown_drain_ms));
  if (done) {
    if (book->held() > 0)
      log(std::to_string(book->held()) + " unacknowledged result(s) " +
          (opt.state_dir.empty() ? "are lost (no --state-dir)" : "stay in " + opt.state_dir));
    std::vector<std::shared_ptr<Connection>> open;
    for (auto& [id, weak] : connections)
      if (auto c = weak.lock()) open.push_back(c);
    for (auto& c : open) c->close("agent shut down");
    io.stop();
    return;
  }
  book->tick();
  drain_timer.expires_after(std::chrono::milliseconds(10));
  drain_timer.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) drain();
  });
}

AgentServer::AgentServer(AgentOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  const AgentOptions& o = s.opt;
  if (o.secret_file.empty()) throw UserError("--secret-file is required");
  s.context.secret = load_secret_file(o.secret_file);
  if (o.max_parallel < 1) throw UserError("--max-parallel must be at least 1, got " + std::to_string(o.max_parallel));
  if (o.tls_cert.empty() != o.tls_key.empty()) throw UserError("--tls-cert and --tls-key go together");
  if (o.max_frame_bytes < 1024) throw UserError("the frame size limit must be at least 1024 bytes");
  if (o.rate_per_s <= 0 || o.rate_burst < 1) throw UserError("the rate limit must be positive");

  // The address first: a non-loopback address without TLS is refused before anything is loaded.
  boost::system::error_code ec;
  tcp::resolver resolver(s.io);
  auto endpoints = resolver.resolve(o.listen_host, std::to_string(o.listen_port), ec);
  if (ec || endpoints.empty())
    throw UserError("--listen: cannot resolve host '" + o.listen_host + "': " + ec.message());
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  if (!endpoint.address().is_loopback() && o.tls_cert.empty())
    throw UserError("--listen " + o.listen_host + ": a non-loopback address requires TLS (--tls-cert and --tls-key)");

  if (!o.tls_cert.empty()) {
    s.tls.emplace(ssl::context::tls_server);
    s.tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    s.tls->use_certificate_chain_file(o.tls_cert, ec);
    if (ec) throw UserError("--tls-cert '" + o.tls_cert + "': " + ec.message());
    s.tls->use_private_key_file(o.tls_key, ssl::context::pem, ec);
    if (ec) throw UserError("--tls-key '" + o.tls_key + "': " + ec.message());
  }

  const nlohmann::json executor_options = nlohmann::json::parse(o.executor_options, nullptr, false);
  if (executor_options.is_discarded() || !executor_options.is_object())
    throw UserError("--executor-options must be a JSON object, got: " + o.executor_options);
  s.registry.load_default();
  s.registry.load_directories(o.plugin_dirs);
  for (const std::string& dir : o.plugin_dirs) s.registry.note_missing_directory(dir, "--plugin-dir");
  auto executor = s.registry.make_executor(o.executor, o.executor_options);

  TrialBook::Options book_options;
  book_options.max_parallel = o.max_parallel;
  book_options.state_dir = o.state_dir;
  book_options.workdir = o.workdir;
  book_options.max_trials = o.max_trials;
  book_options.keep_trial_dirs = o.keep_trial_dirs;
  if (book_options.workdir.empty()) {
    const auto dir = boost::filesystem::temp_directory_path() /
                     boost::filesystem::unique_path("cotune-agent-%%%%%%%%");
    boost::filesystem::create_directories(dir);
    book_options.workdir = dir.string();
    s.temporary_workdir = book_options.workdir;
  }
  s.book = std::make_unique<TrialBook>(s.registry, std::move(executor), book_options,
                                       [this](const std::string& line) { impl_->log(line); });
  s.book->set_notify([this](uint64_t c, const nlohmann::json& m) { impl_->deliver(c, m); });
  s.context.trials = s.book.get();
  s.context.agent_name = boost::asio::ip::host_name();
  s.context.now_s = [] { return static_cast<int64_t>(std::time(nullptr)); };

  s.acceptor.open(endpoint.protocol());
  s.acceptor.set_option(tcp::acceptor::reuse_address(true));
  s.acceptor.bind(endpoint, ec);
  if (ec) throw UserError("--listen " + o.listen_host + ":" + std::to_string(o.listen_port) + ": " + ec.message());
  s.acceptor.listen(asio::socket_base::max_listen_connections);
  // The executor's own capacity caps --max-parallel (the process executor runs its option
  // "parallel" trials at once, 1 unless told): say the figure that holds, and why.
  const int parallel = s.book->capacity();
  const std::string capped = parallel < o.max_parallel ? " (--max-parallel " + std::to_string(o.max_parallel) +
                                                             " is capped by the executor's capacity; its options may raise it)"
                                                       : "";
  s.log("listening on " + endpoint.address().to_string() + ":" + std::to_string(port()) +
        (s.tls ? " (TLS)" : " (plain TCP, loopback)") + ", executor '" + o.executor + "', max parallel " +
        std::to_string(parallel) + capped + ", trial directories under " + book_options.workdir);
}

// A throw here (out of memory, or from the log callback) ends the program through std::terminate, as
// it should: a connection left open would outlive the Impl it refers to.
AgentServer::~AgentServer() {  // NOLINT(bugprone-exception-escape): see above
  // Connections hold references into Impl: close them before it goes.
  if (impl_) {
    std::vector<std::shared_ptr<Connection>> open;
    for (auto& [id, weak] : impl_->connections)
      if (auto c = weak.lock()) open.push_back(c);
    for (auto& c : open) c->close("agent destroyed");
    // The temporary parent of the trial directories goes with the agent when nothing is left in
    // it (the directories of unacknowledged results stay).
    if (!impl_->temporary_workdir.empty()) {
      impl_->book.reset();
      boost::system::error_code ec;
      boost::filesystem::remove(impl_->temporary_workdir, ec);  // only when empty
    }
  }
}

uint16_t AgentServer::port() const {
  boost::system::error_code ec;
  auto ep = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : ep.port();
}

void AgentServer::run(bool handle_signals) {
  Impl& s = *impl_;
  if (handle_signals) {
    s.signals.add(SIGTERM);
    s.signals.add(SIGINT);
    s.signals.async_wait([this](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      impl_->log(std::string("received ") + (signo == SIGTERM ? "SIGTERM" : "SIGINT"));
      impl_->begin_shutdown();
    });
  }
  s.accept();
  s.book->tick();
  s.schedule_tick();
  s.io.run();
}

void AgentServer::shutdown() {
  asio::post(impl_->io, [this] { impl_->begin_shutdown(); });
}

size_t AgentServer::connections() const { return impl_->open_connections.load(); }

}  // namespace cotune::core::agent
