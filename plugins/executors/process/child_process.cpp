#include "child_process.hpp"

#include <cotune/cotune.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>
#include <thread>

namespace cotune_process {
namespace {

int open_log(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "cannot open log file '" + path + "': " + std::generic_category().message(errno));
  return fd;
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  long fd = ::syscall(SYS_pidfd_open, pid, 0);
  return fd < 0 ? -1 : static_cast<int>(fd);
#else
  (void)pid;
  return -1;
#endif
}

// In the child between fork and exec: only async-signal-safe calls. Writes errno to `err_fd` and
// exits when exec fails.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, const char* cwd, int out_fd, int err_fd_log,
                             int err_pipe) {
  ::setpgid(0, 0);
  // The job's first process adopts whatever its descendants orphan (kept across exec): a process
  // that leaves the group with setsid and loses its parent stays below the job, where a cancel finds
  // it, instead of moving to init.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2}) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  // sigprocmask, not pthread_sigmask: the forked child has a single thread, and only sigprocmask is on
  // POSIX's list of async-signal-safe functions.
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // NOLINT(concurrency-mt-unsafe): single-threaded child
  int in_fd = ::open("/dev/null", O_RDONLY);
  int step = 0;
  if (in_fd < 0 || ::dup2(in_fd, 0) < 0) step = 1;
  if (step == 0 && (::dup2(out_fd, 1) < 0 || ::dup2(err_fd_log, 2) < 0)) step = 2;
  if (step == 0 && cwd[0] != '\0' && ::chdir(cwd) != 0) step = 3;
  if (step == 0) ::execvpe(argv[0], argv, envp);
  int report[2] = {step == 0 ? 4 : step, errno};
  ssize_t ignored = ::write(err_pipe, report, sizeof report);
  (void)ignored;
  ::_exit(127);
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// The fields of /proc/PID/stat after the command name, which may hold spaces and parentheses.
// A process that ends while its file is read makes the read fail with ESRCH, which libstdc++'s
// filebuf throws as ios_base::failure: it is gone, as if the file had not opened ("").
std::string stat_fields(pid_t pid) {
  std::string stat;
  try {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    stat.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    return "";
  }
  const size_t close = stat.rfind(')');
  return close == std::string::npos ? "" : stat.substr(close + 1);
}

}  // namespace

std::vector<pid_t> descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::istringstream fields(stat_fields(static_cast<pid_t>(std::stol(name))));
    std::string state;
    long ppid = 0;
    if (fields >> state >> ppid) children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(std::stol(name)));
  }
  std::vector<pid_t> out;
  std::vector<pid_t> frontier = {root};  // processes whose children are yet to be read
  while (!frontier.empty()) {
    const pid_t p = frontier.back();
    frontier.pop_back();
    auto [first, last] = children.equal_range(p);
    for (auto it = first; it != last; ++it) {
      out.push_back(it->second);
      frontier.push_back(it->second);
    }
  }
  return out;
}

void signal_tree(pid_t root, int sig) {
  if (root <= 1) return;
  // The descendants first: once the root is gone, its orphans belong to init and are out of reach.
  for (pid_t p : descendants(root)) ::kill(p, sig);
  ::killpg(root, sig);
}

ChildProcess::ChildProcess(const SpawnRequest& request) {
  if (request.argv.empty()) throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "empty command");
  int out_fd = open_log(request.stdout_path);
  int err_fd = -1;
  try {
    err_fd = open_log(request.stderr_path);
  } catch (...) {
    ::close(out_fd);
    throw;
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ::close(out_fd);
    ::close(err_fd);
    throw cotune::Error(COTUNE_ERR_UNAVAILABLE, std::string("pipe: ") + std::generic_category().message(errno));
  }
  // Everything the child touches is prepared before fork: the host may be multi-threaded.
  std::vector<char*> argv = c_strings(request.argv);
  std::vector<char*> envp = c_strings(request.env);
  pid_t pid = ::fork();
  if (pid == 0) exec_child(argv.data(), envp.data(), request.cwd.c_str(), out_fd, err_fd, pipe_fds[1]);
  int fork_errno = errno;
  ::close(out_fd);
  ::close(err_fd);
  ::close(pipe_fds[1]);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    throw cotune::Error(COTUNE_ERR_RESOURCE_EXHAUSTED, std::string("fork: ") + std::generic_category().message(fork_errno));
  }
  ::setpgid(pid, pid);  // also here, so that the group exists before anyone signals it
  pid_ = pid;
  int report[2] = {0, 0};
  ssize_t got;
  do {
    got = ::read(pipe_fds[0], report, sizeof report);
  } while (got < 0 && errno == EINTR);
  ::close(pipe_fds[0]);
  if (got > 0) {  // exec failed: the pipe stayed open long enough to carry the reason
    kill_and_reap();
    static const char* const what[] = {"", "cannot open /dev/null", "cannot redirect output", "cannot enter directory",
                                       "cannot execute"};
    int step = report[0] >= 1 && report[0] <= 4 ? report[0] : 4;
    std::string detail = step == 3 ? " '" + request.cwd + "'" : " '" + request.argv[0] + "'";
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT,
                        std::string(what[step]) + detail + ": " + std::generic_category().message(report[1]));
  }
  pidfd_ = open_pidfd(pid_);
}

ChildProcess::~ChildProcess() {
  if (!reaped_ && pid_ > 0) kill_and_reap();
  if (pidfd_ >= 0) ::close(pidfd_);
}

bool ChildProcess::try_reap() {
  if (reaped_) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    reaped_ = true;
    status_ = r == pid_ ? status : 0;
  }
  return reaped_;
}

void ChildProcess::signal_group(int sig) const {
  if (pid_ <= 0) return;
  // Once reaped, the pid may belong to someone else: only the group (which lives on while any
  // member does) is still the job's.
  if (reaped_) ::killpg(pid_, sig);
  else signal_tree(pid_, sig);
}

void ChildProcess::kill_and_reap() {
  if (reaped_) return;  // once reaped, the group id may one day belong to someone else
  signal_group(SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  reaped_ = true;
  status_ = r == pid_ ? status : 0;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* abbrev = ::sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

std::string process_start_time(pid_t pid) {
  std::istringstream fields(stat_fields(pid));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22) return field;
  return "";
}

bool stop_leftover_group(pid_t pid, const std::string& start_time, int grace_ms) {
  if (pid <= 1 || start_time.empty() || process_start_time(pid) != start_time) return false;
  signal_tree(pid, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (process_start_time(pid) == start_time && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (process_start_time(pid) == start_time) signal_tree(pid, SIGKILL);
  ::killpg(pid, SIGKILL);  // whatever is left of the group
  return true;
}

}  // namespace cotune_process
