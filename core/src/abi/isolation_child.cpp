// The child's side of "isolation": "process" (isolation.hpp): the plugin's own table called with
// what the host sent, and its outputs or error sent back. A searcher's context is served by the
// host: each callback is a request back over the same socket, answered before propose goes on.
#include <cotune/core/abi/isolation.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <cstdio>
#include <map>
#include <string>

#include "abi/component_helpers.hpp"
#include "abi/isolation_wire.hpp"
#include "loader/plugin_library.hpp"

namespace cotune::core {
namespace isolation {
namespace {

using abi_detail::optional_fn;
using abi_detail::str;
using abi_detail::StringSink;
using abi_detail::view;

// The plugin's error object, to be sent back as it is.
struct PluginFailed {
  int32_t code;
  std::string message;
};

void check(cotune_error* err) {
  if (err == nullptr) return;
  const int32_t code = err->code;
  std::string message(view(err->message));
  if (err->destroy) err->destroy(err);
  throw PluginFailed{code, std::move(message)};
}

// A socket that lost its host: nothing more to do.
struct HostGone {};

class Server {
 public:
  Server(int fd, const ComponentRef& ref) : fd_(fd), ref_(ref), kind_(ref.info.kind) {}

  int run() {
    std::string frame, why;
    if (!recv_frame(fd_, &frame, &why)) return 0;  // the host went away before create
    serve(frame);
    if (instance_ == nullptr) return 0;  // create failed; the host was told why
    // Until the host says it is done. A socket closed without that means the host died (kill -9):
    // the instance is left as it would be in the host's own process, not destroyed (an executor's
    // jobs keep running for the next run to re-attach to).
    while (recv_frame(fd_, &frame, &why)) {
      if (frame.size() >= sizeof(uint32_t) && Reader(frame).op() == Op::kDestroy) {
        destroy();
        return 0;
      }
      serve(frame);
    }
    return 0;
  }

 private:
  void send(const Writer& w) {
    std::string why;
    if (!send_frame(fd_, w.data(), &why)) throw HostGone{};
  }

  // Answers one request: the call's outputs, or the error it returned.
  void serve(const std::string& frame) {
    Writer reply(Op::kOk);
    try {
      Reader r(frame);
      dispatch(r.op(), r, reply);
      r.expect_end();
    } catch (const PluginFailed& f) {
      send(Writer(Op::kFailed).i32(f.code).bytes(f.message));
      return;
    } catch (const WireError& e) {
      send(Writer(Op::kFailed).i32(COTUNE_ERR_INTERNAL).bytes(e.what()));
      return;
    }
    send(reply);
  }

  void dispatch(Op op, Reader& r, Writer& w) {
    if (op == Op::kCreate) return create(r);
    if (instance_ == nullptr) throw WireError("a call before create");
    switch (kind_) {
      case COTUNE_KIND_SPACE: return space(op, r, w);
      case COTUNE_KIND_PREDICTOR: return predictor(op, r, w);
      case COTUNE_KIND_SEARCHER: return searcher(op, r, w);
      default: return executor(op, r, w);
    }
  }

  template <class Api>
  const Api* api() const {
    return static_cast<const Api*>(ref_.component->api);
  }

  void create(Reader& r) {
    if (instance_ != nullptr) throw WireError("create called twice");
    const cotune_host* host = host_services();
    switch (kind_) {
      case COTUNE_KIND_SPACE: {
        const std::string workload(r.bytes()), options(r.bytes());
        auto** out = reinterpret_cast<cotune_space_instance**>(&instance_);
        check(api<cotune_space_api>()->create(host, str(workload), str(options), out));
        break;
      }
      case COTUNE_KIND_PREDICTOR: {
        const std::string options(r.bytes());
        check(api<cotune_predictor_api>()->create(host, str(options), reinterpret_cast<cotune_predictor_instance**>(&instance_)));
        break;
      }
      case COTUNE_KIND_SEARCHER: {
        const std::string options(r.bytes());
        r.params(&params_);
        const uint64_t seed = r.u64();
        check(api<cotune_searcher_api>()->create(host, str(options), params_.pointers.data(), params_.pointers.size(),
                                                 seed, reinterpret_cast<cotune_searcher_instance**>(&instance_)));
        break;
      }
      default: {
        const std::string options(r.bytes());
        check(api<cotune_executor_api>()->create(host, str(options), reinterpret_cast<cotune_executor_instance**>(&instance_)));
      }
    }
    if (instance_ == nullptr) throw PluginFailed{COTUNE_ERR_INTERNAL, "create returned no instance"};
  }

  void destroy() {
    switch (kind_) {
      case COTUNE_KIND_SPACE: api<cotune_space_api>()->destroy(static_cast<cotune_space_instance*>(instance_)); break;
      case COTUNE_KIND_PREDICTOR:
        api<cotune_predictor_api>()->destroy(static_cast<cotune_predictor_instance*>(instance_));
        break;
      case COTUNE_KIND_SEARCHER:
        api<cotune_searcher_api>()->destroy(static_cast<cotune_searcher_instance*>(instance_));
        break;
      default: {
        auto* e = static_cast<cotune_executor_instance*>(instance_);
        for (auto& [id, job] : jobs_) api<cotune_executor_api>()->release(e, job);
        api<cotune_executor_api>()->destroy(e);
      }
    }
    instance_ = nullptr;
  }

  template <class Fn>
  Fn need(Fn fn, const char* what) const {
    if (fn == nullptr) throw PluginFailed{COTUNE_ERR_UNSUPPORTED, std::string("the plugin has no ") + what};
    return fn;
  }

  size_t num_params() {
    if (num_params_ == SIZE_MAX) {
      const cotune_param* const* params = nullptr;
      size_t n = 0;
      check(api<cotune_space_api>()->describe(static_cast<cotune_space_instance*>(instance_), &params, &n));
      num_params_ = n;
    }
    return num_params_;
  }

  std::vector<double> rows(Reader& r, size_t n, size_t width) {
    std::vector<double> v = r.f64s();
    if (v.size() != n * width) throw WireError("a request with " + std::to_string(v.size()) + " values for " + std::to_string(n) + " rows");
    return v;
  }

  void space(Op op, Reader& r, Writer& w) {
    const cotune_space_api* a = api<cotune_space_api>();
    auto* s = static_cast<cotune_space_instance*>(instance_);
    switch (op) {
      case Op::kSpaceDescribe: {
        const cotune_param* const* params = nullptr;
        size_t n = 0;
        check(a->describe(s, &params, &n));
        num_params_ = n;
        w.params(params, n);
        return;
      }
      case Op::kSpaceCheck: {
        const uint64_t n = r.u64();
        const std::vector<double> configs = rows(r, n, num_params());
        std::vector<int32_t> valid(n);
        check(a->check(s, configs.data(), n, valid.data()));
        w.i32s(valid.data(), n);
        return;
      }
      case Op::kSpaceExplain: {
        const std::vector<double> config = rows(r, 1, num_params());
        StringSink out;
        check(a->explain(s, config.data(), &out.sink));
        w.bytes(out.data);
        return;
      }
      case Op::kSpaceSample: {
        const uint64_t seed = r.u64(), n = r.u64();
        std::vector<double> out(n * num_params());
        size_t count = 0;
        check(a->sample(s, seed, n, out.data(), &count));
        w.f64s(out.data(), std::min<size_t>(count, n) * num_params());
        return;
      }
      case Op::kSpaceDescribeFeatures: {
        const cotune_str* names = nullptr;
        size_t n = 0;
        check(a->describe_features(s, &names, &n));
        num_features_ = n;
        w.u64(n);
        for (size_t i = 0; i < n; ++i) w.bytes(view(names[i]));
        return;
      }
      case Op::kSpaceFeaturize: {
        if (num_features_ == SIZE_MAX) {
          const cotune_str* names = nullptr;
          check(a->describe_features(s, &names, &num_features_));
        }
        const uint64_t n = r.u64();
        const std::vector<double> configs = rows(r, n, num_params());
        std::vector<double> out(n * num_features_);
        check(a->featurize(s, configs.data(), n, out.data()));
        w.f64s(out.data(), out.size());
        return;
      }
      case Op::kSpaceLower: {
        const std::vector<double> config = rows(r, 1, num_params());
        const cotune_trace* trace = nullptr;
        check(need(optional_fn(a, &cotune_space_api::lower), "lower")(s, config.data(), &trace));
        w.trace(trace);
        return;
      }
      case Op::kSpaceRender: {
        const std::vector<double> config = rows(r, 1, num_params());
        const int32_t format = r.i32();
        StringSink out;
        check(a->render(s, config.data(), format, &out.sink));
        w.bytes(out.data);
        return;
      }
      case Op::kSpaceParse: {
        const std::string json(r.bytes());
        std::vector<double> out(num_params());
        check(need(optional_fn(a, &cotune_space_api::parse), "parse")(s, str(json), out.data()));
        w.f64s(out.data(), out.size());
        return;
      }
      case Op::kSpaceSetTarget: {
        const std::string target(r.bytes());
        check(need(optional_fn(a, &cotune_space_api::set_target), "set_target")(s, str(target)));
        return;
      }
      case Op::kSpaceMetrics: {
        StringSink out;
        check(need(optional_fn(a, &cotune_space_api::metrics), "metrics")(s, &out.sink));
        w.bytes(out.data);
        return;
      }
      default: throw WireError("not a space call: " + std::to_string(static_cast<uint32_t>(op)));
    }
  }

  void predictor(Op op, Reader& r, Writer& w) {
    const cotune_predictor_api* a = api<cotune_predictor_api>();
    auto* p = static_cast<cotune_predictor_instance*>(instance_);
    switch (op) {
      case Op::kPredictorFit: {
        const uint64_t n = r.u64(), d = r.u64();
        const std::vector<double> x = rows(r, n, d), y = rows(r, n, 1);
        const bool weighted = r.u32() != 0;
        const std::vector<double> wt = rows(r, weighted ? n : 0, 1);
        check(a->fit(p, x.data(), n, d, y.data(), weighted ? wt.data() : nullptr));
        return;
      }
      case Op::kPredictorPredict: {
        const uint64_t n = r.u64(), d = r.u64();
        const std::vector<double> x = rows(r, n, d);
        const bool want_std = r.u32() != 0;
        std::vector<double> mean(n), sd(n);
        check(a->predict(p, x.data(), n, d, mean.data(), want_std ? sd.data() : nullptr));
        w.f64s(mean.data(), n);
        if (want_std) w.f64s(sd.data(), n);
        return;
      }
      case Op::kPredictorSave: {
        StringSink out;
        check(need(optional_fn(a, &cotune_predictor_api::save), "save")(p, &out.sink));
        w.bytes(out.data);
        return;
      }
      case Op::kPredictorLoad: {
        const std::string bytes(r.bytes());
        check(need(optional_fn(a, &cotune_predictor_api::load), "load")(p, bytes.data(), bytes.size()));
        return;
      }
      case Op::kPredictorDescribeFit: {
        StringSink out;
        check(need(optional_fn(a, &cotune_predictor_api::describe_fit), "describe_fit")(p, &out.sink));
        w.bytes(out.data);
        return;
      }
      default: throw WireError("not a predictor call: " + std::to_string(static_cast<uint32_t>(op)));
    }
  }

  // A callback of the searcher's context: a request to the host, answered before propose goes on.
  Reader ask(const Writer& request) {
    send(request);
    std::string why;
    if (!recv_frame(fd_, &callback_reply_, &why)) throw HostGone{};
    Reader r(callback_reply_);
    const Op op = r.op();
    if (op == Op::kFailed) {
      const int32_t code = r.i32();
      throw PluginFailed{code, std::string(r.bytes())};
    }
    if (op != Op::kOk) throw WireError("the host answered a callback with " + std::to_string(static_cast<uint32_t>(op)));
    return r;
  }

  template <class Fn>
  static cotune_error* callback(Fn&& fn) {
    try {
      fn();
      return nullptr;
    } catch (const PluginFailed& f) {
      return host_services()->error_new(f.code, str(f.message));
    } catch (const WireError& e) {
      return host_services()->error_new(COTUNE_ERR_INTERNAL, str(e.what()));
    } catch (const HostGone&) {
      return host_services()->error_new(COTUNE_ERR_CANCELLED, str("the host is gone"));
    }
  }

  static cotune_error* ctx_sample(void* self, uint64_t seed, size_t n, double* out, size_t* out_count) {
    auto* me = static_cast<Server*>(self);
    return callback([&] {
      Reader r = me->ask(Writer(Op::kContextSample).u64(seed).u64(n));
      const std::vector<double> rows = r.f64s();
      const size_t d = me->params_.pointers.size();
      if (d == 0 || rows.size() % d != 0 || rows.size() > n * d) throw WireError("the host sampled a bad number of values");
      std::copy(rows.begin(), rows.end(), out);
      *out_count = rows.size() / d;
    });
  }
  static cotune_error* ctx_check(void* self, const double* configs, size_t n, int32_t* out) {
    auto* me = static_cast<Server*>(self);
    return callback([&] {
      me->ask(Writer(Op::kContextCheck).f64s(configs, n * me->params_.pointers.size())).i32s_into(out, n);
    });
  }
  static cotune_error* ctx_seen(void* self, const double* configs, size_t n, int32_t* out) {
    auto* me = static_cast<Server*>(self);
    return callback([&] {
      me->ask(Writer(Op::kContextSeen).f64s(configs, n * me->params_.pointers.size())).i32s_into(out, n);
    });
  }
  static cotune_error* ctx_score(void* self, const double* configs, size_t n, double* score, double* sd) {
    auto* me = static_cast<Server*>(self);
    return callback([&] {
      Reader r = me->ask(Writer(Op::kContextScore).f64s(configs, n * me->params_.pointers.size()).u32(sd != nullptr));
      r.f64s_into(score, n);
      if (sd) r.f64s_into(sd, n);
    });
  }

  void searcher(Op op, Reader& r, Writer& w) {
    const cotune_searcher_api* a = api<cotune_searcher_api>();
    auto* s = static_cast<cotune_searcher_instance*>(instance_);
    const size_t d = params_.pointers.size();
    switch (op) {
      case Op::kSearcherPropose: {
        const uint64_t n = r.u64(), version = r.u64();
        cotune_search_context ctx{};
        ctx.struct_size = sizeof ctx;
        ctx.ctx = this;
        ctx.num_params = d;
        ctx.sample = &ctx_sample;
        ctx.check = &ctx_check;
        ctx.score = &ctx_score;
        ctx.seen = &ctx_seen;
        ctx.score_version = version;
        std::vector<double> out(n * d);
        size_t count = 0;
        check(a->propose(s, &ctx, n, out.data(), &count));
        w.f64s(out.data(), std::min<size_t>(count, n) * d);
        return;
      }
      case Op::kSearcherObserve: {
        const uint64_t n = r.u64();
        const std::vector<double> configs = rows(r, n, d), scores = rows(r, n, 1);
        const std::vector<int32_t> statuses = r.i32s();
        if (statuses.size() != n) throw WireError("observe: statuses do not match the rows");
        check(a->observe(s, configs.data(), n, scores.data(), statuses.data()));
        return;
      }
      case Op::kSearcherSave: {
        StringSink out;
        check(need(optional_fn(a, &cotune_searcher_api::save), "save")(s, &out.sink));
        w.bytes(out.data);
        return;
      }
      case Op::kSearcherLoad: {
        const std::string bytes(r.bytes());
        check(need(optional_fn(a, &cotune_searcher_api::load), "load")(s, bytes.data(), bytes.size()));
        return;
      }
      default: throw WireError("not a searcher call: " + std::to_string(static_cast<uint32_t>(op)));
    }
  }

  cotune_job* job(uint64_t id) const {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) throw PluginFailed{COTUNE_ERR_NOT_FOUND, "no job " + std::to_string(id)};
    return it->second;
  }

  void executor(Op op, Reader& r, Writer& w) {
    const cotune_executor_api* a = api<cotune_executor_api>();
    auto* e = static_cast<cotune_executor_instance*>(instance_);
    switch (op) {
      case Op::kExecutorCapacity: {
        int32_t c = 1;
        check(a->capacity(e, &c));
        w.i32(c);
        return;
      }
      case Op::kExecutorSubmit:
      case Op::kExecutorAttach: {
        TrialCopy trial;
        r.trial(&trial);
        cotune_job* j = nullptr;
        if (op == Op::kExecutorSubmit) {
          check(a->submit(e, &trial.trial, &j));
        } else {
          const std::string external(r.bytes());
          check(need(optional_fn(a, &cotune_executor_api::attach), "attach")(e, &trial.trial, str(external), &j));
        }
        if (j == nullptr) throw PluginFailed{COTUNE_ERR_INTERNAL, "the plugin returned no job"};
        jobs_[++last_job_] = j;
        w.u64(last_job_);
        return;
      }
      case Op::kExecutorPoll: {
        cotune_job* j = job(r.u64());
        const int32_t timeout_ms = r.i32();
        cotune_trial_result res{};
        res.struct_size = sizeof res;
        check(a->poll(e, j, timeout_ms, &res));
        w.i32(res.status).i32(res.attempts).bytes(view(res.metrics_json)).bytes(view(res.error));
        w.bytes(view(res.log_path)).bytes(view(res.external_id));
        return;
      }
      case Op::kExecutorCancel: check(a->cancel(e, job(r.u64()))); return;
      case Op::kExecutorRelease: {
        const uint64_t id = r.u64();
        a->release(e, job(id));
        jobs_.erase(id);
        return;
      }
      case Op::kExecutorCandidates: {
        TrialCopy study;
        r.trial(&study);
        const uint64_t capacity = r.u64();
        const size_t d = study.trial.num_params;
        std::vector<double> out(capacity * d);
        size_t count = 0;
        check(need(optional_fn(a, &cotune_executor_api::candidates), "candidates")(
            e, &study.trial, capacity ? out.data() : nullptr, capacity, &count));
        w.u64(count).f64s(out.data(), std::min<size_t>(count, capacity) * d);
        return;
      }
      case Op::kExecutorMetrics: {
        TrialCopy study;
        r.trial(&study);
        StringSink out;
        check(need(optional_fn(a, &cotune_executor_api::metrics), "metrics")(e, &study.trial, &out.sink));
        w.bytes(out.data);
        return;
      }
      case Op::kExecutorCheckStudy: {
        TrialCopy study;
        r.trial(&study);
        check(need(optional_fn(a, &cotune_executor_api::check_study), "check_study")(e, &study.trial));
        return;
      }
      default: throw WireError("not an executor call: " + std::to_string(static_cast<uint32_t>(op)));
    }
  }

  int fd_;
  const ComponentRef& ref_;
  int32_t kind_;
  void* instance_ = nullptr;
  ParamSet params_;  // a searcher's parameters
  size_t num_params_ = SIZE_MAX, num_features_ = SIZE_MAX;  // a space's, once described
  std::map<uint64_t, cotune_job*> jobs_;
  uint64_t last_job_ = 0;
  std::string callback_reply_;
};

}  // namespace
}  // namespace isolation

int serve_isolated_component(int fd, const std::string& library, const std::string& component_id) {
  Registry registry;
  if (!registry.load_file(library)) {
    std::fprintf(stderr, "cotune __plugin-host: %s: %s\n", library.c_str(), registry.problems().back().reason.c_str());
    return 2;
  }
  const ComponentRef* ref = nullptr;
  for (const ComponentRef& c : registry.components())
    if (c.info.id == component_id) ref = &c;
  if (ref == nullptr) {
    std::fprintf(stderr, "cotune __plugin-host: %s offers no component %s\n", library.c_str(), component_id.c_str());
    return 2;
  }
  try {
    return isolation::Server(fd, *ref).run();
  } catch (const isolation::HostGone&) {
    return 0;  // the host went away: nothing is waiting for an answer
  }
}

}  // namespace cotune::core
