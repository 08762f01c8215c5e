// The live view (`cotune serve`): an HTTP server (Boost.Beast) that shows the list of a store's
// studies and each study's report, regenerated from the store on every request and reloading itself
// while the study runs.
//
// Read-only: only GET and HEAD, and it serves no file at all -- every page is generated from the
// store, so no path can reach outside it; anything but "/" and "/studies/<name>" is a 404. Requests
// are size-limited (431/413), idle connections time out, and each connection is rate-limited with a
// token bucket (429), so that one busy client cannot starve another on the same address. Connections
// beyond max_connections are closed at once; when accept() fails (no file descriptor left) the
// server waits before the next and logs at most a line a second. Pages are generated on
// render_threads worker threads, each with its own read connection to the store, so that a large
// report does not hold up the other clients. It listens on loopback unless told otherwise.
#ifndef COTUNE_CORE_REPORT_LIVE_SERVER_HPP_
#define COTUNE_CORE_REPORT_LIVE_SERVER_HPP_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace cotune::core::report {

struct LiveServerOptions {
  std::string store_path = "cotune.db";
  std::string address = "127.0.0.1";
  std::uint16_t port = 8080;         // 0: an ephemeral port (see LiveServer::port)
  std::size_t max_header_bytes = 8192;  // request line and headers
  std::size_t max_body_bytes = 1024;    // a read-only server needs no request body
  double requests_per_second = 10;   // per connection, sustained
  double burst = 30;                 // requests a connection may make at once
  int max_connections = 256;         // open at once; more are closed as they arrive
  int render_threads = 2;            // pages generated at once
  double idle_timeout_s = 15;        // a connection that sends nothing this long is closed
  int refresh_s = 5;                 // how often the page of a running study reloads
  // Called on a rendering thread before each request is answered, with its target (tests use it
  // to hold a page while they check that the server answers others).
  std::function<void(const std::string& target)> on_render;
};

class LiveServer {
 public:
  // Opens the store (which must exist) and binds the address. Throws UserError when either fails.
  explicit LiveServer(const LiveServerOptions& options);
  ~LiveServer();
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  std::uint16_t port() const;  // the bound port
  // Serves until stop() is called (from any thread or a signal handler's thread).
  void run();
  void stop();

  struct Impl;  // the acceptor, the store and the limits (opaque; named by the connection code)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cotune::core::report

#endif  // COTUNE_CORE_REPORT_LIVE_SERVER_HPP_
