// A child process in a process group of its own, so that a timeout or a cancel can signal the job
// and everything it started (killpg, and the processes below it that left the group: the child
// adopts their orphans as a subreaper), with stdout and stderr going to files. Plain POSIX: fork,
// setpgid, execvpe, waitpid; a pidfd (when the kernel has one) lets the owner sleep until it exits.
#ifndef COTUNE_EXECUTOR_CHILD_PROCESS_HPP_
#define COTUNE_EXECUTOR_CHILD_PROCESS_HPP_

#include <sys/types.h>

#include <string>
#include <vector>

namespace cotune_process {

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  std::vector<std::string> env;   // the whole environment, "NAME=value"
  std::string cwd;
  std::string stdout_path, stderr_path;
};

class ChildProcess {
 public:
  // Starts the process. Throws cotune::Error when it cannot be started (the message says why:
  // program not found, not executable, log file not writable).
  explicit ChildProcess(const SpawnRequest& request);
  // Kills the group and reaps the child if it is still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // A descriptor that becomes readable when the child exits, or -1 when the kernel has none.
  int exit_fd() const { return pidfd_; }

  // Reaps the child without blocking; true once it has exited (status() then holds its wait status).
  bool try_reap();
  bool exited() const { return reaped_; }
  int status() const { return status_; }

  // Sends a signal to the child's process group and to every process below the child, those that
  // left the group with setsid included (harmless when they are gone).
  void signal_group(int sig) const;

  // Kills the group and the processes below the child with SIGKILL and waits for the child.
  void kill_and_reap();

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// The start time of a process (field 22 of /proc/PID/stat, clock ticks since boot), which tells a
// process apart from a later one given the same pid; "" when there is no such process.
std::string process_start_time(pid_t pid);

// A trial process that an earlier host started and that outlived it (the host was killed): when the
// process `pid` still runs and started at `start_time`, its process group is sent SIGTERM, then
// SIGKILL after `grace_ms`. Returns true when it had to be stopped.
bool stop_leftover_group(pid_t pid, const std::string& start_time, int grace_ms);

// The processes below `root` (children, their children, ...), read from /proc.
std::vector<pid_t> descendants(pid_t root);

// Sends `sig` to every process below `root`, then to root's process group.
void signal_tree(pid_t root, int sig);

// "exit code 3", "killed by signal 9 (KILL)".
std::string describe_wait_status(int status);

}  // namespace cotune_process

#endif  // COTUNE_EXECUTOR_CHILD_PROCESS_HPP_
