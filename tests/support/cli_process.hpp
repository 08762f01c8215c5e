// Runs the real `cotune` binary from a test: a temporary directory, fork + exec with stdout and
// stderr in files, an optional setup step in the child (resource limits, another user), waiting
// with a deadline, and the store's trials read back through the Store (an SQLite file or a
// PostgreSQL URL).
#ifndef COTUNE_TESTS_SUPPORT_CLI_PROCESS_HPP_
#define COTUNE_TESTS_SUPPORT_CLI_PROCESS_HPP_

#include <cotune/core/store/store.hpp>
#include <cotune/core/store/store_location.hpp>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cotune::testing {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ScratchDir {
 public:
  explicit ScratchDir(const char* tag = "cli") {
    std::string tmpl = std::string("/tmp/cotune-") + tag + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Starts `cotune args...` in `dir`, stdout and stderr to `out_file` and `err_file`. `child_setup`
// runs in the child just before exec (a non-zero return ends the child with status 126).
inline pid_t spawn_cotune(const std::string& dir, const std::vector<std::string>& args, const std::string& out_file,
                          const std::string& err_file, const std::function<int()>& child_setup = {}) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(127);
    int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) ::_exit(127);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::close(out);
    ::close(err);
    if (child_setup && child_setup() != 0) ::_exit(126);
    std::vector<char*> argv;
    std::string exe = COTUNE_CLI;
    argv.push_back(exe.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// The exit status, 128 + signal when a signal ended it.
inline int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

inline int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return exit_code(status);
}

// Waits at most `limit`; a process still running then is killed and -1 returned (a hang).
inline int wait_exit_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return exit_code(status);
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The trials of a study as recorded (empty when the store or the study does not exist yet).
inline std::vector<core::TrialRecord> stored_trials(const std::string& store_path, const std::string& study) {
  if (!core::is_postgres_url(store_path) && !std::filesystem::exists(store_path)) return {};
  core::Store store(store_path);
  auto s = store.find_study(study);
  return s ? store.trials(s->id) : std::vector<core::TrialRecord>{};
}

inline size_t count_finished(const std::vector<core::TrialRecord>& ts) {
  size_t n = 0;
  for (const core::TrialRecord& t : ts) n += core::is_finished(t.status);
  return n;
}

}  // namespace cotune::testing

#endif  // COTUNE_TESTS_SUPPORT_CLI_PROCESS_HPP_
