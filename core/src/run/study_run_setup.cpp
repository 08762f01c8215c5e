// Setting up a study run: plugins, components, the study in the store, and everything a resumed
// study had (finished trials, trials in flight, history of the workload, the searcher's state).
#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/history/history_io.hpp>
#include <cotune/core/abi/log.hpp>
#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/run/search_context.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/core/store/store_location.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "run/environment.hpp"
#include "run/lease.hpp"
#include "studyfile/json_checks.hpp"
#include "run/searcher_state.hpp"
#include "run/study_run.hpp"

namespace cotune::core {
namespace {

ProgressMode progress_mode(RunOptions::Display d) {
  switch (d) {
    case RunOptions::Display::kLive: return ProgressMode::kLive;
    case RunOptions::Display::kQuiet: return ProgressMode::kQuiet;
    case RunOptions::Display::kLines: break;
  }
  return ProgressMode::kLines;
}

// A study name as a directory name: anything but letters, digits, '.', '-' and '_' becomes '_'.
std::string directory_name(const std::string& name) {
  std::string out = name;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  if (out == "." || out == "..") out = "_";
  return out;
}

// Completes the candidates' values the executor left unstated (NaN, ABI 1.7: a table without that
// parameter's column) as the space completes a configuration JSON without those keys: its default,
// or a value it derives from the others (the llm space's dp: the GPUs left after tp, pp and cp).
// Rows the space cannot complete are dropped; returns how many, with the first reason.
size_t complete_unstated(const Space& space, std::vector<double>& rows, std::string* first_why) {
  const size_t n = space.num_params();
  if (n == 0) return 0;
  std::vector<double> kept;
  kept.reserve(rows.size());
  size_t dropped = 0;
  for (size_t r = 0; r + n <= rows.size(); r += n) {
    const double* row = rows.data() + r;
    if (std::none_of(row, row + n, [](double v) { return std::isnan(v); })) {
      kept.insert(kept.end(), row, row + n);
      continue;
    }
    nlohmann::json stated = nlohmann::json::object();
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(row[i])) continue;
      const Param& p = space.params()[i];
      if (p.type == COTUNE_PARAM_CATEGORICAL) stated[p.name] = p.format(row[i]);
      else if (p.type == COTUNE_PARAM_BOOL) stated[p.name] = row[i] != 0;
      else if (p.type == COTUNE_PARAM_INT) stated[p.name] = static_cast<std::int64_t>(row[i]);
      else stated[p.name] = row[i];
    }
    try {
      const std::vector<double> full = space.parse(stated.dump());
      kept.insert(kept.end(), full.begin(), full.end());
    } catch (const std::exception& e) {
      if (dropped++ == 0) *first_why = stated.dump() + ": " + e.what();
    }
  }
  rows = std::move(kept);
  return dropped;
}

}  // namespace

StudyRun::StudyRun(const StudySpec& spec, const RunOptions& options)
    : spec_(spec),
      options_(options),
      budget_(spec),
      progress_(options.display_out, progress_mode(options.display)),
      worker_(options.worker),
      started_(std::chrono::steady_clock::now()) {
  install_observers();
}

StudyRun::~StudyRun() { release_lease(); }

// An executor that answers a fixed set of configurations (a table of runs) lists them: the search
// then proposes only those, instead of spending proposals on what would come back unavailable.
cotune_trial StudyRun::study_trial(const std::string& workload_json) const {
  cotune_trial study = empty_trial();
  study.trial_id = {spec_.name.data(), spec_.name.size()};
  study.workload_json = {workload_json.data(), workload_json.size()};
  study.params = space_->raw_params();
  study.num_params = space_->num_params();
  return study;
}

void StudyRun::restrict_to_executor_candidates() {
  const std::string workload = spec_.workload.dump();
  const cotune_trial study = study_trial(workload);
  std::vector<double> rows;
  try {
    rows = executor_->candidates(study);
  } catch (const PluginError& e) {
    // What the executor's options name (a table without a column the space needs) is bad input.
    if (e.code() == COTUNE_ERR_INVALID_ARGUMENT) throw UserError(spec_.file + ": /executor/options: " + e.what());
    if (e.code() != COTUNE_ERR_UNSUPPORTED) throw;
    return;  // configured to list none: the whole space is searched
  }
  const size_t listed = space_->num_params() == 0 ? 0 : rows.size() / space_->num_params();
  const std::string& name = executor_->info().name;
  std::string why;
  if (const size_t dropped = complete_unstated(*space_, rows, &why))
    log(COTUNE_LOG_WARN, "study",
        "the executor '" + name + "' leaves parameters of " + std::to_string(dropped) +
            " configuration(s) unstated that the space '" + space_->info().name + "' cannot complete, first " + why +
            "; they are left out of the search");
  const Space::Restriction r = space_->restrict_to(rows, "the executor '" + name + "' has no answer for it");
  const std::string first = r.dropped == 0 ? "" : "; first " + r.first_dropped;
  if (listed == 0)
    throw UserError(spec_.file + ": /executor: the executor '" + name + "' answers no configuration of this workload "
                    "(where it left runs out, its warnings above say which and why)");
  if (r.kept == 0)
    throw UserError(spec_.file + ": /executor: the executor '" + name + "' answers " + std::to_string(listed) +
                    " configuration(s) of this workload, none of them valid in the space '" + space_->info().name +
                    "' as the study defines it (compare the workload and the space's options with what the executor "
                    "holds)" + first);
  const std::string over_memory =
      r.over_memory == 0 ? ""
                         : ", " + std::to_string(r.over_memory) +
                               " of them beyond the space's memory estimate (measured runs: they fit, so they are kept)";
  log(r.dropped > 0 ? COTUNE_LOG_WARN : COTUNE_LOG_INFO, "study",
      "the executor '" + name + "' answers " + std::to_string(r.kept) + " configuration(s) of this workload that the "
          "space accepts" + over_memory +
          (r.dropped > 0 ? " (of " + std::to_string(listed) + " listed; " + std::to_string(r.dropped) +
                               " the space refuses" + first + ")"
                         : "") +
          "; the search proposes only those");
}

// Every metric the objectives and constraints name, against what the executor and the space say
// their trials report, before the first trial: a misspelt metric would otherwise run the whole
// budget with every trial infeasible ("the metric was not reported").
void StudyRun::check_metric_names() {
  std::vector<std::pair<std::string, std::string>> named;  // (field, metric)
  for (size_t i = 0; i < spec_.objectives.size(); ++i) {
    const std::string at = spec_.pareto() ? "/objectives/" + std::to_string(i) : "/objective";
    named.emplace_back(at + "/metric", spec_.objectives[i].metric);
    for (size_t j = 0; j < spec_.objectives[i].constraints.size(); ++j)
      named.emplace_back(at + "/constraints/" + std::to_string(j) + "/metric", spec_.objectives[i].constraints[j].metric);
  }
  const std::string workload = spec_.workload.dump();
  const std::optional<std::vector<std::string>> reported = executor_->metrics(study_trial(workload));
  const std::optional<std::vector<std::string>> measured = space_->metrics();
  auto listed = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  for (const auto& [field, metric] : named) {
    if (reported) {
      if (std::find(reported->begin(), reported->end(), metric) != reported->end()) continue;
      const std::string meant = likely_meant(metric, *reported);
      // A throughput and the step time rank one workload's configurations alike.
      const auto has = [&](const char* m) { return std::find(reported->begin(), reported->end(), m) != reported->end(); };
      const bool throughput = metric == "tokens_per_s" || metric == "samples_per_s" || metric == "tflops_per_gpu" ||
                              metric == "mfu";
      std::string instead;
      if (throughput && has("step_time_s"))
        instead = " (for one workload, step_time_s minimized ranks the configurations as " + metric + " maximized does)";
      else if (metric == "step_time_s" && has("tokens_per_s"))
        instead = " (for one workload, tokens_per_s maximized ranks the configurations as step_time_s minimized does)";
      throw UserError(spec_.file + ": " + field + ": the executor '" + executor_->info().name + "' reports no metric \"" +
                      metric + "\"" + (meant.empty() ? "" : " (did you mean \"" + meant + "\"?)") +
                      "; it reports " + listed(*reported) + instead);
    }
    if (!measured || std::find(measured->begin(), measured->end(), metric) != measured->end()) continue;
    const std::string meant = likely_meant(metric, *measured);
    if (!meant.empty())
      throw UserError(spec_.file + ": " + field + ": \"" + metric + "\" is not a metric of the space '" +
                      space_->info().name + "' (did you mean \"" + meant + "\"?); its trials are measured in " +
                      listed(*measured) + ". A job may report metrics of its own, but not one a letter or two from these");
    log(COTUNE_LOG_INFO, "study",
        "the metric \"" + metric + "\" (" + field + ") is not one the space '" + space_->info().name +
            "' names: the executor's jobs must report it");
  }
}

namespace {

// A component's refusal of its options is the study file's error: exit 2, the file and the field.
template <class Make>
auto made_from_options(const StudySpec& spec, const std::string& field, Make make) -> decltype(make()) {
  try {
    return make();
  } catch (const PluginError& e) {
    // Bad options are the study file's (exit 2), a thing they name that does not exist (a command
    // not on PATH, a table file: NOT_FOUND) too; anything else is the plugin's own failure (a bug,
    // a resource it could not get), still said where it was made from.
    if (e.code() != COTUNE_ERR_INVALID_ARGUMENT && e.code() != COTUNE_ERR_NOT_FOUND)
      throw PluginError(e.code(), spec.file + ": " + field + ": the plugin could not start: " +
                                      e.what());
    throw UserError(spec.file + ": " + field + ": " + e.what());
  }
}

}  // namespace

void StudyRun::load_components() {
  load_study_plugins(registry_, spec_);
  space_ = make_study_space(registry_, spec_);
  require_component(registry_, spec_, COTUNE_KIND_EXECUTOR, spec_.executor.name, "/executor");
  require_component(registry_, spec_, COTUNE_KIND_PREDICTOR, spec_.predictor.name, "/predictor");
  require_component(registry_, spec_, COTUNE_KIND_SEARCHER, spec_.searcher.name, "/searcher");
  executor_ = made_from_options(spec_, "/executor/options", [&] {
    return registry_.make_executor(spec_.executor.name, spec_.executor.options.dump(), spec_.executor.isolation);
  });
  if (executor_->needs_trace() && !space_->can_lower())
    throw UserError(spec_.file + ": /executor: the executor '" + executor_->info().name +
                    "' needs step traces, which the space '" + space_->info().name + "' does not produce");
  try {
    executor_->check_study(study_trial(spec_.workload.dump()));
  } catch (const PluginError& e) {
    // Options that do not fit the space (a placeholder naming no parameter) are the study file's.
    if (e.code() == COTUNE_ERR_INVALID_ARGUMENT || e.code() == COTUNE_ERR_NOT_FOUND)
      throw UserError(spec_.file + ": /executor/options: " + e.what());
    throw;
  }
  if (executor_->has_candidates()) restrict_to_executor_candidates();
  check_metric_names();
  predictor_ = made_from_options(spec_, "/predictor/options", [&] {
    return registry_.make_predictor(
        spec_.predictor.name, surrogate_predictor_options(spec_.predictor.options.dump(), spec_.file + ": /predictor/options"),
        spec_.predictor.isolation);
  });
  searcher_ = made_from_options(spec_, "/searcher/options", [&] {
    // Workers starting together would propose the same configurations from the same seed: each
    // draws from its own (the study's seed mixed with its pid).
    const std::uint64_t seed = worker_ ? spec_.seed ^ (static_cast<std::uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ULL)
                                       : spec_.seed;
    return registry_.make_searcher(spec_.searcher.name, spec_.searcher.options.dump(), *space_, seed,
                                   spec_.searcher.isolation);
  });
  capacity_ = static_cast<size_t>(std::max<std::int64_t>(1, std::min<std::int64_t>(spec_.parallel, executor_->capacity())));
  launch_format_ = render_format_code(spec_.format);
  workload_json_ = spec_.workload.dump();

  // One valid configuration: proof that the workload fits somewhere, and the prior's probe.
  std::vector<double> probe(space_->num_params());
  if (space_->sample(spec_.seed, 1, probe.data()) == 0) {
    // Without the launch target's rules there may be some: then the target is what refuses them.
    if (!spec_.launch_target().empty()) {
      StudySpec untargeted = spec_;
      untargeted.format = RenderFormat::kJson;
      const std::unique_ptr<Space> plain = make_study_space(registry_, untargeted);
      if (plain->sample(spec_.seed, 1, probe.data()) == 1)
        throw UserError(spec_.file + ": /format " + spec_.launch_target() + " refuses every configuration of the space '" +
                        space_->info().name + "' for this workload (for example: " + space_->explain(probe.data()) +
                        "); widen the space's options or choose another format");
    }
    // The space's reason for its default configuration (with /space/options' values where the
    // default lies outside them) says more than a guess.
    std::string example;
    try {
      const std::vector<double> defaults = space_->parse("{}");
      example = space_->explain(defaults.data());
    } catch (const std::exception& e) {
      example = e.what();
    }
    throw UserError(spec_.file + ": the space '" + space_->info().name +
                    "' has no valid configuration for this workload and /space/options" +
                    (example.empty() ? std::string(" (does the model fit the cluster?)")
                                     : " (its default configuration: " + example + ")"));
  }
  const ObjectiveSpec& objective = spec_.objectives.front();
  surrogate_ = std::make_unique<Surrogate>(*space_, *predictor_, objective.metric, spec_.predictor.prior,
                                           probe.data());
  surrogate_->calibrate_prior(spec_.predictor.calibrate);
  constraints_ = std::make_unique<ConstraintEstimate>(*space_, spec_.objectives);
  oom_bound_ = std::make_unique<OomBound>(*space_);
  if (!constraints_->empty()) {
    std::string list;
    for (const std::string& c : constraints_->describe()) list += (list.empty() ? "" : ", ") + c;
    log(COTUNE_LOG_INFO, "study",
        "the search skips configurations the performance model, corrected by the measured trials, expects to "
        "break " + list);
    // A bound no configuration meets is most likely a wrong bound: say so before the budget goes.
    constexpr size_t kProbes = 256;
    std::vector<double> drawn(kProbes * space_->num_params());
    const size_t n = space_->sample(spec_.seed + 1, kProbes, drawn.data());
    std::vector<int32_t> broken(n);
    if (n > 0) constraints_->breaks(drawn.data(), n, broken.data());
    if (n > 0 && std::all_of(broken.begin(), broken.end(), [](int32_t b) { return b != 0; })) {
      bound_expected_unmet_ = list;
      log(COTUNE_LOG_WARN, "study",
          "the performance model expects every one of " + std::to_string(n) +
              " sampled configurations to break " + list +
              "; check the bound (the study measures a few anyway, and stops if they do break it)");
    }
  }
  if (spec_.predictor.prior != Prior::kNone && !surrogate_->uses_prior())
    log(COTUNE_LOG_INFO, "study",
        std::string(to_string(spec_.predictor.prior)) + " prior off: " + surrogate_->prior_note());
  warn_if_uncalibrated(probe.data());

  fingerprint_json_ = environment_fingerprint(spec_.hash, {{"space", &space_->info()},
                                                           {"predictor", &predictor_->info()},
                                                           {"searcher", &searcher_->info()},
                                                           {"executor", &executor_->info()}})
                          .dump();
}

void StudyRun::open_study() {
  NewStudy n;
  n.name = spec_.name;
  n.study_json = stored_study_json(spec_);
  n.study_hash = spec_.hash;
  n.legacy_hash = spec_.legacy_hash;
  n.workload_key = spec_.workload_key();
  n.space = spec_.space.name;
  n.objective_json = spec_.objectives_json().dump();
  n.direction = spec_.objectives.front().direction;
  n.environment_json = fingerprint_json_;
  // The study of this name in the store: the same study when it differs only in fields that may
  // change between runs (its hash, or a store's older hash of the whole file, says so; a store of
  // an earlier version holds that older hash, so the fields are compared then).
  if (const std::optional<StudyRecord> found = store_->find_study(n.name)) {
    const std::optional<std::string> changed = changed_study_fields(found->study_json, n.study_json);
    const bool same_hash = found->study_hash == n.study_hash || found->study_hash == n.legacy_hash;
    if (!same_hash && (!changed || !changed->empty()))
      throw UserError("study '" + n.name + "' already exists in " + store_->path() + " with another study file" +
                      (changed && !changed->empty() ? " (it differs in " + *changed + ")" : std::string()) +
                      "; only budget, parallel, description, on_stop, deadlines and a component's isolation may "
                      "change between runs of a study. Give the changed study a new name, use another store "
                      "(--store), or delete the stored one first (cotune store delete " + n.name + ").");
    if (!same_hash) n.legacy_hash = found->study_hash;  // an earlier version's hash of this study
    // Only a changed budget gives a finished study more to do.
    const nlohmann::json before = nlohmann::json::parse(found->study_json, nullptr, false);
    const nlohmann::json now = nlohmann::json::parse(n.study_json, nullptr, false);
    reopen_finished_ = before.is_object() && now.is_object() && before.value("budget", nlohmann::json()) !=
                                                                    now.value("budget", nlohmann::json());
  }
  study_ = store_->create_study(n);
  // The store keeps the file of the latest run (and the current hash) once this run holds the study.
  study_file_changed_ = study_.study_json != n.study_json || study_.study_hash != n.study_hash;

  namespace fs = std::filesystem;
  fs::path store_dir = store_files_directory(options_.store_path);
  runs_dir_ = (store_dir / "cotune-runs" / directory_name(spec_.name)).lexically_normal().string();
}

namespace {

// A run renews its lease this often (lease.hpp: when a lease goes stale).
constexpr auto kLeaseRenewEvery = std::chrono::seconds(5);

}  // namespace

bool StudyRun::holds(const StudyLease& holder) const { return lease_is_live(holder); }

void StudyRun::refuse_held(const StudyLease& holder, bool holder_is_worker) const {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::string ago = std::to_string(static_cast<long long>(std::max(0.0, now - holder.heartbeat)));
  const std::string who = "pid " + std::to_string(holder.pid) + " on " + holder.host;
  if (holder_is_worker)
    throw UserError("study '" + spec_.name + "' is being run by workers (" + who + ", last heard from " + ago +
                    " s ago); join them with `cotune run --worker`, or wait until they have finished");
  if (worker_)
    throw UserError("study '" + spec_.name + "' is being run by " + who + " (last heard from " + ago +
                    " s ago), which holds it alone: workers join a study once no plain `cotune run` holds it");
  throw UserError("study '" + spec_.name + "' is being run by " + who + " (last heard from " + ago +
                  " s ago); one run works on a study at a time: wait for it or stop it (Ctrl-C; its trials " +
                  "are resumed by the next run)");
}

void StudyRun::refuse_if_held() {
  const std::optional<StudyRecord> found = store_->find_study(spec_.name);
  if (!found) return;
  const StudyLease me = this_process_lease();
  auto other = [&](const StudyLease& h) { return !(h.host == me.host && h.pid == me.pid) && holds(h); };
  if (const std::optional<StudyLease> lease = store_->study_lease(found->id); lease && other(*lease))
    refuse_held(*lease, false);
  if (worker_) return;  // workers share the study
  for (const StudyLease& w : store_->study_workers(found->id))
    if (other(w)) refuse_held(w, true);
}

void StudyRun::take_lease() {
  const StudyLease me = this_process_lease();
  const auto holder = store_->take_study_lease(study_.id, me, [&](const StudyLease& h) { return holds(h); });
  if (holder) {
    const std::vector<StudyLease> workers = store_->study_workers(study_.id);
    refuse_held(*holder, std::any_of(workers.begin(), workers.end(), [&](const StudyLease& w) {
                  return w.host == holder->host && w.pid == holder->pid;
                }));
  }
  lease_ = me;
  lease_renewed_ = std::chrono::steady_clock::now();
}

void StudyRun::join_study() {
  const StudyLease me = this_process_lease();
  const auto holder = store_->join_study(study_.id, me, [&](const StudyLease& h) { return holds(h); });
  if (holder) refuse_held(*holder, false);
  lease_ = me;
  lease_renewed_ = std::chrono::steady_clock::now();
}

void StudyRun::renew_lease() {
  if (lease_.pid == 0 || std::chrono::steady_clock::now() - lease_renewed_ < kLeaseRenewEvery) return;
  if (worker_) store_->renew_worker(study_.id, lease_);
  else store_->renew_study_lease(study_.id, lease_);
  lease_renewed_ = std::chrono::steady_clock::now();
}

void StudyRun::release_lease() noexcept {
  if (lease_.pid == 0) return;
  try {
    if (worker_) store_->leave_study(study_.id, lease_);
    else store_->release_study_lease(study_.id, lease_);
  } catch (const std::exception&) {
    // the next run takes a lease over once its holder is gone
  }
  lease_.pid = 0;
}

void StudyRun::add_training(const double* config, const std::string& metrics_json, const TrainingRowOrigin& origin) {
  const nlohmann::json metrics = nlohmann::json::parse(metrics_json, nullptr, /*allow_exceptions=*/false);
  auto v = metric_value(metrics, spec_.objectives.front().metric);
  if (!v) return;
  constraints_->learn(config, metrics);
  // Only this study's trials teach the OOM bound (history rows have no trial id): an earlier run on
  // a machine with more memory would lift it.
  if (oom_bound_->learned_oom() && origin.trial_id != 0) oom_bound_->learn(config, /*out_of_memory=*/false);
  train_configs_.insert(train_configs_.end(), config, config + space_->num_params());
  train_values_.push_back(*v);
  train_origins_.push_back(origin);
}

void StudyRun::warn_if_uncalibrated(const double* probe) const {
  if (spec_.calibration_file.empty() || !space_->can_lower()) return;
  const nlohmann::json& calibration = spec_.workload["cluster"]["calibration"];
  std::string gpu;
  try {
    const cotune_trace& trace = space_->lower(probe);
    gpu.assign(trace.hardware.gpu_name.data, trace.hardware.gpu_name.len);
  } catch (const std::exception&) {
    return;  // the model times nothing here either
  }
  const std::string gap = gpu.empty() ? "" : perf::calibration_gap(calibration, gpu);
  if (!gap.empty())
    log(COTUNE_LOG_WARN, "study",
        spec_.file + ": /calibration: '" + spec_.calibration_file + "' " + gap +
            "; the performance model uses the catalogue's");
}

void StudyRun::add_out_of_memory(const double* config) {
  // Until a trial runs out of memory the bound has nothing to bound: the runs before the first are
  // lowered only then (a long history without one costs nothing).
  if (!oom_bound_->learned_oom()) {
    const size_t p = space_->num_params();
    for (size_t i = 0; i < train_values_.size(); ++i)
      if (train_origins_[i].trial_id != 0) oom_bound_->learn(train_configs_.data() + i * p, false);
  }
  oom_bound_->learn(config, /*out_of_memory=*/true);
}

void StudyRun::restore() {
  std::vector<TrialRecord> trials = store_->trials(study_.id);
  const bool resuming = !trials.empty();
  const size_t p = space_->num_params();
  // Each configuration is parsed once, here: the budget replay and the searcher reuse it (a study of
  // a million trials spends seconds per pass). Finished records are moved, not copied.
  std::vector<TrialRecord> finished;
  std::vector<double> finished_configs;  // p values per record of `finished`
  std::optional<std::int64_t> first_in_flight;  // worker mode: where sync_others starts reading
  std::int64_t last_seq = 0;
  for (TrialRecord& t : trials) {
    last_seq = t.seq;
    std::vector<double> config;
    try {
      config = space_->parse(t.config_json);
    } catch (const std::exception& e) {
      throw UserError("store " + store_->path() + ": study '" + spec_.name + "', trial " + std::to_string(t.seq) +
                      ": the space cannot read its configuration (" + e.what() + ")");
    }
    seen_.insert(space_->key(config.data()));
    if (is_finished(t.status)) {
      if (t.status == TrialStatus::kOk && t.metrics_json) {
        // The store keeps an objective value exactly for the feasible trials.
        TrainingRowOrigin origin{t.objective.has_value(), t.id, t.seq, t.objective.value_or(0)};
        add_training(config.data(), *t.metrics_json, origin);
      }
      if (t.status == TrialStatus::kOom) add_out_of_memory(config.data());
      finished_configs.insert(finished_configs.end(), config.begin(), config.begin() + p);
      finished.push_back(std::move(t));
      continue;
    }
    // A worker takes over only the trials of workers that are gone (adopt_orphans), and accounts
    // for the others' trials as they finish (sync_others).
    if (worker_) {
      if (!first_in_flight) first_in_flight = t.seq;
      continue;
    }
    adopt(t, std::move(config));
  }
  if (worker_) {
    sync_from_seq_ = first_in_flight.value_or(last_seq + 1);
    for (const TrialRecord& t : finished)
      if (t.seq >= sync_from_seq_) accounted_.insert(t.seq);
  }

  std::vector<TrialRecord>().swap(trials);

  // The budget replays the finished trials in the order they ended.
  std::vector<size_t> by_end(finished.size());
  for (size_t i = 0; i < by_end.size(); ++i) by_end[i] = i;
  std::stable_sort(by_end.begin(), by_end.end(), [&](size_t a, size_t b) {
    return finished[a].finished_at.value_or(0) < finished[b].finished_at.value_or(0);
  });
  for (size_t i : by_end) {
    const TrialRecord* t = &finished[i];
    const double* config = finished_configs.data() + i * p;
    std::string metrics = t->metrics_json.value_or("{}");
    // The GPU count from the step trace only where the metrics lack it (lowering costs more than reading).
    const double trace_gpus = metric_value(metrics, "gpus") ? 0 : trace_gpus_of(config);
    std::optional<Evaluation> eval;
    if (t->status == TrialStatus::kOk) eval = evaluate(spec_.objectives, nlohmann::json::parse(metrics, nullptr, false));
    budget_.record(t->status, eval ? &*eval : nullptr, trial_gpu_hours(metrics, t->started_at, t->finished_at, trace_gpus));
    if (budget_.last_improved()) best_config_ = config_summary(*space_, config);
  }
  restore_history();
  restore_searcher(finished, finished_configs);
  if (resuming)
    progress_.note("resuming study '" + spec_.name + "': " + std::to_string(finished.size()) + " finished, " +
                   std::to_string(running_.size() + resubmit_.size()) + " to resume");
  if (!resubmit_.empty() && !executor_->can_attach())
    log(COTUNE_LOG_INFO, "study",
        "the executor '" + executor_->info().name + "' cannot follow jobs of an earlier run (it has no attach): the " +
            std::to_string(resubmit_.size()) + " trial(s) in flight when that run stopped are submitted again; jobs "
            "that outlived it (child processes, cluster jobs) would run twice (docs/PLUGIN_GUIDE.md)");
}

void StudyRun::adopt(TrialRecord& t, std::vector<double> config) {
  RunningTrial r;
  r.trial_id = t.id;
  r.seq = t.seq;
  r.config = std::move(config);
  r.predicted = t.predicted;
  if (executor_->can_attach() && t.external_id && !t.external_id->empty()) {
    if (launch(r, &*t.external_id)) running_.push_back(std::move(r));
  } else {
    resubmit_.push_back(std::move(r));
  }
}

void StudyRun::restore_history() {
  const std::string key = spec_.workload_key();
  size_t unreadable = 0, used = 0;
  auto take = [&](const std::string& config_json, TrialStatus status, const std::string& metrics) {
    std::vector<double> config;
    try {
      config = space_->parse(config_json);
    } catch (const std::exception&) {
      ++unreadable;
      return;
    }
    seen_.insert(space_->key(config.data()));
    // An out-of-memory run of the history does not teach the OOM bound: the workload's key leaves out
    // the executor and the machine's software, and a bound from another machine would take out
    // every configuration above it, not just that one (which stays out of the search as seen).
    if (status == TrialStatus::kOk) add_training(config.data(), metrics);
    ++used;
  };
  // Other studies' trials that ran to an answer: ok, out of memory or past its time limit. One
  // that failed is not taken: a failure there is as often the job's, the executor's or the
  // cluster's as the configuration's, and taking it would take the configuration out of every later
  // study's search (an executor under development fails whatever it is given). Runs a team imports
  // from its logs are its own account of what ran, failures included: all are taken.
  const std::vector<TrialStatus> measured = {TrialStatus::kOk, TrialStatus::kOom, TrialStatus::kTimeout};
  for (const TrialRecord& t : store_->trials_of_workload(key, spec_.space.name, study_.id, measured))
    take(t.config_json, t.status, t.metrics_json.value_or("{}"));
  for (const HistoryRow& h : store_->history_for(key, spec_.space.name)) take(h.config_json, h.status, h.metrics_json);
  // Runs imported from logs and CSV files spell the workload's defaults as the schema's reader does.
  // (A space run in its own process is not called in the host: only its own key then.)
  if (spec_.space.isolation == Isolation::kNone)
    for (const std::string& alt : imported_workload_keys(registry_, spec_.workload, spec_.space.name))
      for (const HistoryRow& h : store_->history_for(alt, spec_.space.name)) take(h.config_json, h.status, h.metrics_json);
  if (used > 0) progress_.note("history: " + std::to_string(used) + " earlier runs of this workload seed the predictor");
  if (unreadable > 0)
    log(COTUNE_LOG_WARN, "study",
        std::to_string(unreadable) + " history rows of this workload have configurations the space cannot read; skipped");
}

void StudyRun::restore_searcher(const std::vector<TrialRecord>& finished, const std::vector<double>& configs) {
  const size_t p = space_->num_params();
  // A worker's searcher is its own (its own seed): a saved state is another process's, whose random
  // stream it would repeat, proposing what that process proposes next. It learns every trial instead.
  if (searcher_->can_save() && !worker_) {
    if (auto blob = store_->load_searcher_state(study_.id)) {
      try {
        SearcherState state = decode_searcher_state(*blob);
        searcher_->load(state.plugin_bytes);
        observed_ = std::move(state.observed);
      } catch (const std::exception& e) {
        log(COTUNE_LOG_WARN, "study",
            std::string("the saved searcher state cannot be restored (") + e.what() +
                "); the searcher starts afresh and is told about every finished trial");
        observed_.clear();
      }
    }
  }
  // Tell it about what finished since its state was saved (everything, without a state).
  std::vector<Observation> missed;
  for (size_t i = 0; i < finished.size(); ++i) {
    const TrialRecord& t = finished[i];
    if (observed_.count(t.seq) || t.status == TrialStatus::kCancelled) continue;
    Observation o;
    o.seq = t.seq;
    o.config.assign(configs.begin() + i * p, configs.begin() + (i + 1) * p);
    o.status = status_from_name(to_string(t.status));
    o.score = std::numeric_limits<double>::quiet_NaN();
    if (t.status == TrialStatus::kOk) {
      o.score = -std::numeric_limits<double>::infinity();
      if (t.objective) {
        // Feasible: the store kept its objective. The searcher's score is that of the first metric.
        o.score = normalised_score(*t.objective, spec_.objectives.front().direction);
      }
    }
    missed.push_back(std::move(o));
  }
  if (!missed.empty()) observe(missed);
}

RunResult StudyRun::run() {
  store_ = std::make_unique<Store>(options_.store_path);
  refuse_if_held();
  load_components();
  open_study();
  RunResult result;
  result.study_id = study_.id;
  if (study_.status == StudyStatus::kFinished && !reopen_finished_) {
    result.status = StudyStatus::kFinished;
    result.already_finished = true;
    result.reason = "nothing left to run";
    result.counted_trials = 0;
    for (const TrialRecord& t : store_->trials(study_.id)) {
      if (counts_against_budget(t.status)) ++result.counted_trials;
      // An ok trial's objective is stored when it was feasible.
      if (t.status == TrialStatus::kOk && t.objective) result.found_feasible = true;
      // The recommendation its last run kept, as export takes it.
      if (study_.recommended_trial_id && t.id == *study_.recommended_trial_id && t.objective)
        result.recommended_config = RecommendedConfig{t.id, t.seq, t.config_json, *t.objective, std::nullopt};
    }
    return result;
  }
  if (worker_) join_study();
  else take_lease();
  if (study_file_changed_) {
    const std::string file = stored_study_json(spec_);
    store_->update_study_file(study_.id, file, spec_.hash);
    if (file != study_.study_json)
      progress_.note("study '" + spec_.name + "': its study file changed in what may change between runs (" +
                     "budget, parallel, description, on_stop, deadlines, isolation); the store keeps the new one");
  }
  store_->set_study_status(study_.id, StudyStatus::kRunning);
  store_->set_study_environment(study_.id, fingerprint_json_);
  // A worker leaving a study that others still work on leaves its status to them.
  auto others_working = [&] {
    if (!worker_) return false;
    const std::vector<StudyLease> workers = store_->study_workers(study_.id);
    return std::any_of(workers.begin(), workers.end(), [&](const StudyLease& w) { return holds(w); });
  };
  try {
    restore();
    if (worker_) adopt_orphans(true);
    loop();
  } catch (...) {
    release_lease();
    progress_.clear();
    // Trials in flight keep their "running" record: the next run re-attaches or resubmits them
    // (another worker takes them over).
    try {
      if (!others_working()) store_->set_study_status(study_.id, StudyStatus::kStopped);
    } catch (const std::exception&) {
      // The original error says more than this one.
    }
    throw;
  }
  progress_.clear();
  result.status = stopping_ ? StudyStatus::kStopped : StudyStatus::kFinished;
  if (worker_) release_lease();
  if (!stopping_ || !others_working()) store_->set_study_status(study_.id, result.status);
  result.reason = reason_;
  result.interrupted = stopping_;
  result.counted_trials = budget_.counted();
  result.trials_this_run = finished_this_run_;
  result.found_feasible = budget_.any_feasible();
  if (!stopping_) result.better_elsewhere = better_elsewhere();
  result.recommended_config = recommend();
  // What the runs say of the machine: a report, skipped when the user asked the run to stop.
  if (surrogate_->calibrates_prior() && !stopping_) result.prior_calibration = machine_fit();
  // Kept with the study, so that `cotune export` takes it later.
  if (result.recommended_config) store_->set_study_recommended(study_.id, result.recommended_config->trial_id);
  release_lease();
  // The study's folder of trial directories, and the store's folder of studies, when left empty.
  std::error_code ignored;
  if (std::filesystem::remove(runs_dir_, ignored)) std::filesystem::remove(std::filesystem::path(runs_dir_).parent_path(), ignored);
  return result;
}

double StudyRun::trace_gpus_of(const double* config) const {
  if (!space_->can_lower() || !space_->valid(config)) return 0;
  try {
    return space_->lower(config).gpus;
  } catch (const std::exception&) {
    return 0;  // a configuration the space could not lower: its trial failed, using no GPU
  }
}

std::optional<BetterElsewhere> StudyRun::better_elsewhere() const {
  if (spec_.objectives.size() != 1) return std::nullopt;
  const bool maximize = spec_.objectives.front().direction == Direction::kMaximize;
  std::optional<double> best = budget_.best();
  std::optional<TrialRecord> found;
  for (TrialRecord& t : store_->trials_of_workload(spec_.workload_key(), spec_.space.name, study_.id)) {
    const Evaluation e = evaluate(spec_.objectives, nlohmann::json::parse(t.metrics_json.value_or("{}"), nullptr, false));
    if (!e.feasible) continue;  // under this study's constraints
    const double v = e.values.front();
    if (best && !(maximize ? v > *best : v < *best)) continue;
    best = v;
    t.objective = v;
    found = std::move(t);
  }
  // Imported runs too (under the study's key, or as the import spelled the workload): a table
  // imported before a replay study of it leaves the study nothing to measure.
  std::optional<HistoryRow> from_history;
  std::vector<std::string> keys = {spec_.workload_key()};
  if (spec_.space.isolation == Isolation::kNone)
    for (std::string& alt : imported_workload_keys(registry_, spec_.workload, spec_.space.name))
      if (alt != keys[0]) keys.push_back(std::move(alt));
  for (const std::string& key : keys)
    for (HistoryRow& h : store_->history_for(key, spec_.space.name)) {
      if (h.status != TrialStatus::kOk) continue;
      const Evaluation e = evaluate(spec_.objectives, nlohmann::json::parse(h.metrics_json, nullptr, false));
      if (!e.feasible) continue;
      const double v = e.values.front();
      if (best && !(maximize ? v > *best : v < *best)) continue;
      best = v;
      found.reset();
      from_history = std::move(h);
    }
  if (from_history)
    return BetterElsewhere{"", from_history->row_number, from_history->config_json, *best, from_history->source};
  if (!found) return std::nullopt;
  const std::optional<StudyRecord> other = store_->study(found->study_id);
  return BetterElsewhere{other ? other->name : "#" + std::to_string(found->study_id), found->seq, found->config_json,
                         *found->objective, ""};
}

RunResult run_study(const StudySpec& spec, const RunOptions& options) {
  StudyRun run(spec, options);
  return run.run();
}

}  // namespace cotune::core
