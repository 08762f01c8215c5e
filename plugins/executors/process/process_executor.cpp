#include "process_executor.hpp"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>


extern char** environ;

namespace cotune_process {
namespace {

// How long a leftover trial process of an earlier run has between SIGTERM and SIGKILL.
constexpr int kLeftoverGraceMs = 3000;

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// The host's environment without the variables each trial sets itself.
std::vector<std::string> inherited_environment(bool drop_cuda_devices) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    if (kv.rfind("COTUNE_PARAM_", 0) == 0 || kv.rfind("COTUNE_TRIAL_", 0) == 0 ||
        kv.rfind("COTUNE_RESULT_FILE=", 0) == 0 || kv.rfind("COTUNE_WORKDIR=", 0) == 0)
      continue;
    if (drop_cuda_devices && kv.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0) continue;
    env.emplace_back(kv);
  }
  return env;
}

// Directory-safe form of a trial id ("study/17" -> "study_17").
std::string file_part(const std::string& id) {
  std::string out = id;
  std::replace(out.begin(), out.end(), '/', '_');
  std::replace(out.begin(), out.end(), ':', '_');
  return out;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

ProcessExecutor::ProcessExecutor(std::string_view options_json) : options_(parse_process_options(options_json)) {
  free_gpus_ = options_.gpus;
  std::string program = options_.command.literal_program();
  // A program given by name must be found now, not after the first trial fails.
  if (!program.empty() && program.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    bool found = false;
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (size_t start = 0; start <= dirs.size() && !found;) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      std::string dir = dirs.substr(start, end - start);
      found = ::access(((dir.empty() ? "." : dir) + "/" + program).c_str(), X_OK) == 0;
      start = end + 1;
    }
    if (!found) throw cotune::Error(COTUNE_ERR_NOT_FOUND, "process executor: command[0] '" + program + "' is not in PATH");
  } else if (!program.empty() && ::access(program.c_str(), X_OK) != 0) {
    throw cotune::Error(COTUNE_ERR_NOT_FOUND,
                        "process executor: command[0] '" + program + "' is not executable: " + std::generic_category().message(errno));
  }
}

ProcessExecutor::~ProcessExecutor() {
  for (auto& run : runs_)
    if (run->child) run->child->kill_and_reap();
}

std::string ProcessExecutor::trial_workdir(const cotune_trial& trial, const std::string& trial_id) {
  std::string dir(cotune::view(trial.workdir));
  if (dir.empty()) {
    if (!options_.workdir.empty()) {
      dir = options_.workdir + "/" + file_part(trial_id);
    } else {
      if (fallback_dir_.empty()) {
        const char* tmp = std::getenv("TMPDIR");
        std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/cotune-process-XXXXXX";
        if (::mkdtemp(pattern.data()) == nullptr)
          throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "cannot create a temporary directory: " + std::generic_category().message(errno));
        fallback_dir_ = pattern;
      }
      dir = fallback_dir_ + "/" + file_part(trial_id);
    }
  }
  for (char c : dir)
    if (static_cast<unsigned char>(c) < 0x20)
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "trial workdir contains a control character");
  make_directories(dir);
  return dir;
}

std::unique_ptr<ProcessExecutor::Job> ProcessExecutor::submit(const cotune_trial& trial) {
  const std::string trial_id = checked_trial_id(cotune::view(trial.trial_id));
  FormattedParams params = format_params(trial);
  auto run = std::make_shared<Run>();
  run->workdir = trial_workdir(trial, trial_id);
  const std::string trial_file = run->workdir + "/" + kTrialFileName;
  const std::string result_file = run->workdir + "/" + kResultFileName;

  std::map<std::string, std::string> values(params.begin(), params.end());
  values["trial_id"] = trial_id;
  values["workdir"] = run->workdir;
  values["trial_file"] = trial_file;
  values["result_file"] = result_file;
  run->request.argv = options_.command.expand(values);

  run->request.env = inherited_environment(!options_.gpus.empty());
  for (const auto& [k, v] : options_.env) run->request.env.push_back(k + "=" + v);
  for (const auto& [name, value] : params) run->request.env.push_back(param_env_name(name) + "=" + value);
  run->request.env.push_back("COTUNE_TRIAL_ID=" + trial_id);
  run->request.env.push_back("COTUNE_TRIAL_FILE=" + trial_file);
  run->request.env.push_back("COTUNE_RESULT_FILE=" + result_file);
  run->request.env.push_back("COTUNE_WORKDIR=" + run->workdir);
  run->request.cwd = run->workdir;
  run->request.stdout_path = run->workdir + "/" + kStdoutName;
  run->request.stderr_path = run->workdir + "/" + kStderrName;

  ::unlink(result_file.c_str());  // a result left by an earlier attempt must not count
  write_trial_file(trial_file, trial, params);
  run->result.status = COTUNE_STATUS_PENDING;
  run->result.log_path = run->request.stdout_path;
  runs_.push_back(run);
  advance();
  auto job = std::make_unique<Job>();
  job->run = std::move(run);
  return job;
}

std::unique_ptr<ProcessExecutor::Job> ProcessExecutor::attach(const cotune_trial& trial, std::string_view external_id) {
  (void)trial;
  const std::string id(external_id);
  const size_t at = id.find('@');
  pid_t pid = 0;
  try {
    pid = static_cast<pid_t>(std::stol(id.substr(0, at)));
  } catch (const std::exception&) {
    throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "'" + id + "' is not a process id");
  }
  if (at != std::string::npos && stop_leftover_group(pid, id.substr(at + 1), kLeftoverGraceMs))
    throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "its process " + std::to_string(pid) +
                                                    " outlived the run that started it and has been stopped");
  throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "its process " + std::to_string(pid) + " is no longer running");
}

void ProcessExecutor::start(Run& run) {
  if (!options_.gpus.empty()) {
    run.gpus.assign(free_gpus_.begin(), free_gpus_.begin() + options_.gpus_per_trial);
    free_gpus_.erase(free_gpus_.begin(), free_gpus_.begin() + options_.gpus_per_trial);
    run.request.env.push_back("CUDA_VISIBLE_DEVICES=" + join(run.gpus, ","));
  }
  run.phase = Run::Phase::kRunning;
  run.started = Clock::now();
  run.result.attempts = 1;
  ++running_;
  try {
    run.child = std::make_unique<ChildProcess>(run.request);
    run.result.status = COTUNE_STATUS_RUNNING;
    // The start time beside the pid: a resumed host tells this process from a later one given the pid.
    run.result.external_id = std::to_string(run.child->pid()) + "@" + process_start_time(run.child->pid());
  } catch (const cotune::Error& e) {
    run.result.error = e.what();
    finish(run);
  }
}

namespace {
// The job's metrics with the time its process ran, unless it says its own: the host's GPU-hours
// count it rather than the trial's time from submission (which includes waiting here for a free
// slot, or on an agent that was down).
std::string with_wall_time(const std::string& metrics, std::chrono::steady_clock::time_point started) {
  nlohmann::json m = nlohmann::json::parse(metrics, nullptr, false);
  if (!m.is_object() || m.contains("wall_time_s")) return metrics;
  m["wall_time_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return m.dump();
}
}  // namespace

void ProcessExecutor::finish(Run& run) {
  if (run.child) {
    run.child->signal_group(SIGKILL);  // whatever the job left behind in its group ends with it
    run.child->try_reap();
  }
  run.phase = Run::Phase::kDone;
  --running_;
  free_gpus_.insert(free_gpus_.end(), run.gpus.begin(), run.gpus.end());
  cotune::JobResult& r = run.result;
  if (!run.child) {  // never started
    r.status = COTUNE_STATUS_FAILED;
    return;
  }
  const int status = run.child->status();
  const std::string how = describe_wait_status(status);
  const std::string tail = tail_lines(run.request.stderr_path, options_.log_tail_lines);
  const std::string tail_text = tail.empty() ? "" : "; last lines of stderr:\n" + tail;
  if (run.cancelled) {
    r.status = COTUNE_STATUS_CANCELLED;
    r.error = "cancelled (" + how + ")";
    return;
  }
  if (run.timed_out) {
    r.status = COTUNE_STATUS_TIMEOUT;
    r.error = "timed out after " + seconds_text(options_.timeout_s) + " s; process group killed (" + how + ")" + tail_text;
    return;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    bool oom = std::any_of(options_.oom_patterns.begin(), options_.oom_patterns.end(),
                           [&](const std::string& p) { return !p.empty() && tail.find(p) != std::string::npos; });
    r.status = oom ? COTUNE_STATUS_OOM : COTUNE_STATUS_FAILED;
    r.error = how + tail_text;
    return;
  }
  const std::string result_file = run.workdir + "/" + kResultFileName;
  Metrics m;
  if (options_.result_file && path_exists(result_file)) {
    m = read_result_file(result_file);
  } else if (!options_.metrics_regex.empty()) {
    m = metrics_from_regex(run.request.stdout_path, options_.metrics_regex);
  } else {
    m.error = "the job exited 0 but wrote no result file (" + result_file + ") and no metrics_regex is configured";
  }
  r.status = m.ok ? COTUNE_STATUS_OK : COTUNE_STATUS_FAILED;
  r.metrics_json = m.ok ? with_wall_time(m.json, run.started) : "{}";  // exited 0, nothing readable (cotune.h)
  r.error = m.ok ? "" : m.error;
}

void ProcessExecutor::advance() {
  const auto now = Clock::now();
  for (auto& run : runs_) {
    if (run->phase != Run::Phase::kRunning) continue;
    if (run->child->try_reap()) {
      finish(*run);
      continue;
    }
    if (!run->term_pending && options_.timeout_s > 0 &&
        now - run->started >= std::chrono::duration<double>(options_.timeout_s)) {
      run->timed_out = true;
      run->term_pending = true;
      run->term_sent = now;
      run->child->signal_group(SIGTERM);
    } else if (run->term_pending && now - run->term_sent >= std::chrono::duration<double>(options_.kill_grace_s)) {
      run->child->signal_group(SIGKILL);
    }
  }
  for (auto& run : runs_) {
    if (running_ >= options_.capacity()) break;
    if (run->phase == Run::Phase::kQueued) start(*run);
  }
  runs_.erase(std::remove_if(runs_.begin(), runs_.end(),
                             [](const std::shared_ptr<Run>& r) { return r->released && r->phase == Run::Phase::kDone; }),
              runs_.end());
}

ProcessExecutor::Clock::time_point ProcessExecutor::next_kill_deadline() const {
  auto next = Clock::time_point::max();
  for (const auto& run : runs_) {
    if (run->phase != Run::Phase::kRunning) continue;
    if (run->term_pending) {
      next = std::min(next, run->term_sent + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(options_.kill_grace_s)));
    } else if (options_.timeout_s > 0) {
      next = std::min(next, run->started + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(options_.timeout_s)));
    }
  }
  return next;
}

void ProcessExecutor::wait_for_event(Clock::time_point until) {
  until = std::min(until, next_kill_deadline());
  auto now = Clock::now();
  if (until <= now) return;
  std::vector<pollfd> fds;
  bool all_have_fd = true;
  for (const auto& run : runs_) {
    if (run->phase != Run::Phase::kRunning) continue;
    if (run->child->exit_fd() < 0) all_have_fd = false;
    else fds.push_back({run->child->exit_fd(), POLLIN, 0});
  }
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
  if (!all_have_fd) wait = std::min<long long>(wait, 10);  // no pidfd: look again soon
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(wait));
    return;
  }
  int r = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(wait, 1 << 30)));
  (void)r;  // EINTR or a timeout: the caller looks at every run again either way
}

const cotune::JobResult& ProcessExecutor::poll(Job& job, int32_t timeout_ms) {
  Run& run = *job.run;
  advance();
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max<int32_t>(timeout_ms, 0));
  while (run.phase != Run::Phase::kDone && Clock::now() < deadline) {
    wait_for_event(deadline);
    advance();
  }
  return run.result;
}

void ProcessExecutor::cancel(Job& job) {
  Run& run = *job.run;
  if (run.phase == Run::Phase::kQueued) {
    run.phase = Run::Phase::kDone;
    run.result.status = COTUNE_STATUS_CANCELLED;
    run.result.error = "cancelled before it started";
    return;
  }
  if (run.phase == Run::Phase::kRunning && !run.cancelled) {
    run.cancelled = true;
    if (!run.term_pending) {
      run.term_pending = true;
      run.term_sent = Clock::now();
      run.child->signal_group(SIGTERM);
    }
  }
}

}  // namespace cotune_process
