// A searcher put through its paces by `cotune plugins check` (see probe_search.hpp): a small
// built-in space, and a search context that scores every valid configuration alike.
#include "cli/probe_search.hpp"

#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>

#include <cotune/cotune.hpp>

#include <nlohmann/json.hpp>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace cotune::cli {
namespace {

// Three parameters, two of them coupled as a parallel layout's are (a x b at most 16 GPUs), 40 valid
// configurations of 64.
class ProbeSpace {
 public:
  ProbeSpace(std::string_view /*workload*/, std::string_view /*options*/) {
    params_.add_int("a", {1, 2, 4, 8}, 1, "", "first degree");
    params_.add_int("b", {1, 2, 4, 8}, 1, "", "second degree (a x b at most 16)");
    params_.add_categorical("c", {"x", "y", "z", "w"}, 0, "a choice");
    features_ = {"a", "b", "c"};
  }
  const ::cotune::ParamList& params() const { return params_; }
  const std::vector<std::string>& feature_names() const { return features_; }
  void check(const double* c, size_t n, int32_t* valid) {
    for (size_t i = 0; i < n; ++i) valid[i] = explain(c + i * 3).empty() ? 1 : 0;
  }
  std::string explain(const double* c) { return c[0] * c[1] > 16 ? "a x b is above 16" : ""; }
  size_t sample(uint64_t seed, size_t n, double* out) {
    std::mt19937_64 rng(seed);
    size_t found = 0;
    for (size_t tries = 0; found < n && tries < n * 100; ++tries) {
      double* c = out + found * 3;
      c[0] = params_[0].values[rng() % params_[0].num_values];
      c[1] = params_[1].values[rng() % params_[1].num_values];
      c[2] = static_cast<double>(rng() % params_[2].num_choices);
      if (explain(c).empty()) ++found;
    }
    return found;
  }
  void featurize(const double* c, size_t n, double* out) {
    for (size_t i = 0; i < 3 * n; ++i) out[i] = c[i];
  }
  std::string render(const double* c, int32_t format) {
    if (format != COTUNE_RENDER_JSON) throw ::cotune::Error(COTUNE_ERR_UNSUPPORTED, "only JSON");
    static const char* const choices[] = {"x", "y", "z", "w"};  // c's labels, as add_categorical gives them
    return "{\"a\": " + std::to_string(int(c[0])) + ", \"b\": " + std::to_string(int(c[1])) + ", \"c\": \"" +
           choices[int(c[2]) & 3] + "\"}";
  }

 private:
  ::cotune::ParamList params_;
  std::vector<std::string> features_;
};

core::ComponentRef probe_space_ref() {
  static const cotune_component component = ::cotune::space<ProbeSpace>(
      {"org.cotune.space.probe", "probe", "cotune plugins check's space for exercising searchers", "1.0.0"});
  core::ComponentRef ref;
  ref.component = &component;
  ref.info.kind = COTUNE_KIND_SPACE;
  ref.info.id = "org.cotune.space.probe";
  ref.info.name = "probe";
  ref.info.version = "1.0.0";
  ref.info.abi_major = COTUNE_ABI_MAJOR;
  ref.info.abi_minor = COTUNE_ABI_MINOR;
  return ref;
}

// Every valid configuration scores 0 (the predictor knows nothing yet); proposed ones are seen.
struct ProbeContext {
  const core::Space* space = nullptr;
  std::set<std::vector<double>> seen;

  static ProbeContext& of(void* ctx) { return *static_cast<ProbeContext*>(ctx); }
  static cotune_error* sample(void* ctx, uint64_t seed, size_t n, double* out, size_t* out_count) {
    *out_count = of(ctx).space->sample(seed, n, out);
    return nullptr;
  }
  static cotune_error* check(void* ctx, const double* configs, size_t n, int32_t* out_valid) {
    of(ctx).space->check(configs, n, out_valid);
    return nullptr;
  }
  static cotune_error* score(void* ctx, const double* configs, size_t n, double* out_score, double* out_std) {
    std::vector<int32_t> valid(n);
    of(ctx).space->check(configs, n, valid.data());
    for (size_t i = 0; i < n; ++i) {
      out_score[i] = valid[i] ? 0 : -std::numeric_limits<double>::infinity();
      if (out_std != nullptr) out_std[i] = 0;
    }
    return nullptr;
  }
  static cotune_error* is_seen(void* ctx, const double* configs, size_t n, int32_t* out_seen) {
    for (size_t i = 0; i < n; ++i)
      out_seen[i] = of(ctx).seen.count(std::vector<double>(configs + i * 3, configs + (i + 1) * 3)) ? 1 : 0;
    return nullptr;
  }
};

}  // namespace

std::string exercise_searcher(const core::ComponentRef& searcher) {
  core::Space space(probe_space_ref(), "{}", "{}");
  core::Searcher s(searcher, "{}", space, 1);
  ProbeContext probe;
  probe.space = &space;
  cotune_search_context ctx{};
  ctx.struct_size = COTUNE_STRUCT_SIZE(cotune_search_context, score_version);
  ctx.ctx = &probe;
  ctx.num_params = 3;
  ctx.sample = &ProbeContext::sample;
  ctx.check = &ProbeContext::check;
  ctx.score = &ProbeContext::score;
  ctx.seen = &ProbeContext::is_seen;
  ctx.score_version = 1;
  size_t proposed = 0;
  for (int round = 0; round < 3; ++round) {
    std::vector<double> rows(size_t{4} * 3);
    const size_t n = s.propose(ctx, 4, rows.data());
    if (n == 0) throw core::UserError("propose returned no configuration in round " + std::to_string(round + 1));
    std::vector<int32_t> valid(n);
    space.check(rows.data(), n, valid.data());
    std::vector<double> scores(n);
    std::vector<int32_t> statuses(n, COTUNE_STATUS_OK);
    for (size_t i = 0; i < n; ++i) {
      std::vector<double> row(rows.begin() + static_cast<long>(i * 3), rows.begin() + static_cast<long>((i + 1) * 3));
      if (!valid[i]) throw core::UserError("propose returned an invalid configuration: " + space.render(row.data(), COTUNE_RENDER_JSON));
      if (!probe.seen.insert(row).second)
        throw core::UserError("propose returned a configuration already proposed: " + space.render(row.data(), COTUNE_RENDER_JSON));
      scores[i] = row[0] * row[1];  // any measurement: larger layouts are better here
    }
    s.observe(rows.data(), n, scores.data(), statuses.data());
    proposed += n;
  }
  return "propose/observe ok on a built-in space of 3 parameters: " + std::to_string(proposed) +
         " configurations in 3 rounds, every one valid and new";
}

namespace {

// A plugin call cannot be interrupted in this process: a submit, poll or cancel that never returns
// would hang the check. The guard ends the process with the check failed once the call has had the
// trial's time limit and a grace period, naming the call.
class HangGuard {
 public:
  HangGuard(std::string plugin, std::string file, double limit_s)
      : plugin_(std::move(plugin)), file_(std::move(file)), limit_s_(std::min(limit_s, 1e6) + kGraceS) {
    thread_ = std::thread([this] { watch(); });
  }
  ~HangGuard() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  HangGuard(const HangGuard&) = delete;
  HangGuard& operator=(const HangGuard&) = delete;
  // The call about to be made.
  void calling(const char* call) { call_.store(call); }

 private:
  static constexpr double kGraceS = 5;
  void watch() {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(limit_s_), [this] { return done_; })) return;
    std::printf("  FAILED: %s's %s call did not return within %g s (a call that blocks stops a study at its "
                "deadline: docs/study-file.md); the check stops here\n%s: unusable\n",
                plugin_.c_str(), call_.load(), limit_s_, file_.c_str());
    std::fflush(stdout);
    std::_Exit(1);
  }
  std::string plugin_, file_;
  double limit_s_;
  std::atomic<const char*> call_{"submit"};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

std::string exercise_executor(core::Executor& ex, double timeout_s) {
  if (ex.needs_trace())
    return "submit skipped: the executor needs step traces, which the built-in space does not lower (a study on "
           "the llm space exercises it)";
  core::Space space(probe_space_ref(), "{}", "{}");
  std::vector<double> config(space.num_params());
  if (space.sample(1, 1, config.data()) != 1) throw core::UserError("the built-in space sampled no configuration");
  const std::string config_json = space.render(config.data(), COTUNE_RENDER_JSON);
  char dir_template[] = "/tmp/cotune-check-XXXXXX";
  if (::mkdtemp(dir_template) == nullptr) throw core::UserError("cannot create a working directory under /tmp");
  const std::string workdir = dir_template, trial_id = "check/1", workload = "{}";
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } cleanup{workdir};
  cotune_trial t = core::empty_trial();
  t.trial_id = {trial_id.data(), trial_id.size()};
  t.config_json = {config_json.data(), config_json.size()};
  t.workload_json = {workload.data(), workload.size()};
  t.workdir = {workdir.data(), workdir.size()};
  t.params = space.raw_params();
  t.num_params = space.num_params();
  t.config = config.data();
  const auto start = std::chrono::steady_clock::now();
  HangGuard guard(ex.info().id, ex.info().file, timeout_s);
  std::unique_ptr<core::Executor::Job> job;
  try {
    job = ex.submit(t);
  } catch (const core::PluginError& e) {
    return std::string("submit answered an error object (the study's trial would be unavailable): ") + e.what();
  }
  if (!job) throw core::UserError("submit returned no job");
  core::TrialResult r;
  for (;;) {
    guard.calling("poll");
    try {
      r = job->poll(200);
    } catch (const core::PluginError& e) {
      throw core::UserError(std::string("poll answered an error object (a study's trial would fail): ") + e.what());
    }
    if (r.finished()) break;
    if (std::chrono::steady_clock::now() - start > std::chrono::duration<double>(timeout_s)) {
      guard.calling("cancel");
      job->cancel();
      char limit[32];
      std::snprintf(limit, sizeof limit, "%g", timeout_s);
      throw core::UserError("the trial (" + config_json + ") did not end within " + limit +
                            " s; it was cancelled (--submit-timeout gives it longer)");
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string status = core::status_name(r.status);  // "unknown" for a status no ABI defines
  if (core::status_from_name(status) < 0)
    throw core::UserError("poll answered status " + std::to_string(r.status) + ", which no ABI defines (COTUNE_STATUS_OK, "
                          "FAILED, OOM, TIMEOUT, CANCELLED or UNAVAILABLE, cotune.h)");
  std::string names;
  if (!r.metrics_json.empty()) {
    const nlohmann::json m = nlohmann::json::parse(r.metrics_json, nullptr, false);
    if (m.is_discarded() || !m.is_object())
      throw core::UserError("poll answered metrics that are not a JSON object: " + r.metrics_json.substr(0, 200));
    for (auto it = m.begin(); it != m.end(); ++it) names += (names.empty() ? "" : ", ") + it.key();
  }
  if (r.status == COTUNE_STATUS_OK && names.empty()) throw core::UserError("poll answered ok without metrics");
  char took[32];
  std::snprintf(took, sizeof took, "%.2f s", seconds);
  return "submit/poll ok: one trial of the built-in space (" + config_json + ") ended " + status + " in " + took +
         (names.empty() ? std::string() : ", metrics: " + names) + (r.error.empty() ? "" : "; its error: " + r.error);
}

}  // namespace cotune::cli
