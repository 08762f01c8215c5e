#include <cotune/cotune.h>
#include <cotune/core/errors.hpp>
#include <cotune/core/abi/log.hpp>
#include <cotune/core/report/html.hpp>
#include <cotune/core/report/live_server.hpp>
#include <cotune/core/report/study_json.hpp>
#include <cotune/core/report/study_html.hpp>
#include <cotune/core/store/store.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <mutex>
#include <system_error>
#include <vector>

#include "net/accept_backoff.hpp"

namespace cotune::core::report {
namespace {
namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr const char* kStudyPrefix = "/studies/";
constexpr const char* kComparePrefix = "/compare/";  // + a workload key: its studies side by side

// Decodes %XX escapes; nullopt for a malformed escape or an encoded NUL.
std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2])))
      return std::nullopt;
    char c = static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
    if (c == '\0') return std::nullopt;
    out += c;
    i += 2;
  }
  return out;
}

std::string percent_encode(std::string_view s) {
  static const char* const kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else out += {'%', kHex[c >> 4], kHex[c & 15]};
  }
  return out;
}

struct Reply {
  http::status status = http::status::ok;
  std::string body;
  const char* content_type = "text/html; charset=utf-8";
};

constexpr const char* kApiStudies = "/api/studies";

Reply json_reply(http::status status, const nlohmann::json& doc) {
  return {status, doc.dump(2) + "\n", "application/json"};
}

Reply json_error(http::status status, const std::string& text) {
  return json_reply(status, {{"schema_version", kStudyJsonSchemaVersion}, {"error", text}});
}

// ?limit=N in a query string: N (>= 0), the default when absent, -1 when malformed.
std::int64_t query_limit(std::string_view target) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return kDefaultTrialLimit;
  std::string_view query = target.substr(q + 1);
  const size_t at = query.find("limit=");
  if (at == std::string_view::npos || (at > 0 && query[at - 1] != '&')) return kDefaultTrialLimit;
  std::string_view digits = query.substr(at + 6, query.find('&', at) == std::string_view::npos ? std::string_view::npos
                                                                                              : query.find('&', at) - at - 6);
  if (digits.empty() || digits.size() > 9) return -1;
  std::int64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

Reply message_page(http::status status, const std::string& text) {
  std::string title = std::to_string(static_cast<int>(status)) + " " + std::string(http::obsolete_reason(status));
  return {status, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape(title) +
                      "</title></head><body><h1>" + escape(title) + "</h1><p>" + escape(text) +
                      "</p><p><a href=\"/\">all studies</a></p></body></html>\n"};
}

// A token bucket: `rate` requests a second sustained, `burst` at once.
class TokenBucket {
 public:
  TokenBucket(double rate, double burst) : rate_(rate), burst_(burst), tokens_(burst), last_(Clock::now()) {}
  bool take() {
    const Clock::time_point now = Clock::now();
    tokens_ = std::min(burst_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
    last_ = now;
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

 private:
  double rate_, burst_, tokens_;
  Clock::time_point last_;
};

// Read connections to the store, one per rendering thread at most: a Store is used by one thread
// at a time, and SQLite lets separate connections read while a study run writes.
class StorePool {
 public:
  explicit StorePool(std::string path) : path_(std::move(path)) { idle_.push_back(open()); }
  std::unique_ptr<Store> take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<Store> s = std::move(idle_.back());
        idle_.pop_back();
        return s;
      }
    }
    return open();
  }
  void give_back(std::unique_ptr<Store> s) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(s));
  }

 private:
  std::unique_ptr<Store> open() const {
    Store::Options so;
    so.create = false;
    return std::make_unique<Store>(path_, so);
  }
  std::string path_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Store>> idle_;
};

}  // namespace

struct LiveServer::Impl {
  // Declared in the order they may be destroyed: sessions that the io_context still holds count
  // themselves out of open_sessions, and the render pool's threads use the stores until joined.
  LiveServerOptions options;
  StorePool stores;
  std::atomic<int> open_sessions{0};
  Clock::time_point refused_logged{};
  net::AcceptBackoff accept_backoff;
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  asio::steady_timer accept_timer{ioc};
  asio::thread_pool render_pool;

  explicit Impl(const LiveServerOptions& o)
      : options(o), stores(o.store_path), render_pool(static_cast<size_t>(std::max(1, o.render_threads))) {}
  ~Impl() { render_pool.join(); }

  // /api/studies and /api/studies/NAME[?limit=N]: the documents of `cotune show --json`.
  Reply api(Store& store, std::string_view path, std::string_view target) {
    if (path == kApiStudies) return json_reply(http::status::ok, studies_json(store));
    std::optional<std::string> name = percent_decode(path.substr(std::string_view(kApiStudies).size() + 1));
    if (!name || name->empty() || name->find('/') != std::string::npos || !store.find_study(*name))
      return json_error(http::status::not_found, "no such study");
    const std::int64_t limit = query_limit(target);
    if (limit < 0) return json_error(http::status::bad_request, "limit: expected a whole number >= 0 (0: every trial)");
    return json_reply(http::status::ok, study_json(store, *name, limit));
  }

  Reply route(Store& store, std::string_view target) {
    std::string_view path = target.substr(0, target.find_first_of("?#"));
    if (path == kApiStudies || path.rfind(std::string(kApiStudies) + "/", 0) == 0) return api(store, path, target);
    const auto study_link = [](const std::string& n) { return std::string(kStudyPrefix) + percent_encode(n); };
    if (path == "/" || path == "/index.html")
      return {http::status::ok,
              studies_index_html(store, study_link, options.refresh_s,
                                 [](const std::string& key) { return std::string(kComparePrefix) + key; })};
    if (path.rfind(kComparePrefix, 0) == 0) {
      // A workload key is hexadecimal: anything else names no workload.
      const std::string key(path.substr(std::string_view(kComparePrefix).size()));
      const bool hex = !key.empty() && key.size() <= 128 &&
                       std::all_of(key.begin(), key.end(), [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)); });
      if (hex) {
        try {
          return {http::status::ok, workload_comparison_html(store, key, study_link)};
        } catch (const UserError&) {
          return message_page(http::status::not_found, "No study of that workload in this store.");
        }
      }
      return message_page(http::status::not_found, "No such page.");
    }
    if (path.rfind(kStudyPrefix, 0) == 0) {
      std::optional<std::string> name = percent_decode(path.substr(std::string_view(kStudyPrefix).size()));
      // A study name is one path segment: slashes and dot segments name no study.
      if (name && !name->empty() && name->find('/') == std::string::npos && *name != "." && *name != "..") {
        std::optional<StudyRecord> study = store.find_study(*name);
        if (study) {
          HtmlReportOptions ro;
          if (study_being_run(store, *study)) ro.refresh_s = options.refresh_s;
          return {http::status::ok, study_report_html(store, *name, ro)};
        }
        return message_page(http::status::not_found, "No study named '" + *name + "' in this store.");
      }
    }
    return message_page(http::status::not_found, "No such page.");
  }

  // On a rendering thread.
  Reply render(const std::string& target) {
    if (options.on_render) options.on_render(target);
    try {
      std::unique_ptr<Store> store = stores.take();
      Reply r = route(*store, target);
      stores.give_back(std::move(store));
      return r;
    } catch (const std::exception& e) {
      core::log(COTUNE_LOG_WARN, "serve", e.what());
      return message_page(http::status::internal_server_error, e.what());
    }
  }
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, LiveServer::Impl& server)
      : stream_(std::move(socket)), server_(server),
        bucket_(server.options.requests_per_second, server.options.burst) {
    ++server_.open_sessions;
  }
  ~Session() { --server_.open_sessions; }
  void start() { read(); }

 private:
  void read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    stream_.expires_after(std::chrono::milliseconds(static_cast<long>(server_.options.idle_timeout_s * 1000)));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == http::error::header_limit)
      return send(message_page(http::status::request_header_fields_too_large, "Request headers too large."), false, false);
    if (ec == http::error::body_limit)
      return send(message_page(http::status::payload_too_large, "Request body too large."), false, false);
    if (ec) return close();  // end of stream, timeout, malformed request
    const http::request<http::string_body>& req = parser_->get();
    const bool keep_alive = req.keep_alive(), head = req.method() == http::verb::head;
    if (!bucket_.take())
      return send(message_page(http::status::too_many_requests, "Too many requests; slow down."), keep_alive, head);
    if (req.method() != http::verb::get && !head)
      return send(message_page(http::status::method_not_allowed, "This server is read-only: GET and HEAD only."),
                  keep_alive, head);
    if (req.target().empty() || req.target()[0] != '/')
      return send(message_page(http::status::bad_request, "Bad request target."), keep_alive, head);
    // The page is generated on a rendering thread; the reply is written back on this one.
    stream_.expires_never();
    asio::post(server_.render_pool, [self = shared_from_this(), target = std::string(req.target()), keep_alive, head] {
      Reply page = self->server_.render(target);
      asio::post(self->stream_.get_executor(), [self, page = std::move(page), keep_alive, head]() mutable {
        self->send(std::move(page), keep_alive, head);
      });
    });
  }

  void send(Reply page, bool keep_alive, bool head) {
    auto res = std::make_shared<http::response<http::string_body>>(page.status, 11);
    res->set(http::field::server, "cotune");
    res->set(http::field::content_type, page.content_type);
    res->set(http::field::cache_control, "no-store");
    res->set("X-Content-Type-Options", "nosniff");
    // The pages need no script and no external resource: forbid both.
    res->set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:");
    if (page.status == http::status::too_many_requests) res->set(http::field::retry_after, "1");
    if (page.status == http::status::method_not_allowed) res->set(http::field::allow, "GET, HEAD");
    res->keep_alive(keep_alive);
    res->body() = std::move(page.body);
    res->prepare_payload();
    if (head) res->body().clear();  // Content-Length stays that of the GET
    stream_.expires_after(std::chrono::milliseconds(static_cast<long>(server_.options.idle_timeout_s * 1000)));
    http::async_write(stream_, *res, [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
      if (ec || !keep_alive) return self->close();
      self->read();
    });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  }

  beast::tcp_stream stream_;
  LiveServer::Impl& server_;
  TokenBucket bucket_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
};

void accept(LiveServer::Impl& server) {
  server.acceptor.async_accept([&server](beast::error_code ec, tcp::socket socket) {
    if (!server.acceptor.is_open()) return;
    if (ec.value() != 0) {
      // Out of file descriptors (or another lasting failure): wait, then try again. Only the
      // error's number is read: it is an errno from accept(2).
      std::string line;
      server.accept_timer.expires_after(server.accept_backoff.failed(std::system_category().message(ec.value()), &line));
      if (!line.empty()) core::log(COTUNE_LOG_WARN, "serve", line);
      server.accept_timer.async_wait([&server](const beast::error_code&) {
        if (server.acceptor.is_open()) accept(server);
      });
      return;
    }
    server.accept_backoff.succeeded();
    if (server.open_sessions.load() >= server.options.max_connections) {
      const Clock::time_point now = Clock::now();
      if (now - server.refused_logged >= std::chrono::seconds(1)) {
        core::log(COTUNE_LOG_WARN, "serve",
                  "refusing connections: " + std::to_string(server.options.max_connections) + " are open");
        server.refused_logged = now;
      }
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      std::make_shared<Session>(std::move(socket), server)->start();
    }
    accept(server);
  });
}

}  // namespace

LiveServer::LiveServer(const LiveServerOptions& options) : impl_(std::make_unique<Impl>(options)) {
  beast::error_code ec;
  asio::ip::address address = asio::ip::make_address(options.address, ec);
  if (ec) throw UserError("--listen: '" + options.address + "' is not an IP address");
  tcp::endpoint endpoint(address, options.port);
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    throw UserError("--listen: cannot listen on " + options.address + ":" + std::to_string(options.port) + ": " +
                    ec.message());
  if (!address.is_loopback())
    core::log(COTUNE_LOG_WARN, "serve", "listening on " + options.address + ", beyond loopback: anyone who can reach it can read the studies");
}

LiveServer::~LiveServer() = default;

std::uint16_t LiveServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void LiveServer::run() {
  accept(*impl_);
  impl_->ioc.run();
}

void LiveServer::stop() {
  asio::post(impl_->ioc, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
    impl_->accept_timer.cancel();
    impl_->ioc.stop();
  });
}

}  // namespace cotune::core::report
