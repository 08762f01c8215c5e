#include "slurm_executor.hpp"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>


namespace cotune_slurm {
namespace {

constexpr const char* kComponent = "org.cotune.executor.slurm";

std::string file_part(const std::string& id) {
  std::string out = id;
  std::replace(out.begin(), out.end(), '/', '_');
  std::replace(out.begin(), out.end(), ':', '_');
  return out;
}

std::string absolute(const std::string& dir) {
  char buf[PATH_MAX];
  if (::realpath(dir.c_str(), buf) == nullptr)
    throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "cannot resolve '" + dir + "': " + std::generic_category().message(errno));
  return buf;
}

std::string parent_dir(const std::string& dir) {
  size_t slash = dir.find_last_of('/');
  return slash == std::string::npos || slash == 0 ? "/" : dir.substr(0, slash);
}

std::string first_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// An array task cancelled while still pending never gets a record of its own: it leaves the
// array's pending set, and once none is left squeue lists the array's record as "JOBID" CANCELLED.
bool array_cancelled(const std::map<std::string, SlurmJobInfo>& known, const std::string& id) {
  size_t underscore = id.find('_');
  if (underscore == std::string::npos) return false;
  auto it = known.find(id.substr(0, underscore));
  return it != known.end() && classify_state(it->second.state) == SlurmOutcome::kCancelled;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out) throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "cannot write '" + path + "'");
}

}  // namespace

SlurmExecutor::SlurmExecutor(std::string_view options_json)
    : options_(parse_slurm_options(options_json)),
      cli_(options_.slurm_bin, options_.command_timeout_s),
      interval_s_(options_.poll_min_s) {
  for (const char* program : {"sbatch", "squeue", "scancel", "sinfo"})
    if (cli_.find(program).empty())
      throw cotune::Error(COTUNE_ERR_UNAVAILABLE,
                          std::string("Slurm is not available: '") + program + "' not found in " +
                              (options_.slurm_bin.empty() ? "PATH" : "slurm_bin '" + options_.slurm_bin + "'") +
                              " (install slurm-client, or set the option slurm_bin)");
  CommandOutput parts = cli_.run("sinfo", {"-h", "-o", "%P"});
  if (!parts.ok())
    throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "cannot reach the Slurm controller: sinfo failed: " + first_line(parts.err) +
                                                    " (the Slurm commands find the cluster through SLURM_CONF or "
                                                    "/etc/slurm/slurm.conf)");
  if (!options_.partition.empty()) {
    std::vector<std::string> names;
    std::istringstream in(parts.out);
    bool found = false;
    for (std::string p; std::getline(in, p);) {
      if (!p.empty() && p.back() == '*') p.pop_back();  // the default partition
      if (p.empty()) continue;
      names.push_back(p);
      found = found || p == options_.partition;
    }
    if (!found)
      throw cotune::Error(COTUNE_ERR_NOT_FOUND, "slurm executor: partition '" + options_.partition +
                                                    "' does not exist (partitions: " + join(names, ", ") + ")");
  }
  if (options_.check_on_create) {
    // sbatch --test-only validates account, qos, GPUs, time limit against the cluster: fail now, not per trial.
    char name[] = "/tmp/cotune-sbatch-check-XXXXXX";
    int fd = ::mkstemp(name);
    if (fd < 0) throw cotune::Error(COTUNE_ERR_UNAVAILABLE, "cannot create a temporary file");
    ::close(fd);
    try {
      write_text(name, sbatch_header(options_) + "#SBATCH --output=/dev/null\ntrue\n");
      CommandOutput test = cli_.run("sbatch", {"--test-only", name});
      ::unlink(name);
      if (!test.ok())
        throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "sbatch refuses these job options: " + first_line(test.err));
    } catch (...) {
      ::unlink(name);
      throw;
    }
  }
}

SlurmExecutor::~SlurmExecutor() {
  if (!options_.cancel_on_destroy) return;
  std::vector<std::string> ids;
  for (const auto& t : tracks_)
    if (!t->released && t->phase == Track::Phase::kSubmitted) ids.push_back(t->result.external_id);
  if (ids.empty()) return;
  try {
    ids.insert(ids.begin(), "--quiet");
    cli_.run("scancel", ids);
  } catch (const std::exception& e) {
    cotune::log(COTUNE_LOG_WARN, kComponent, std::string("could not cancel jobs: ") + e.what());
  }
}

std::shared_ptr<SlurmExecutor::Track> SlurmExecutor::prepare(const cotune_trial& trial) {
  auto t = std::make_shared<Track>();
  t->trial_id = checked_trial_id(cotune::view(trial.trial_id));
  FormattedParams params = format_params(trial);
  std::string dir(cotune::view(trial.workdir));
  if (dir.empty()) {
    if (options_.workdir.empty())
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT,
                          "slurm executor: the trial has no workdir and the option 'workdir' is not set "
                          "(a directory on a filesystem the compute nodes share)");
    dir = options_.workdir + "/" + file_part(t->trial_id);
  }
  make_directories(dir);
  t->command.workdir = absolute(dir);
  t->log_dir = options_.log_dir.empty() ? parent_dir(t->command.workdir) : options_.log_dir;
  make_directories(t->log_dir);
  t->log_dir = absolute(t->log_dir);

  const std::string& wd = t->command.workdir;
  std::map<std::string, std::string> values(params.begin(), params.end());
  values["trial_id"] = t->trial_id;
  values["workdir"] = wd;
  values["trial_file"] = wd + "/" + kTrialFileName;
  values["result_file"] = wd + "/" + kResultFileName;
  t->command.argv = options_.command.expand(values);
  for (const auto& [name, value] : params) t->command.env.emplace_back(param_env_name(name), value);
  t->command.env.emplace_back("COTUNE_TRIAL_ID", t->trial_id);
  t->command.env.emplace_back("COTUNE_TRIAL_FILE", values["trial_file"]);
  t->command.env.emplace_back("COTUNE_RESULT_FILE", values["result_file"]);
  t->command.env.emplace_back("COTUNE_WORKDIR", wd);
  t->result.log_path = wd + "/" + kStdoutName;
  return t;
}

std::unique_ptr<SlurmExecutor::Job> SlurmExecutor::submit(const cotune_trial& trial) {
  forget_released();
  auto t = prepare(trial);
  const std::string& wd = t->command.workdir;
  ::unlink((wd + "/" + kResultFileName).c_str());  // left by an earlier attempt: must not count
  ::unlink((wd + "/" + kExitStatusName).c_str());
  write_trial_file(wd + "/" + kTrialFileName, trial, format_params(trial));
  tracks_.push_back(t);
  buffer_.push_back(t);
  if (!options_.array) flush();
  if (t->phase == Track::Phase::kDone && !options_.array)  // sbatch refused it: say so at once
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, t->result.error);
  auto job = std::make_unique<Job>();
  job->track = std::move(t);
  return job;
}

void SlurmExecutor::flush() {
  if (buffer_.empty()) return;
  std::vector<Track*> batch;
  for (const auto& t : buffer_) batch.push_back(t.get());
  buffer_.clear();
  submit_batch(batch);
}

void SlurmExecutor::submit_batch(const std::vector<Track*>& batch) {
  const Track& first = *batch.front();
  const bool is_array = batch.size() > 1;
  std::vector<const TrialCommand*> commands;
  for (const auto& t : batch) commands.push_back(&t->command);
  const std::string script_path = first.log_dir + "/job-" + file_part(first.trial_id) + "-" +
                                  std::to_string(::getpid()) + "-" + std::to_string(++batches_) + ".sbatch";
  std::string error;
  std::string job_id;
  try {
    write_text(script_path,
               render_batch_script(options_, commands, first.log_dir + (is_array ? "/slurm-%A_%a.out" : "/slurm-%j.out")));
    CommandOutput out = cli_.run("sbatch", {"--parsable", script_path});
    job_id = first_line(out.out.substr(0, out.out.find(';')));
    if (!out.ok() || job_id.empty() || job_id.find_first_not_of("0123456789") != std::string::npos)
      error = "sbatch refused the job script " + script_path + ": " + first_line(out.err.empty() ? out.out : out.err);
  } catch (const std::exception& e) {
    error = e.what();
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    Track& t = *batch[i];
    t.result.attempts += 1;
    if (!error.empty()) {
      t.phase = Track::Phase::kDone;
      t.result.status = COTUNE_STATUS_FAILED;
      t.result.error = error;
      continue;
    }
    t.phase = Track::Phase::kSubmitted;
    t.result.status = COTUNE_STATUS_PENDING;
    t.result.external_id = is_array ? job_id + "_" + std::to_string(i) : job_id;
    t.slurm_log = t.log_dir + "/slurm-" + t.result.external_id + ".out";
  }
  if (!error.empty()) cotune::log(COTUNE_LOG_ERROR, kComponent, error);
  interval_s_ = options_.poll_min_s;
  next_refresh_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval_s_));
}

std::string SlurmExecutor::log_tail(const Track& t) const {
  std::string out;
  std::string err = tail_lines(t.command.workdir + "/" + kStderrName, options_.log_tail_lines);
  if (!err.empty()) out += "; last lines of stderr:\n" + err;
  std::string slurm = tail_lines(t.slurm_log, 5);
  if (!slurm.empty()) out += (err.empty() ? "; " : "\n") + std::string("Slurm's log (") + t.slurm_log + "):\n" + slurm;
  return out;
}

void SlurmExecutor::complete(Track& t) {
  const std::string& wd = t.command.workdir;
  const std::string result_file = wd + "/" + kResultFileName;
  Metrics m;
  if (options_.result_file && path_exists(result_file)) {
    m = read_result_file(result_file);
  } else if (!options_.metrics_regex.empty()) {
    m = metrics_from_regex(wd + "/" + kStdoutName, options_.metrics_regex);
  } else {
    m.error = "Slurm job " + t.result.external_id + " completed but wrote no result file (" + result_file + ")";
  }
  t.phase = Track::Phase::kDone;
  t.result.status = m.ok ? COTUNE_STATUS_OK : COTUNE_STATUS_FAILED;
  t.result.metrics_json = m.ok ? m.json : "{}";  // completed, nothing readable (cotune.h)
  t.result.error = m.ok ? "" : m.error;
}

void SlurmExecutor::settle(Track& t, const SlurmJobInfo& info) {
  const std::string id = t.result.external_id;
  auto done = [&t](int32_t status, std::string error) {
    t.phase = Track::Phase::kDone;
    t.result.status = status;
    t.result.error = std::move(error);
  };
  switch (classify_state(info.state)) {
    case SlurmOutcome::kPending:
      t.result.status = COTUNE_STATUS_PENDING;
      return;
    case SlurmOutcome::kRunning:
      t.result.status = COTUNE_STATUS_RUNNING;
      return;
    case SlurmOutcome::kCompleted:
      complete(t);
      return;
    case SlurmOutcome::kFailed: {
      std::string how = info.signal ? "signal " + std::to_string(info.signal) : "exit code " + std::to_string(info.exit_code);
      done(COTUNE_STATUS_FAILED, "Slurm job " + id + " " + info.state + " (" + how + ")" + log_tail(t));
      return;
    }
    case SlurmOutcome::kOom:
      done(COTUNE_STATUS_OOM, "Slurm job " + id + " ran out of memory (OUT_OF_MEMORY)" + log_tail(t));
      return;
    case SlurmOutcome::kTimeout:
      done(COTUNE_STATUS_TIMEOUT, "Slurm job " + id + " reached its time limit" +
                                      (options_.time_limit.empty() ? "" : " (--time=" + options_.time_limit + ")") +
                                      log_tail(t));
      return;
    case SlurmOutcome::kRequeue:
      if (t.cancel_requested) {
        done(COTUNE_STATUS_CANCELLED, "cancelled (the job ended with " + info.state + ")");
      } else if (t.result.attempts < options_.max_attempts) {
        cotune::log(COTUNE_LOG_WARN, kComponent,
                    "trial " + t.trial_id + ": Slurm job " + id + " ended with " + info.state + "; submitting attempt " +
                        std::to_string(t.result.attempts + 1) + " of " + std::to_string(options_.max_attempts));
        ::unlink((t.command.workdir + "/" + kResultFileName).c_str());
        submit_batch({&t});
      } else {
        done(COTUNE_STATUS_FAILED, "Slurm job " + id + " ended with " + info.state + "; gave up after " +
                                       std::to_string(t.result.attempts) + " attempts");
      }
      return;
    case SlurmOutcome::kCancelled:
      done(COTUNE_STATUS_CANCELLED,
           t.cancel_requested ? "cancelled" : "Slurm job " + id + " was cancelled outside cotune (scancel or an administrator)");
      return;
  }
}

void SlurmExecutor::settle_from_exit_file(Track& t, bool cancelled_before_start) {
  std::ifstream in(t.command.workdir + "/" + kExitStatusName);
  int rc = -1;
  std::string id;
  if (in >> rc >> id && id == t.result.external_id) {
    if (rc == 0) {
      complete(t);
    } else {
      t.phase = Track::Phase::kDone;
      t.result.status = COTUNE_STATUS_FAILED;
      t.result.error = "Slurm job " + id + " failed (exit code " + std::to_string(rc) + ")" + log_tail(t);
    }
    return;
  }
  t.phase = Track::Phase::kDone;
  if (cancelled_before_start) {
    t.result.status = COTUNE_STATUS_CANCELLED;
    t.result.error = t.cancel_requested ? "cancelled before it started"
                                        : "Slurm job " + t.result.external_id +
                                              " was cancelled before it started, outside cotune (or by an earlier run)";
    return;
  }
  t.result.status = t.cancel_requested ? COTUNE_STATUS_CANCELLED : COTUNE_STATUS_FAILED;
  t.result.error = "Slurm no longer knows job " + t.result.external_id +
                   " (it ended longer ago than the controller's MinJobAge, or the controller lost it) and it left "
                   "no exit status in " + t.command.workdir + ": it did not finish" + log_tail(t);
}

void SlurmExecutor::refresh() {
  std::vector<Track*> live;
  std::vector<std::string> ids;
  for (const auto& t : tracks_)
    if (t->phase == Track::Phase::kSubmitted) {
      live.push_back(t.get());
      ids.push_back(t->result.external_id);
    }
  auto schedule = [this](bool changed) {
    interval_s_ = changed ? options_.poll_min_s : std::min(options_.poll_max_s, interval_s_ * 1.5);
    next_refresh_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval_s_));
  };
  if (live.empty()) return schedule(false);
  // The arrays' own records too: see array_cancelled().
  std::set<std::string> arrays;
  for (Track* t : live) {
    size_t underscore = t->result.external_id.find('_');
    if (underscore != std::string::npos) arrays.insert(t->result.external_id.substr(0, underscore));
  }
  std::vector<std::string> query = ids;
  query.insert(query.end(), arrays.begin(), arrays.end());
  CommandOutput q = cli_.run("squeue", {"-h", "--states=all", "-r", "-j", join(query, ","), "-O",
                                        "JobArrayID:64|,State:32|,exit_code:16|,Reason:64|"});
  if (!q.ok() && q.err.find("Invalid job id") == std::string::npos) {
    cotune::log(COTUNE_LOG_WARN, kComponent, "squeue failed (will retry): " + first_line(q.err));
    return schedule(false);
  }
  std::map<std::string, SlurmJobInfo> known = q.ok() ? parse_squeue(q.out) : std::map<std::string, SlurmJobInfo>{};
  bool changed = false;
  std::vector<Track*> missing;
  for (Track* t : live) {
    auto it = known.find(t->result.external_id);
    if (it == known.end()) {
      missing.push_back(t);
      continue;
    }
    int32_t before = t->result.status;
    settle(*t, it->second);
    changed = changed || before != t->result.status || t->phase != Track::Phase::kSubmitted;
  }
  if (!missing.empty() && sacct_works_ && !cli_.find("sacct").empty()) {
    std::vector<std::string> missing_ids;
    for (Track* t : missing) missing_ids.push_back(t->result.external_id);
    CommandOutput a = cli_.run("sacct", {"-n", "-P", "-X", "-j", join(missing_ids, ","), "-o", "JobID,State,ExitCode"});
    if (!a.ok()) {
      sacct_works_ = false;  // no accounting storage: the exit files answer instead
    } else {
      std::map<std::string, SlurmJobInfo> acct = parse_sacct(a.out);
      std::vector<Track*> still;
      for (Track* t : missing) {
        auto it = acct.find(t->result.external_id);
        if (it == acct.end()) still.push_back(t);
        else settle(*t, it->second);
      }
      missing.swap(still);
    }
  }
  for (Track* t : missing) settle_from_exit_file(*t, array_cancelled(known, t->result.external_id));
  schedule(changed || !missing.empty());
}

void SlurmExecutor::forget_released() {
  auto gone = [](const std::shared_ptr<Track>& t) { return t->released; };
  buffer_.erase(std::remove_if(buffer_.begin(), buffer_.end(), gone), buffer_.end());
  tracks_.erase(std::remove_if(tracks_.begin(), tracks_.end(), gone), tracks_.end());
}

const cotune::JobResult& SlurmExecutor::poll(Job& job, int32_t timeout_ms) {
  forget_released();
  flush();
  Track& t = *job.track;
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max<int32_t>(timeout_ms, 0));
  while (true) {
    if (t.phase == Track::Phase::kSubmitted && Clock::now() >= next_refresh_) refresh();
    if (t.phase == Track::Phase::kDone || Clock::now() >= deadline) break;
    std::this_thread::sleep_until(std::min(next_refresh_, deadline));
  }
  return t.result;
}

void SlurmExecutor::cancel(Job& job) {
  Track& t = *job.track;
  t.cancel_requested = true;
  if (t.phase == Track::Phase::kBuffered) {
    buffer_.erase(std::remove(buffer_.begin(), buffer_.end(), job.track), buffer_.end());
    t.phase = Track::Phase::kDone;
    t.result.status = COTUNE_STATUS_CANCELLED;
    t.result.error = "cancelled before it was submitted";
    return;
  }
  if (t.phase != Track::Phase::kSubmitted) return;
  CommandOutput out = cli_.run("scancel", {t.result.external_id});
  if (!out.ok())  // usually: the job has just ended; the next refresh tells how
    cotune::log(COTUNE_LOG_WARN, kComponent, "scancel " + t.result.external_id + ": " + first_line(out.err));
  next_refresh_ = Clock::now();
}

std::unique_ptr<SlurmExecutor::Job> SlurmExecutor::attach(const cotune_trial& trial, std::string_view external_id) {
  // JOBID or JOBID_TASK, checked by hand: the id comes from the store, of any length.
  std::string id(external_id);
  const size_t underscore = id.find('_');
  auto digits = [](std::string_view s) {
    return !s.empty() && s.size() <= 20 && std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  };
  const bool ok = underscore == std::string::npos
                      ? digits(id)
                      : digits(std::string_view(id).substr(0, underscore)) && digits(std::string_view(id).substr(underscore + 1));
  if (!ok)
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "slurm executor: '" + id.substr(0, 80) +
                                                         "' is not a Slurm job id (JOBID or JOBID_TASK)");
  forget_released();
  auto t = prepare(trial);  // keeps the files the job may have written while cotune was down
  t->phase = Track::Phase::kSubmitted;
  t->result.status = COTUNE_STATUS_PENDING;
  t->result.attempts = 1;
  t->result.external_id = id;
  t->slurm_log = t->log_dir + "/slurm-" + id + ".out";
  tracks_.push_back(t);
  next_refresh_ = Clock::now();
  auto job = std::make_unique<Job>();
  job->track = std::move(t);
  return job;
}

}  // namespace cotune_slurm
