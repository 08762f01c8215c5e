// Starts the `cotune` CLI as a child process of a bench program, its output in files.
#ifndef COTUNE_BENCH_SPAWN_COTUNE_HPP_
#define COTUNE_BENCH_SPAWN_COTUNE_HPP_

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace cotune_bench {

// Runs `cotune args...` with stdout in `out` and stderr in `out`.err, in `cwd` when given (a
// database store writes its reports into the working directory). Returns the child's pid.
inline pid_t spawn_cotune(const std::string& cotune, const std::vector<std::string>& args, const std::string& out,
                          const std::string& cwd = "") {
  std::fflush(stdout);  // or the child would print this process's buffered lines again
  pid_t pid = fork();
  if (pid == 0) {
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
    if (!freopen(out.c_str(), "w", stdout) || !freopen((out + ".err").c_str(), "w", stderr)) _exit(127);
    std::vector<std::string> copy = args;
    std::vector<char*> argv{const_cast<char*>(cotune.c_str())};
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(cotune.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace cotune_bench

#endif  // COTUNE_BENCH_SPAWN_COTUNE_HPP_
