// Helpers for the remote-execution tests: temporary directories and secret files, an agent run
// in-process or as the real `cotune agent` binary, and a raw protocol client that speaks frames
// by hand (to test what a well-behaved client never sends).
#ifndef COTUNE_TESTS_SUPPORT_AGENT_HARNESS_HPP_
#define COTUNE_TESTS_SUPPORT_AGENT_HARNESS_HPP_

#include <cotune/core/agent/agent.hpp>
#include <cotune/core/agent/auth.hpp>
#include <cotune/core/agent/frame.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <mutex>
#include <optional>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cotune::testing {

inline const std::string kTestPluginDir = std::string(COTUNE_BINARY_DIR) + "/lib/cotune/test-plugins";
inline const std::string kSecret = "0123456789abcdef0123456789abcdef";

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/cotune-remote-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string write_file(const std::string& path, const std::string& content, mode_t mode = 0600) {
  { std::ofstream(path, std::ios::trunc) << content; }
  ::chmod(path.c_str(), mode);
  return path;
}

inline size_t count_lines(const std::string& path, const std::string& line) {
  std::ifstream in(path);
  size_t n = 0;
  for (std::string l; std::getline(in, l);) n += l == line ? 1 : 0;
  return n;
}

template <class F>
bool wait_until(F&& done, int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// Options for an agent on 127.0.0.1 running the testecho fixture executor.
inline core::agent::AgentOptions echo_agent_options(const std::string& secret_file, const std::string& echo_options) {
  core::agent::AgentOptions o;
  o.listen_host = "127.0.0.1";
  o.listen_port = 0;
  o.secret_file = secret_file;
  o.executor = "testecho";
  o.executor_options = echo_options;
  o.plugin_dirs = {kTestPluginDir};
  o.max_parallel = 2;
  o.shutdown_drain_ms = 200;
  // Trial folders beside the secret, in the test's scratch directory: the agent's default (a fresh
  // folder under /tmp) keeps the folders of unacknowledged results, which tests leave behind.
  const size_t slash = secret_file.rfind('/');
  o.workdir = (slash == std::string::npos ? std::string(".") : secret_file.substr(0, slash)) + "/agent-work";
  return o;
}

// An agent served by a thread of this process; its log lines are kept.
class InProcessAgent {
 public:
  explicit InProcessAgent(core::agent::AgentOptions o) {
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      log_.push_back(line);
    };
    server_ = std::make_unique<core::agent::AgentServer>(std::move(o));
    thread_ = std::thread([this] { server_->run(); });
  }
  ~InProcessAgent() { stop(); }
  void stop() {
    if (!thread_.joinable()) return;
    server_->shutdown();
    thread_.join();
  }
  uint16_t port() const { return server_->port(); }
  core::agent::AgentServer& server() { return *server_; }
  bool logged(const std::string& needle) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& l : log_)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
  std::string log_text() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const auto& l : log_) all += l + "\n";
    return all;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> log_;
  std::unique_ptr<core::agent::AgentServer> server_;
  std::thread thread_;
};

// The real `cotune agent` binary, started with `args`; learns its port from its first line.
class AgentProcess {
 public:
  // `child_setup` runs in the child just before exec (resource limits, say).
  explicit AgentProcess(const std::vector<std::string>& args, const std::string& log_file,
                        const std::function<void()>& child_setup = {}) {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      const int err = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      if (err >= 0) ::dup2(err, 2);
      ::close(out[0]);
      if (child_setup) child_setup();
      std::vector<char*> argv;
      std::string cli = COTUNE_CLI, cmd = "agent";
      argv.push_back(cli.data());
      argv.push_back(cmd.data());
      std::vector<std::string> copy = args;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(cli.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    std::string line;
    char c;
    pollfd p{out[0], POLLIN, 0};
    while (::poll(&p, 1, 20000) > 0 && ::read(out[0], &c, 1) == 1 && c != '\n') line.push_back(c);
    ::close(out[0]);
    const std::string prefix = "listening on port ";
    if (line.rfind(prefix, 0) != 0) throw std::runtime_error("cotune agent did not start: '" + line + "'");
    port_ = static_cast<uint16_t>(std::stoi(line.substr(prefix.size())));
  }
  ~AgentProcess() {
    if (pid_ > 0) kill(SIGKILL), wait();
  }
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  void kill(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // The exit status (or 128 + signal).
  int wait() {
    int status = 0;
    if (pid_ <= 0) return -1;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

// A hand-driven protocol client over plain TCP.
class RawClient {
 public:
  explicit RawClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("connect failed");
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~RawClient() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool send_bytes(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  bool send(nlohmann::json m) {
    if (!m.contains("v")) m["v"] = core::agent::kProtocolVersion;
    return send_bytes(core::agent::encode_frame(m.dump()));
  }
  // The next frame, or nullopt on timeout or when the agent closed the connection.
  std::optional<nlohmann::json> read(int timeout_ms = 5000) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (auto body = decoder_.next()) return nlohmann::json::parse(*body);
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      if (left <= 0 || closed_) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) return std::nullopt;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        return std::nullopt;
      }
      decoder_.feed(buf, static_cast<size_t>(n));
    }
  }
  // Reads until a frame of `type` arrives (others are skipped); nullopt on close or timeout.
  std::optional<nlohmann::json> read_type(const std::string& type, int timeout_ms = 5000) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < until) {
      auto m = read(static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count()));
      if (!m) return std::nullopt;
      if ((*m)["type"] == type) return m;
    }
    return std::nullopt;
  }
  // True once the agent has closed the connection (reads and drops frames until then).
  bool closed_by_agent(int timeout_ms = 5000) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!closed_ && std::chrono::steady_clock::now() < until) read(50);
    return closed_;
  }

  // The frames of a handshake, so tests can replay or tamper with them.
  struct Handshake {
    nlohmann::json hello, auth;
    bool welcomed = false;
  };
  Handshake handshake(const std::string& secret, int64_t time = static_cast<int64_t>(std::time(nullptr))) {
    Handshake h;
    const std::string nonce = core::agent::random_nonce();
    h.hello = {{"v", 1}, {"type", "hello"}, {"client_nonce", nonce}, {"time", time}};
    send(h.hello);
    auto challenge = read();
    if (!challenge || (*challenge)["type"] != "challenge") return h;
    const std::string agent_nonce = (*challenge)["agent_nonce"];
    h.auth = {{"v", 1}, {"type", "auth"}, {"proof", core::agent::client_proof(secret, nonce, agent_nonce, time)}};
    send(h.auth);
    auto welcome = read();
    h.welcomed = welcome && (*welcome)["type"] == "welcome";
    return h;
  }

 private:
  int fd_ = -1;
  bool closed_ = false;
  core::agent::FrameDecoder decoder_{size_t{64} << 20};
};

inline nlohmann::json grid_config(int a = 1, int b = 0, const std::string& c = "red", bool d = false, int e = 1) {
  return {{"a", a}, {"b", b}, {"c", c}, {"d", d}, {"e", e}};
}

inline nlohmann::json submit_message(const std::string& id, const nlohmann::json& config) {
  return {{"type", "submit"}, {"trial_id", id}, {"space", "testgrid"}, {"workload", nlohmann::json::object()}, {"config", config}};
}

}  // namespace cotune::testing

#endif  // COTUNE_TESTS_SUPPORT_AGENT_HARNESS_HPP_
