// `cotune run STUDY.json [--store FILE] [--worker] [--quiet]`: runs a study (or resumes it) to the
// end of its budget, then prints the best configurations; with --worker, shares it with the other
// workers on it. Ctrl-C (SIGINT) or SIGTERM stops it cleanly (exit
// 130); running the same command again resumes it.
#include <cotune/core/abi/call_watch.hpp>
#include <cotune/core/abi/log.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/store/store_location.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/core/report/study_html.hpp>
#include <cotune/core/report/study_json.hpp>
#include <cotune/core/run/study_report.hpp>
#include <cotune/core/run/study_runner.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <boost/program_options.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli/command.hpp"
#include "cli/shell_word.hpp"
#include "run/progress.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;
using namespace cotune::core;


std::atomic<int> g_stop_requests{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free counter");

extern "C" void on_stop_signal(int) { g_stop_requests.fetch_add(1); }

std::atomic<std::int64_t> g_loop_heartbeat{0};

// After a stop request the study loop goes round at least every few hundred milliseconds (cancelling
// or waiting for its trials). When it stands still this long, a plugin call does not return.
constexpr auto kHungAfter = std::chrono::seconds(3);
// The exit status when a plugin call overran its deadline.
constexpr int kOverdueExit = 3;

// Installs the stop handlers for its lifetime and restores the previous ones after. A watchdog
// thread ends the process when, after a stop request, the loop stops going round: a plugin hung in
// a call would otherwise keep cotune run alive until SIGKILL. Exiting then loses nothing: every
// finished trial is stored, and the trials in flight stay recorded as running for the next run to
// re-attach to or run again.
class StopSignals {
 public:
  // `store_path` and `study`: the study to record as stopped when the watchdog ends the process.
  StopSignals(std::string store_path, std::string study) : store_path_(std::move(store_path)), study_(std::move(study)) {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
    watchdog_ = std::thread([this] { watch(); });
  }
  ~StopSignals() {
    done_.store(true);
    watchdog_.join();
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  void watch() {
    std::int64_t seen = 0;
    std::optional<std::chrono::steady_clock::time_point> still_since;
    while (!done_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      stop_if_overdue();
      if (g_stop_requests.load() == 0) continue;
      const std::int64_t beat = g_loop_heartbeat.load();
      const auto now = std::chrono::steady_clock::now();
      if (!still_since || beat != seen) {
        seen = beat;
        still_since = now;
      } else if (now - *still_since > kHungAfter && !done_.load()) {
        std::fprintf(stderr,
                     "\ncotune run: stop requested, but a plugin call has not returned for %lld s; exiting now. The "
                     "trials in flight stay recorded as running: the next cotune run of the study re-attaches to "
                     "them or runs them again.\n",
                     static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(now - *still_since).count()));
        std::fflush(stderr);
        record_stopped(store_path_, study_);
        std::_Exit(128 + SIGINT);
      }
    }
  }

  // A plugin call past its deadline ("deadlines" in the study file) cannot be taken back; the
  // study stops here, as after a hung call on Ctrl-C.
  // The study is no longer running once this process ends: say so in the store (through a
  // connection of this thread's own; the loop's is inside the hung call). Best effort.
  static void record_stopped(const std::string& store_path, const std::string& study) {
    try {
      Store::Options o;
      o.create = false;
      o.busy_timeout_s = 2;
      Store store(store_path, o);
      if (std::optional<StudyRecord> s = store.find_study(study); s && s->status == StudyStatus::kRunning)
        store.set_study_status(s->id, StudyStatus::kStopped);
    } catch (const std::exception&) {
      // The next run of the study sets its status anyway.
    }
  }

  void stop_if_overdue() const {
    const std::optional<OverdueCall> late = CallWatch::overdue();
    if (!late) return;
    std::fprintf(stderr,
                 "\ncotune run: the %s '%s' has been in its %s call for %.1f s, past its deadline of %g s "
                 "(\"deadlines\": {\"%s\": ...} in the study file); the study stops here. Finished trials are "
                 "stored; the trials in flight stay recorded as running: the next cotune run of the study "
                 "re-attaches to them or runs them again.\n",
                 to_string(late->kind), late->plugin.c_str(), late->call.c_str(), late->running_s, late->deadline_s,
                 to_string(late->kind));
    std::fflush(stderr);
    record_stopped(store_path_, study_);
    std::_Exit(kOverdueExit);
  }

  std::string store_path_, study_;
  struct sigaction old_int_ {}, old_term_ {};
  std::atomic<bool> done_{false};
  std::thread watchdog_;
};

// The recommended configuration (RecommendedConfig), only when it is not the best measured one.
void print_recommended(const StudySpec& spec, const RunResult& result, const std::vector<RankedTrial>& best,
                       const Space& space) {
  if (!result.recommended_config || best.empty()) return;
  const RecommendedConfig& r = *result.recommended_config;
  if (r.trial_id == best.front().trial.id) return;
  std::vector<double> config = space.parse(r.config_json);
  std::string estimate = r.predicted ? ", " + compact_number(*r.predicted) + " estimated" : "";
  std::printf("\nrecommended (best by the predictor's denoised estimate):\n");
  std::printf("  trial %lld: %s %s measured%s; %s\n", static_cast<long long>(r.seq),
              spec.objectives.front().metric.c_str(), compact_number(r.measured).c_str(), estimate.c_str(),
              config_summary(space, config.data()).c_str());
  print_launch_arguments(stdout, space, r.config_json, spec);
}

// What the trials say of the machine (RunResult::prior_calibration): the constants they determine,
// per GPU type, as `cotune calibrate --runs` would fit them, and how to keep them as a file. The
// starting point is the study's calibration file where it has one, else the catalogue.
void print_machine(const RunResult& result, const std::string& export_history_command, const StudySpec& spec) {
  if (result.prior_calibration.empty()) return;
  const std::string& calibration_file = spec.calibration_file;
  nlohmann::json calibration;
  if (spec.workload.contains("cluster") && spec.workload["cluster"].contains("calibration"))
    calibration = spec.workload["cluster"]["calibration"];
  // The starting point of a GPU type: the file's constants where it has some for it.
  const auto covered = [&](const std::string& gpu) {
    return !calibration_file.empty() && perf::calibration_covers(calibration, gpu);
  };
  std::printf("\nthe machine as this workload's measured runs say (this study's and earlier ones in the store, "
              "fitted as `cotune calibrate` fits; docs/calibration.md):\n");
  bool fitted = false;
  for (const auto& [gpu, fit] : result.prior_calibration) {
    const std::string start = covered(gpu) ? "the constants of " + calibration_file
                              : calibration_file.empty()
                                  ? std::string("the catalogue's constants")
                                  : "the catalogue's constants (" + calibration_file + " has none for it)";
    const std::string was = covered(gpu) ? "before" : "catalogue";
    const std::string runs =
        std::to_string(fit.trials) + (fit.trials == 1 ? " run" : " runs") + (fit.sampled ? " (a sample)" : "");
    if (!fit.refused.empty()) {
      std::printf("  %s, %s: no constant can be fitted: %s\n", gpu.c_str(), runs.c_str(), fit.refused.c_str());
    } else if (fit.constants.empty()) {
      std::printf("  %s, %s: step-time error %.1f %% with %s; no constant lowered the cross-validated error by "
                  "more than the runs' scatter\n",
                  gpu.c_str(), runs.c_str(), 100 * fit.mape_before, start.c_str());
    } else {
      fitted = true;
      char held_out[64] = " (too few runs to hold any out); fitted";
      if (std::isfinite(fit.held_out_mape))
        std::snprintf(held_out, sizeof held_out, ", %.1f %% held out with", 100 * fit.held_out_mape);
      std::printf("  %s, %s: step-time error %.1f %% with %s%s:\n", gpu.c_str(), runs.c_str(),
                  100 * fit.mape_before, start.c_str(), held_out);
      for (const MachineFit::Constant& c : fit.constants)
        std::printf("    %-28s %10s  (one sigma %s to %s; %s %s)%s\n", c.name.c_str(), compact_number(c.fitted).c_str(),
                    compact_number(c.low).c_str(), compact_number(c.high).c_str(), was.c_str(),
                    compact_number(c.catalogue).c_str(),
                    c.at_limit ? "; stopped at the end of its range: the runs ask more of it than the model can give"
                               : "");
    }
  }
  // Files named after the study: a team's own runs.csv (a replay table) is not written over.
  if (fitted) {
    const std::string runs = shell_word(spec.name + "-runs.csv"), cal = shell_word(spec.name + "-calibration.json");
    std::printf("  as a calibration file: %s -o %s && cotune calibrate --runs %s --out %s\n",
                export_history_command.c_str(), runs.c_str(), runs.c_str(), cal.c_str());
  }
}

void print_summary(const StudySpec& spec, const RunResult& result, const std::string& store_path) {
  Store store(store_path);
  std::optional<StudyRecord> study = store.study(result.study_id);
  std::map<TrialStatus, std::int64_t> counts;
  std::vector<TrialRecord> trials = store.trials(result.study_id);
  for (const TrialRecord& t : trials) ++counts[t.status];
  std::printf("\nstudy '%s' %s: %s\n", spec.name.c_str(),
              result.interrupted ? "stopped" : (result.already_finished ? "had already finished" : "finished"),
              result.reason.c_str());
  std::int64_t infeasible = 0;  // ok, but breaking a constraint (or without the objective): no objective stored
  for (const TrialRecord& t : trials) infeasible += t.status == TrialStatus::kOk && !t.objective;
  std::printf("trials: %s%s\n\n", status_counts_text(counts, study && study->status == StudyStatus::kRunning).c_str(),
              infeasible > 0 ? (" (" + std::to_string(infeasible) + " of the ok ones infeasible)").c_str() : "");

  Registry registry;
  load_study_plugins(registry, spec);
  std::unique_ptr<Space> space = make_study_space(registry, spec);
  std::vector<RankedTrial> best = best_trials(trials, spec.objectives, report::kBestTrialsListed);
  // The launch arguments of what `cotune export` launches only: the best measured trial's, or the
  // recommended one's below it; the other rows' come from `cotune export --trial N`.
  const bool recommended_apart =
      result.recommended_config && !best.empty() && result.recommended_config->trial_id != best.front().trial.id;
  print_best_table(stdout, best, spec, *space, recommended_apart ? 0 : 1);
  print_other_rows_hint(stdout, best, recommended_apart ? 0 : 1, spec, spec.name, store_path);
  print_recommended(spec, result, best, *space);
  if (const auto& b = result.better_elsewhere; b && b->study.empty()) {
    std::printf("\nthe store's imported history holds a better measurement of this workload: %s row %lld, %s %s, %s\n"
                "(a study does not measure again what the history measured; its launch arguments come from a "
                "study that measures it, or from the run that logged it)\n",
                b->source.c_str(), static_cast<long long>(b->seq), spec.objectives.front().metric.c_str(),
                compact_number(b->measured).c_str(), b->config_json.c_str());
  } else if (b) {
    bool password_left_out = false;
    std::printf("\nthe store holds a better measurement of this workload: study '%s', trial %lld, %s %s, %s\n"
                "(a study does not measure again what another study of the workload measured; cotune export %s "
                "--trial %lld --store %s gives its launch arguments)\n",
                b->study.c_str(), static_cast<long long>(b->seq), spec.objectives.front().metric.c_str(),
                compact_number(b->measured).c_str(), b->config_json.c_str(), shell_word(b->study).c_str(),
                static_cast<long long>(b->seq),
                shell_word(store_location_for_command(store_path, &password_left_out)).c_str());
  }
  std::vector<TrialRecord>().swap(trials);  // the report reads the study itself: not twice in memory
  bool password_left_out = false;
  const std::string name = shell_word(spec.name),
                    store_word = shell_word(store_location_for_command(store_path, &password_left_out));
  if (study)
    print_machine(result,
                  "cotune export-history --space " + shell_word(spec.space.name) + " --workload-key " +
                      study->workload_key + " --store " + store_word,
                  spec);
  std::string abs_store = store_location_for_display(store_path);
  std::printf("\nstore: %s\n", abs_store.c_str());
  if (password_left_out)
    std::printf("(the commands below leave the store's password out: give it by PGPASSWORD, a password file "
                "(PGPASSFILE) or COTUNE_STORE)\n");
  std::printf("details: cotune show %s --store %s\n", name.c_str(), store_word.c_str());
  if (!best.empty()) {
    const std::string target = spec.launch_target().empty() ? "json" : spec.launch_target();
    const bool other = result.recommended_config && result.recommended_config->trial_id != best.front().trial.id;
    std::printf("launch: cotune export %s --format %s --store %s  (%s)\n", name.c_str(), target.c_str(),
                store_word.c_str(), other ? "the recommended trial, not the best measured" : "the best measured trial");
  }
  std::printf("%s\n", report::write_run_report(store_path, spec.name).c_str());
  if (result.interrupted)
    std::printf("resume: cotune run %s --store %s\n", shell_word(spec.file).c_str(), store_word.c_str());
}

// `--json`: the run's outcome and the study as `cotune show STUDY --json` writes it (docs/show-json.md).
void print_json(const StudySpec& spec, const RunResult& result, const std::string& store_path) {
  const std::string report = report::write_run_report(store_path, spec.name);
  nlohmann::json doc;
  {
    Store::Options o;
    o.create = false;
    Store store(store_path, o);
    doc = report::study_json(store, spec.name, 0);
  }
  nlohmann::json run = {{"status", std::string(to_string(result.status))},
                        {"reason", result.reason},
                        {"interrupted", result.interrupted},
                        {"trials_this_run", result.trials_this_run},
                        {"counted_trials", result.counted_trials},
                        {"recommended", nullptr},
                        {"report", nullptr}};
  if (result.recommended_config) run["recommended"] = result.recommended_config->seq;
  nlohmann::json machine = nlohmann::json::object();
  for (const auto& [gpu, fit] : result.prior_calibration) {
    nlohmann::json constants = nlohmann::json::array();
    for (const MachineFit::Constant& c : fit.constants)
      constants.push_back(
          {{"name", c.name}, {"catalogue", c.catalogue}, {"fitted", c.fitted}, {"low", c.low}, {"high", c.high},
           {"at_limit", c.at_limit}});
    machine[gpu] = {{"trials", fit.trials},
                    {"sampled", fit.sampled},
                    {"refused", fit.refused.empty() ? nlohmann::json() : nlohmann::json(fit.refused)},
                    {"mape_before", fit.mape_before},
                    {"held_out_mape", std::isfinite(fit.held_out_mape) ? nlohmann::json(fit.held_out_mape)
                                                                       : nlohmann::json()},
                    {"constants", constants}};
  }
  run["prior_calibration"] = machine;
  const std::string prefix = "report: ";
  if (report.rfind(prefix, 0) == 0) run["report"] = report.substr(prefix.size());
  doc["run"] = run;
  std::cout << doc.dump(2) << "\n";
}

int run(int argc, char** argv) {
  po::options_description opts("cotune run STUDY.json [options]");
  std::string study_path, store_path = default_store_path();
  opts.add_options()("help,h", "show this help")("store", po::value(&store_path),
                                                  kStoreHelp)(
      "quiet,q", "no progress output and no informational log lines (warnings and errors stay), only the "
                 "final table")(
      "worker", "join the other workers on the study instead of holding it alone: several `cotune run --worker` "
                "(on this host or others sharing a postgresql:// store) each claim and run trials, learn from "
                "each other's, take over those of a worker that dies, and stop together at the budget")(
      "json", "at the end, write the run's outcome and the study as one JSON document instead of the table "
              "(docs/show-json.md); progress still goes to stderr");
  po::options_description hidden;
  hidden.add_options()("study", po::value(&study_path));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("study", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(e.what());
  }
  if (vm.count("help")) {
    std::cout << opts
              << "\nRuns the study to the end of its budget and prints the best configurations, and\n"
                 "(one objective) the recommended one when it is another: the measured feasible\n"
                 "configuration the predictor's denoised estimate ranks best. On a terminal a live\n"
                 "line shows the progress; otherwise one line per finished trial.\n"
                 "Ctrl-C stops cleanly (exit 130); the same command resumes the study. A plugin call\n"
                 "past its deadline (\"deadlines\" in the study file) stops it with exit 3.\n"
                 "Exit status: 0 the study ended with a feasible configuration measured; 1 it ended\n"
                 "without one (every trial failed, ran out of memory or broke a constraint, or the store\n"
                 "had measured every configuration), or an error\n"
                 "stopped it (the message says which); 2 bad input; 3 a plugin call past its deadline;\n"
                 "130 stopped by Ctrl-C or SIGTERM.\n"
                 "One plain run holds a study at a time; with --worker any number share it (docs/store.md),\n"
                 "and a plain run is refused while workers are live.\n";
    return 0;
  }
  if (study_path.empty()) throw UserError("usage: cotune run STUDY.json [--store FILE] [--worker] [--quiet] [--json]");

  // Quiet: the informational log lines go with the progress (COTUNE_LOG still chooses, when set).
  if (vm.count("quiet") && std::getenv("COTUNE_LOG") == nullptr && log_level() < COTUNE_LOG_WARN)
    set_log_level(COTUNE_LOG_WARN);
  StudySpec spec = load_study_file(study_path);
  CallWatch::set_deadlines(spec.deadlines);
  RunOptions options;
  options.store_path = store_path;
  options.display = vm.count("quiet")               ? RunOptions::Display::kQuiet
                    : isatty(fileno(stderr)) != 0 ? RunOptions::Display::kLive
                                                    : RunOptions::Display::kLines;
  options.worker = vm.count("worker") > 0;
  options.stop = &g_stop_requests;
  options.heartbeat = &g_loop_heartbeat;
  RunResult result;
  {
    StopSignals signals(store_path, spec.name);
    result = run_study(spec, options);
  }
  if (vm.count("json")) print_json(spec, result, store_path);
  else print_summary(spec, result, store_path);
  if (result.interrupted) return 130;
  if (!result.found_feasible && result.status == StudyStatus::kFinished) {
    // Nothing was left to run: earlier studies of the workload (or its imported history) measured
    // every configuration the study may run. The summary named the best of them; this study has no
    // trial to export.
    if (result.counted_trials == 0 && result.trials_this_run == 0 && result.better_elsewhere) {
      std::fprintf(stderr, "cotune run: study '%s' ran no trial: the store had measured every configuration it may "
                   "run, in earlier studies of the workload or its imported history (a store counts them as "
                   "measured; a fresh --store measures them again)\n", spec.name.c_str());
      return 1;
    }
    std::fprintf(stderr, "cotune run: study '%s' ended without measuring a feasible configuration (see the trials' "
                 "errors: cotune show %s)\n", spec.name.c_str(), spec.name.c_str());
    return 1;
  }
  return 0;
}

COTUNE_COMMAND("run", "run or resume a study (the tuning loop)", run);
}  // namespace
}  // namespace cotune::cli
