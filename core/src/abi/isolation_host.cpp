// The host's side of "isolation": "process" (isolation.hpp): a child process per instance, and a
// table per component whose functions forward each call to it and turn what comes back, or the
// child's death, into outputs or an error object. No exception leaves a table function.
#include <cotune/core/abi/isolation.hpp>
#include <cotune/core/registry.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <system_error>
#include <functional>
#include <mutex>
#include <new>
#include <thread>

#include "abi/component_helpers.hpp"
#include "abi/isolation_wire.hpp"

extern char** environ;  // NOLINT(bugprone-reserved-identifier): POSIX's own name, for posix_spawn

namespace cotune::core {
namespace isolation {
namespace {

using abi_detail::optional_fn;
using abi_detail::str;
using abi_detail::view;

// A call that did not succeed: the plugin's own error, or its process's death.
struct CallFailed {
  int32_t code;
  std::string message;
};

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* what = sigdescr_np(sig);
  std::string s = abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
  if (what) s += std::string(" (") + what + ")";
  return s;
}

// The cotune executable that serves plugins: the running one when it is cotune, else the one
// beside it (a test binary in the build tree, or an embedding program installed beside cotune).
std::string plugin_host_executable() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw CallFailed{COTUNE_ERR_UNAVAILABLE, "cannot find the running executable (/proc/self/exe)"};
  const std::string self(buf, static_cast<size_t>(n));
  const std::string dir = self.substr(0, self.rfind('/'));
  if (self.substr(dir.size()) == "/cotune") return self;
  const std::string beside = dir + "/cotune";
  if (::access(beside.c_str(), X_OK) != 0)
    throw CallFailed{COTUNE_ERR_UNAVAILABLE, "\"isolation\": \"process\" runs plugins in the cotune executable, "
                                             "which is not beside this program (" + beside + ")"};
  return beside;
}

// One plugin instance's process and the socket to it.
class Child {
 public:
  Child(const std::string& library, const std::string& component_id) {
    const std::string exe = plugin_host_executable();
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
      throw CallFailed{COTUNE_ERR_RESOURCE_EXHAUSTED, std::string("cannot create a socket pair: ") + std::generic_category().message(errno)};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    // The child's end becomes fd 3 (dup2 clears close-on-exec); its stdout joins stderr, so that
    // what a plugin prints never mixes into the host's own output (`--json`).
    posix_spawn_file_actions_adddup2(&actions, fds[1], 3);
    posix_spawn_file_actions_adddup2(&actions, 2, 1);
    std::vector<std::string> args = {exe, "__plugin-host", "--fd", "3", "--library", library, "--component", component_id};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, exe.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
      ::close(fds[0]);
      throw CallFailed{COTUNE_ERR_UNAVAILABLE, "cannot start " + exe + ": " + std::generic_category().message(rc)};
    }
    fd_ = fds[0];
  }

  ~Child() {
    std::string why;
    if (dead_.empty()) send_frame(fd_, Writer(Op::kDestroy).data(), &why);  // the child destroys the instance
    ::close(fd_);
    using Clock = std::chrono::steady_clock;
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (reap(WNOHANG) == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (status_ < 0) {
      ::kill(pid_, SIGKILL);
      reap(0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool dead() const { return !dead_.empty(); }
  const std::string& death() const { return dead_; }

  using Callback = std::function<void(Op, Reader&, Writer&)>;

  // Sends `request` and returns a reader of the reply's outputs (valid until the next call).
  // `callback` answers the child's requests meanwhile. Throws CallFailed.
  Reader call(const Writer& request, const char* what, const Callback* callback = nullptr) {
    return call_raw(request.data(), what, callback);
  }
  Reader call_raw(std::string_view request, const char* what, const Callback* callback = nullptr) {
    if (!dead_.empty()) throw CallFailed{COTUNE_ERR_UNAVAILABLE, dead_};
    std::string why;
    if (!send_frame(fd_, request, &why)) died(what, why);
    for (;;) {
      if (!recv_frame(fd_, &reply_, &why)) died(what, why);
      Reader r(reply_);
      const Op op = r.op();
      if (op == Op::kOk) return r;
      if (op == Op::kFailed) {
        const int32_t code = r.i32();
        throw CallFailed{code, std::string(r.bytes())};
      }
      if (callback == nullptr || op < Op::kContextSample || op > Op::kContextSeen) {
        ::kill(pid_, SIGKILL);
        died(what, "it sent a message the host did not expect (" + std::to_string(static_cast<uint32_t>(op)) + ")");
      }
      std::string answer;
      try {
        Writer out(Op::kOk);
        (*callback)(op, r, out);
        answer = out.data();
      } catch (const CallFailed& f) {
        answer = Writer(Op::kFailed).i32(f.code).bytes(f.message).data();
      }
      if (!send_frame(fd_, answer, &why)) died(what, why);
    }
  }

 private:
  // 0: still running; pid: reaped (status_ set).
  pid_t reap(int flags) {
    if (status_ >= 0) return pid_;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, flags);
    if (r == pid_) status_ = status;
    return r < 0 ? pid_ : r;
  }

  [[noreturn]] void died(const char* what, const std::string& why) {
    // The socket closed: the process is gone or going. Give it a moment to be reaped for its status.
    using Clock = std::chrono::steady_clock;
    const auto until = Clock::now() + std::chrono::seconds(2);
    while (reap(WNOHANG) == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::string how;
    if (status_ < 0) {
      ::kill(pid_, SIGKILL);
      reap(0);
      how = "stopped answering (" + why + ") and was killed";
    } else if (WIFSIGNALED(status_)) {
      how = "was killed by " + signal_name(WTERMSIG(status_));
    } else {
      how = "exited with status " + std::to_string(WEXITSTATUS(status_));
    }
    dead_ = std::string("its process (\"isolation\": \"process\", pid ") + std::to_string(pid_) + ") " + how +
            " during its " + what + " call";
    throw CallFailed{COTUNE_ERR_INTERNAL, dead_};
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  int status_ = -1;
  std::string reply_, dead_;
};

// A forwarded instance: its child and what the tables lend out until the next call. Calls are
// serialised (one at a time). An executor whose process died is started again for its next
// submission: the trials it had in flight fail, and the study goes on.
struct Instance {
  std::mutex mu;
  std::unique_ptr<Child> child;
  std::string library, id, create;  // to start the process again
  uint64_t generation = 0;          // how many times it was started again
  std::string last_death;           // how the process before this one ended
  size_t num_params = 0;
  bool described = false;
  ParamSet params;
  bool features_described = false;
  std::vector<std::string> feature_text;
  std::vector<cotune_str> features;
  TraceCopy trace;
};

// An executor's job as the host holds it: the child's job number and the strings of its last poll.
struct RemoteJob {
  uint64_t id = 0;
  uint64_t generation = 0;  // of the process that runs it
  std::string metrics, error, log_path, external_id;
};

template <class Handle>
Instance& instance(Handle* h) {
  return *reinterpret_cast<Instance*>(h);
}

// Runs `fn` with the instance's lock, turning failures into an error object.
template <class Fn>
cotune_error* forward(Instance& in, Fn&& fn) {
  try {
    std::lock_guard<std::mutex> lock(in.mu);
    fn(*in.child);
    return nullptr;
  } catch (const CallFailed& f) {
    return host_services()->error_new(f.code, str(f.message));
  } catch (const WireError& e) {
    return host_services()->error_new(COTUNE_ERR_INTERNAL, str(e.what()));
  } catch (const std::bad_alloc&) {
    return host_services()->error_new(COTUNE_ERR_RESOURCE_EXHAUSTED, str("out of memory"));
  } catch (const std::exception& e) {
    return host_services()->error_new(COTUNE_ERR_INTERNAL, str(e.what()));
  }
}

cotune_error* write_sink(const cotune_sink* out, std::string_view data) {
  if (out->write(out->ctx, data.data(), data.size()) != 0)
    return host_services()->error_new(COTUNE_ERR_RESOURCE_EXHAUSTED, str("the host's buffer is full"));
  return nullptr;
}

// Calls that return text into a sink.
template <class Handle>
cotune_error* text_call(Handle* h, const Writer& request, const char* what, const cotune_sink* out) {
  std::string text;
  if (cotune_error* e = forward(instance(h), [&](Child& c) { text = std::string(c.call(request, what).bytes()); }))
    return e;
  return write_sink(out, text);
}

// Starts an instance's process and sends it create.
template <class Handle>
cotune_error* start(const std::string& library, const std::string& id, const Writer& create, size_t num_params,
                    Handle** out) {
  *out = nullptr;
  auto in = std::make_unique<Instance>();
  try {
    in->child = std::make_unique<Child>(library, id);
  } catch (const CallFailed& f) {
    return host_services()->error_new(f.code, str(f.message));
  }
  in->num_params = num_params;
  in->library = library;
  in->id = id;
  in->create = create.data();
  if (cotune_error* e = forward(*in, [&](Child& c) { c.call(create, "create").expect_end(); })) return e;
  *out = reinterpret_cast<Handle*>(in.release());
  return nullptr;
}

template <class Handle>
void destroy(Handle* h) {
  delete &instance(h);
}

// ---- space ---------------------------------------------------------------------------------------

void describe_locked(Instance& in, Child& c) {
  if (in.described) return;
  Reader r = c.call(Writer(Op::kSpaceDescribe), "describe");
  r.params(&in.params);
  r.expect_end();
  in.num_params = in.params.pointers.size();
  in.described = true;
}

void describe_features_locked(Instance& in, Child& c) {
  if (in.features_described) return;
  Reader r = c.call(Writer(Op::kSpaceDescribeFeatures), "describe_features");
  const uint64_t n = r.u64();
  in.feature_text.clear();
  for (uint64_t i = 0; i < n; ++i) in.feature_text.emplace_back(r.bytes());
  r.expect_end();
  in.features.clear();
  for (const std::string& f : in.feature_text) in.features.push_back(str(f));
  in.features_described = true;
}

cotune_error* space_describe(cotune_space_instance* s, const cotune_param* const** params, size_t* n) {
  Instance& in = instance(s);
  return forward(in, [&](Child& c) {
    describe_locked(in, c);
    *params = in.params.pointers.data();
    *n = in.params.pointers.size();
  });
}

cotune_error* space_check(cotune_space_instance* s, const double* configs, size_t n, int32_t* out_valid) {
  Instance& in = instance(s);
  return forward(in, [&](Child& c) {
    describe_locked(in, c);
    Reader r = c.call(Writer(Op::kSpaceCheck).u64(n).f64s(configs, n * in.num_params), "check");
    r.i32s_into(out_valid, n);
    r.expect_end();
  });
}

cotune_error* space_explain(cotune_space_instance* s, const double* config, const cotune_sink* out) {
  Instance& in = instance(s);
  if (cotune_error* e = forward(in, [&](Child& c) { describe_locked(in, c); })) return e;
  return text_call(s, Writer(Op::kSpaceExplain).f64s(config, in.num_params), "explain", out);
}

cotune_error* space_sample(cotune_space_instance* s, uint64_t seed, size_t n, double* out, size_t* out_count) {
  Instance& in = instance(s);
  return forward(in, [&](Child& c) {
    describe_locked(in, c);
    Reader r = c.call(Writer(Op::kSpaceSample).u64(seed).u64(n), "sample");
    const std::vector<double> rows = r.f64s();
    r.expect_end();
    if (in.num_params == 0 || rows.size() % in.num_params != 0 || rows.size() > n * in.num_params)
      throw WireError("sample sent " + std::to_string(rows.size()) + " values for at most " + std::to_string(n) + " rows");
    std::copy(rows.begin(), rows.end(), out);
    *out_count = rows.size() / in.num_params;
  });
}

cotune_error* space_describe_features(cotune_space_instance* s, const cotune_str** names, size_t* n) {
  Instance& in = instance(s);
  return forward(in, [&](Child& c) {
    describe_features_locked(in, c);
    *names = in.features.data();
    *n = in.features.size();
  });
}

cotune_error* space_featurize(cotune_space_instance* s, const double* configs, size_t n, double* out) {
  Instance& in = instance(s);
  return forward(in, [&](Child& c) {
    describe_locked(in, c);
    describe_features_locked(in, c);
    Reader r = c.call(Writer(Op::kSpaceFeaturize).u64(n).f64s(configs, n * in.num_params), "featurize");
    r.f64s_into(out, n * in.features.size());
    r.expect_end();
  });
}

cotune_error* space_lower(cotune_space_instance* s, const double* config, const cotune_trace** out) {
  Instance& in = instance(s);
  return forward(in, [&](Child& c) {
    describe_locked(in, c);
    Reader r = c.call(Writer(Op::kSpaceLower).f64s(config, in.num_params), "lower");
    *out = r.trace(&in.trace) ? &in.trace.trace : nullptr;
    r.expect_end();
  });
}

cotune_error* space_render(cotune_space_instance* s, const double* config, int32_t format, const cotune_sink* out) {
  Instance& in = instance(s);
  if (cotune_error* e = forward(in, [&](Child& c) { describe_locked(in, c); })) return e;
  return text_call(s, Writer(Op::kSpaceRender).f64s(config, in.num_params).i32(format), "render", out);
}

cotune_error* space_parse(cotune_space_instance* s, cotune_str config_json, double* out_config) {
  Instance& in = instance(s);
  return forward(in, [&](Child& c) {
    describe_locked(in, c);
    Reader r = c.call(Writer(Op::kSpaceParse).bytes(view(config_json)), "parse");
    r.f64s_into(out_config, in.num_params);
    r.expect_end();
  });
}

cotune_error* space_set_target(cotune_space_instance* s, cotune_str target) {
  return forward(instance(s), [&](Child& c) {
    c.call(Writer(Op::kSpaceSetTarget).bytes(view(target)), "set_target").expect_end();
  });
}

cotune_error* space_metrics(cotune_space_instance* s, const cotune_sink* out) {
  return text_call(s, Writer(Op::kSpaceMetrics), "metrics", out);
}

// ---- predictor -----------------------------------------------------------------------------------

cotune_error* predictor_fit(cotune_predictor_instance* p, const double* x, size_t n, size_t d, const double* y,
                            const double* w) {
  return forward(instance(p), [&](Child& c) {
    Writer req(Op::kPredictorFit);
    req.u64(n).u64(d).f64s(x, n * d).f64s(y, n).u32(w != nullptr).f64s(w, w ? n : 0);
    c.call(req, "fit").expect_end();
  });
}

cotune_error* predictor_predict(cotune_predictor_instance* p, const double* x, size_t n, size_t d, double* out_mean,
                                double* out_std) {
  return forward(instance(p), [&](Child& c) {
    Reader r = c.call(Writer(Op::kPredictorPredict).u64(n).u64(d).f64s(x, n * d).u32(out_std != nullptr), "predict");
    r.f64s_into(out_mean, n);
    if (out_std) r.f64s_into(out_std, n);
    r.expect_end();
  });
}

cotune_error* predictor_save(cotune_predictor_instance* p, const cotune_sink* out) {
  return text_call(p, Writer(Op::kPredictorSave), "save", out);
}

cotune_error* predictor_load(cotune_predictor_instance* p, const void* data, size_t len) {
  return forward(instance(p), [&](Child& c) {
    c.call(Writer(Op::kPredictorLoad).bytes(std::string_view(static_cast<const char*>(data), len)), "load").expect_end();
  });
}

cotune_error* predictor_describe_fit(cotune_predictor_instance* p, const cotune_sink* out) {
  return text_call(p, Writer(Op::kPredictorDescribeFit), "describe_fit", out);
}

// ---- searcher ------------------------------------------------------------------------------------

// Takes a host callback's error object and throws it to the child.
void rethrow(cotune_error* err) {
  if (err == nullptr) return;
  const int32_t code = err->code;
  std::string message(view(err->message));
  err->destroy(err);
  throw CallFailed{code, std::move(message)};
}

cotune_error* searcher_propose(cotune_searcher_instance* s, const cotune_search_context* ctx, size_t n, double* out,
                               size_t* out_count) {
  Instance& in = instance(s);
  const size_t d = in.num_params;
  const uint64_t version = COTUNE_HAS_FIELD(ctx, score_version) ? ctx->score_version : 0;
  // What the child asks of the host's context while it proposes.
  const Child::Callback answer = [ctx, d](Op op, Reader& r, Writer& w) {
    if (op == Op::kContextSample) {
      const uint64_t seed = r.u64(), want = r.u64();
      r.expect_end();
      std::vector<double> rows(want * d);
      size_t count = 0;
      rethrow(ctx->sample(ctx->ctx, seed, want, rows.data(), &count));
      w.f64s(rows.data(), std::min<size_t>(count, want) * d);
      return;
    }
    const std::vector<double> configs = r.f64s();
    const size_t rows = d ? configs.size() / d : 0;
    if (op == Op::kContextScore) {
      const bool want_std = r.u32() != 0;
      r.expect_end();
      std::vector<double> score(rows), sd(rows);
      rethrow(ctx->score(ctx->ctx, configs.data(), rows, score.data(), want_std ? sd.data() : nullptr));
      w.f64s(score.data(), rows);
      if (want_std) w.f64s(sd.data(), rows);
      return;
    }
    r.expect_end();
    std::vector<int32_t> flags(rows);
    rethrow(op == Op::kContextCheck ? ctx->check(ctx->ctx, configs.data(), rows, flags.data())
                                    : ctx->seen(ctx->ctx, configs.data(), rows, flags.data()));
    w.i32s(flags.data(), rows);
  };
  return forward(in, [&](Child& c) {
    Reader r = c.call(Writer(Op::kSearcherPropose).u64(n).u64(version), "propose", &answer);
    const std::vector<double> rows = r.f64s();
    r.expect_end();
    if (d == 0 || rows.size() % d != 0 || rows.size() > n * d)
      throw WireError("propose sent " + std::to_string(rows.size()) + " values for at most " + std::to_string(n) + " rows");
    std::copy(rows.begin(), rows.end(), out);
    *out_count = rows.size() / d;
  });
}

cotune_error* searcher_observe(cotune_searcher_instance* s, const double* configs, size_t n, const double* scores,
                               const int32_t* statuses) {
  Instance& in = instance(s);
  return forward(in, [&](Child& c) {
    Writer req(Op::kSearcherObserve);
    req.u64(n).f64s(configs, n * in.num_params).f64s(scores, n).i32s(statuses, n);
    c.call(req, "observe").expect_end();
  });
}

cotune_error* searcher_save(cotune_searcher_instance* s, const cotune_sink* out) {
  return text_call(s, Writer(Op::kSearcherSave), "save", out);
}

cotune_error* searcher_load(cotune_searcher_instance* s, const void* data, size_t len) {
  return forward(instance(s), [&](Child& c) {
    c.call(Writer(Op::kSearcherLoad).bytes(std::string_view(static_cast<const char*>(data), len)), "load").expect_end();
  });
}

// ---- executor ------------------------------------------------------------------------------------

RemoteJob& job_of(cotune_job* job) { return *reinterpret_cast<RemoteJob*>(job); }

// Before an executor call that needs no earlier job: a process that died is started again, with
// the same create request. Called with the instance's lock held.
Child& alive(Instance& in) {
  if (!in.child->dead()) return *in.child;
  auto fresh = std::make_unique<Child>(in.library, in.id);
  in.last_death = in.child->death();
  in.child = std::move(fresh);
  ++in.generation;
  host_services()->log(COTUNE_LOG_WARN, str(in.id),
                       str(in.last_death + "; started again (the trials it was running failed)"));
  in.child->call_raw(in.create, "create").expect_end();
  return *in.child;
}

// The process that runs `job`: the current one, or an error when that one died since.
Child& running(Instance& in, const RemoteJob& job) {
  if (job.generation != in.generation) throw CallFailed{COTUNE_ERR_INTERNAL, in.last_death};
  return *in.child;
}

cotune_error* executor_capacity(cotune_executor_instance* e, int32_t* out) {
  Instance& in = instance(e);
  return forward(in, [&](Child&) {
    Reader r = alive(in).call(Writer(Op::kExecutorCapacity), "capacity");
    *out = r.i32();
    r.expect_end();
  });
}

cotune_error* new_job(cotune_executor_instance* e, const Writer& request, const char* what, cotune_job** out) {
  *out = nullptr;
  Instance& in = instance(e);
  auto job = std::make_unique<RemoteJob>();
  if (cotune_error* err = forward(in, [&](Child&) {
        Reader r = alive(in).call(request, what);
        job->id = r.u64();
        job->generation = in.generation;
        r.expect_end();
      }))
    return err;
  *out = reinterpret_cast<cotune_job*>(job.release());
  return nullptr;
}

cotune_error* executor_submit(cotune_executor_instance* e, const cotune_trial* trial, cotune_job** out) {
  return new_job(e, Writer(Op::kExecutorSubmit).trial(*trial), "submit", out);
}

cotune_error* executor_attach(cotune_executor_instance* e, const cotune_trial* trial, cotune_str external_id,
                              cotune_job** out) {
  return new_job(e, Writer(Op::kExecutorAttach).trial(*trial).bytes(view(external_id)), "attach", out);
}

cotune_error* executor_poll(cotune_executor_instance* e, cotune_job* job, int32_t timeout_ms, cotune_trial_result* out) {
  Instance& in = instance(e);
  RemoteJob& j = job_of(job);
  return forward(in, [&](Child&) {
    Reader r = running(in, j).call(Writer(Op::kExecutorPoll).u64(j.id).i32(timeout_ms), "poll");
    const int32_t status = r.i32(), attempts = r.i32();
    j.metrics = std::string(r.bytes());
    j.error = std::string(r.bytes());
    j.log_path = std::string(r.bytes());
    j.external_id = std::string(r.bytes());
    r.expect_end();
    out->status = status;
    out->attempts = attempts;
    out->metrics_json = str(j.metrics);
    out->error = str(j.error);
    out->log_path = str(j.log_path);
    out->external_id = str(j.external_id);
  });
}

cotune_error* executor_cancel(cotune_executor_instance* e, cotune_job* job) {
  Instance& in = instance(e);
  const RemoteJob& j = job_of(job);
  return forward(in, [&](Child&) { running(in, j).call(Writer(Op::kExecutorCancel).u64(j.id), "cancel").expect_end(); });
}

void executor_release(cotune_executor_instance* e, cotune_job* job) {
  if (job == nullptr) return;
  Instance& in = instance(e);
  std::unique_ptr<RemoteJob> owned(&job_of(job));
  if (owned->generation != in.generation) return;  // its process is gone, and the job with it
  cotune_error* err = forward(in, [&](Child& c) { c.call(Writer(Op::kExecutorRelease).u64(owned->id), "release"); });
  if (err) err->destroy(err);  // release reports nothing; a dead process has forgotten the job anyway
}

cotune_error* executor_candidates(cotune_executor_instance* e, const cotune_trial* study, double* out, size_t capacity,
                                  size_t* out_count) {
  Instance& in = instance(e);
  return forward(in, [&](Child&) {
    Reader r = alive(in).call(Writer(Op::kExecutorCandidates).trial(*study).u64(capacity), "candidates");
    const uint64_t count = r.u64();
    const std::vector<double> rows = r.f64s();
    r.expect_end();
    if (rows.size() != std::min<uint64_t>(count, capacity) * study->num_params)
      throw WireError("candidates sent " + std::to_string(rows.size()) + " values for " + std::to_string(count) + " rows");
    std::copy(rows.begin(), rows.end(), out);
    *out_count = count;
  });
}

cotune_error* executor_metrics(cotune_executor_instance* e, const cotune_trial* study, const cotune_sink* out) {
  Instance& in = instance(e);
  std::string text;
  if (cotune_error* err = forward(in, [&](Child&) {
        text = std::string(alive(in).call(Writer(Op::kExecutorMetrics).trial(*study), "metrics").bytes());
      }))
    return err;
  return write_sink(out, text);
}

cotune_error* executor_check_study(cotune_executor_instance* e, const cotune_trial* study) {
  Instance& in = instance(e);
  return forward(in, [&](Child&) {
    alive(in).call(Writer(Op::kExecutorCheckStudy).trial(*study), "check_study").expect_end();
  });
}

// A function of the forwarding table where the plugin has one, NULL where it has none.
template <class Api, class Fn>
void mirror(const Api* real, Api* table, Fn Api::*field, Fn forwarder) {
  table->*field = optional_fn(real, field) != nullptr ? forwarder : nullptr;
}

}  // namespace
}  // namespace isolation

using namespace isolation;

struct IsolatedComponent::Impl {
  std::string library, id;
  int32_t kind = 0;
  cotune_space_api space{};
  cotune_predictor_api predictor{};
  cotune_searcher_api searcher{};
  cotune_executor_api executor{};
};

IsolatedComponent::IsolatedComponent(const ComponentRef& real) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.library = real.info.file;
  m.id = real.info.id;
  m.kind = real.info.kind;
  switch (m.kind) {
    case COTUNE_KIND_SPACE: {
      const auto* r = static_cast<const cotune_space_api*>(real.component->api);
      cotune_space_api& t = m.space;
      t.struct_size = std::min(r->struct_size, sizeof t);
      t.destroy = &destroy<cotune_space_instance>;
      t.describe = &space_describe;
      t.check = &space_check;
      t.explain = &space_explain;
      t.sample = &space_sample;
      t.describe_features = &space_describe_features;
      t.featurize = &space_featurize;
      mirror(r, &t, &cotune_space_api::lower, &space_lower);
      t.render = &space_render;
      mirror(r, &t, &cotune_space_api::parse, &space_parse);
      mirror(r, &t, &cotune_space_api::set_target, &space_set_target);
      mirror(r, &t, &cotune_space_api::metrics, &space_metrics);
      break;
    }
    case COTUNE_KIND_PREDICTOR: {
      const auto* r = static_cast<const cotune_predictor_api*>(real.component->api);
      cotune_predictor_api& t = m.predictor;
      t.struct_size = std::min(r->struct_size, sizeof t);
      t.destroy = &destroy<cotune_predictor_instance>;
      t.fit = &predictor_fit;
      t.predict = &predictor_predict;
      mirror(r, &t, &cotune_predictor_api::save, &predictor_save);
      mirror(r, &t, &cotune_predictor_api::load, &predictor_load);
      mirror(r, &t, &cotune_predictor_api::describe_fit, &predictor_describe_fit);
      break;
    }
    case COTUNE_KIND_SEARCHER: {
      const auto* r = static_cast<const cotune_searcher_api*>(real.component->api);
      cotune_searcher_api& t = m.searcher;
      t.struct_size = std::min(r->struct_size, sizeof t);
      t.destroy = &destroy<cotune_searcher_instance>;
      t.propose = &searcher_propose;
      t.observe = &searcher_observe;
      mirror(r, &t, &cotune_searcher_api::save, &searcher_save);
      mirror(r, &t, &cotune_searcher_api::load, &searcher_load);
      break;
    }
    case COTUNE_KIND_EXECUTOR: {
      const auto* r = static_cast<const cotune_executor_api*>(real.component->api);
      cotune_executor_api& t = m.executor;
      t.struct_size = std::min(r->struct_size, sizeof t);
      t.destroy = &destroy<cotune_executor_instance>;
      t.capacity = &executor_capacity;
      t.submit = &executor_submit;
      t.poll = &executor_poll;
      t.cancel = &executor_cancel;
      t.release = &executor_release;
      mirror(r, &t, &cotune_executor_api::attach, &executor_attach);
      mirror(r, &t, &cotune_executor_api::candidates, &executor_candidates);
      mirror(r, &t, &cotune_executor_api::metrics, &executor_metrics);
      mirror(r, &t, &cotune_executor_api::check_study, &executor_check_study);
      break;
    }
    default:
      throw UserError(m.id + ": unknown component kind " + std::to_string(m.kind));
  }
}

IsolatedComponent::~IsolatedComponent() = default;

const void* IsolatedComponent::api() const {
  switch (impl_->kind) {
    case COTUNE_KIND_SPACE: return &impl_->space;
    case COTUNE_KIND_PREDICTOR: return &impl_->predictor;
    case COTUNE_KIND_SEARCHER: return &impl_->searcher;
    default: return &impl_->executor;
  }
}

cotune_error* IsolatedComponent::create_space(cotune_str workload_json, cotune_str options_json,
                                              cotune_space_instance** out) const {
  const Writer create = Writer(Op::kCreate).bytes(view(workload_json)).bytes(view(options_json));
  return start(impl_->library, impl_->id, create, 0, out);
}

cotune_error* IsolatedComponent::create_predictor(cotune_str options_json, cotune_predictor_instance** out) const {
  return start(impl_->library, impl_->id, Writer(Op::kCreate).bytes(view(options_json)), 0, out);
}

cotune_error* IsolatedComponent::create_searcher(cotune_str options_json, const cotune_param* const* params,
                                                 size_t num_params, uint64_t seed, cotune_searcher_instance** out) const {
  const Writer create = Writer(Op::kCreate).bytes(view(options_json)).params(params, num_params).u64(seed);
  return start(impl_->library, impl_->id, create, num_params, out);
}

cotune_error* IsolatedComponent::create_executor(cotune_str options_json, cotune_executor_instance** out) const {
  return start(impl_->library, impl_->id, Writer(Op::kCreate).bytes(view(options_json)), 0, out);
}

std::string_view to_string(Isolation i) { return i == Isolation::kProcess ? "process" : "none"; }

ComponentRef isolate(const ComponentRef& ref) {
  ComponentRef out = ref;
  out.isolated = std::make_shared<const IsolatedComponent>(ref);
  return out;
}

}  // namespace cotune::core
