#include "slurm_cli.hpp"

#include <cotune/cotune.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <system_error>

extern char** environ;

namespace cotune_slurm {

SlurmCli::SlurmCli(std::string bin_dir, double timeout_s) : bin_dir_(std::move(bin_dir)), timeout_s_(timeout_s) {}

std::string SlurmCli::find(const std::string& program) const {
  if (!bin_dir_.empty()) {
    std::string p = bin_dir_ + "/" + program;
    return ::access(p.c_str(), X_OK) == 0 ? p : "";
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    std::string p = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(p.c_str(), X_OK) == 0) return p;
    start = end + 1;
  }
  return "";
}

CommandOutput SlurmCli::run(const std::string& program, const std::vector<std::string>& args) const {
  std::string path = find(program);
  if (path.empty())
    throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "Slurm is not available: '" + program + "' not found in " +
                                                    (bin_dir_.empty() ? "PATH" : "slurm_bin '" + bin_dir_ + "'") +
                                                    " (install slurm-client, or set the option slurm_bin)");
  ++calls_[program];
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "pipe failed");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all_default;
  sigemptyset(&none);
  sigemptyset(&all_default);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD}) sigaddset(&all_default, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all_default);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv{const_cast<char*>(path.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, path.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "cannot run '" + path + "': " + std::generic_category().message(rc));
  }
  CommandOutput result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    int r = ::poll(fds, 2, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[8192];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (timed_out) result.err += "\n(" + program + " did not answer within the command timeout and was killed)";
  return result;
}

}  // namespace cotune_slurm
