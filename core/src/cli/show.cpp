// `cotune show [STUDY] [--store FILE] [--limit N] [--json]`: without a study, lists the studies of
// the store; with one, prints its latest trials and best configurations (the Pareto front for two
// objectives). --json writes the same as one JSON document (schema in docs/show-json.md).
#include <cotune/core/errors.hpp>
#include <cotune/core/history/history_io.hpp>
#include <cotune/core/model/objective.hpp>
#include <cotune/core/model/surrogate.hpp>
#include <cotune/core/report/study_json.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/store/store_location.hpp>
#include <cotune/core/run/study_report.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "cli/command.hpp"
#include "cli/shell_word.hpp"
#include "run/progress.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;
using namespace cotune::core;


// The runs imported as history (cotune import), which no study lists.
void print_history(Store& store) {
  size_t rows = 0, workloads = 0;
  for (const auto& [key, space] : store.workloads()) {
    const size_t n = store.history_for(key, space).size();
    rows += n;
    workloads += n > 0 ? 1 : 0;
  }
  if (rows > 0)
    std::printf("\nhistory: %zu imported run(s) of %zu workload(s); a study of one of them starts from its runs "
                "(cotune export-history --all writes them as CSV)\n",
                rows, workloads);
}

// A study stored as running that no live run holds: its run was killed (SIGKILL) or its machine
// went down. Says which run it was, when it was last heard, and how to go on.
void print_interrupted_run(Store& store, const StudyRecord& study) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::optional<StudyLease> lease = store.study_lease(study.id);
  if (lease)
    std::printf("its run (pid %lld on %s) is gone, last heard %.0f s ago, without stopping the study; "
                "`cotune run` resumes it\n",
                static_cast<long long>(lease->pid), lease->host.c_str(), std::max(0.0, now - lease->heartbeat));
  else
    std::printf("no run or worker holds it now; `cotune run` resumes it\n");
}

void list_studies(Store& store) {
  std::vector<StudySummary> studies = store.list_studies();
  if (studies.empty()) {
    std::printf("no studies in %s\n", store.path().c_str());
    print_history(store);
    return;
  }
  std::printf("%-28s %-11s %-36s %s\n", "STUDY", "STATUS", "TRIALS", "BEST");
  for (const StudySummary& s : studies) {
    std::string best = s.best_objective ? report::objective_metric(s.study) + " " + compact_number(*s.best_objective) : "-";
    const bool being_run = report::study_being_run(store, s.study);
    const std::string trials = status_counts_text(s.trials_by_status, being_run);
    std::printf("%-28s %-11s %-36s %s\n", s.study.name.c_str(), report::study_status_text(s.study, being_run).c_str(),
                trials.c_str(), best.c_str());
  }
  print_history(store);
}

void show_study(Store& store, const std::string& name, std::int64_t limit) {
  std::optional<StudyRecord> study = store.find_study(name);
  if (!study) throw UserError("store " + store.path() + ": no study named '" + name + "' (cotune show lists them)");
  StudySpec spec = spec_from_store(*study);
  Registry registry;
  load_study_plugins(registry, spec);
  std::unique_ptr<Space> space = make_study_space(registry, spec);
  std::vector<TrialRecord> trials = store.trials(study->id);
  const bool being_run = report::study_being_run(store, *study);

  std::printf("study %s (%s)%s%s\n", study->name.c_str(), report::study_status_text(*study, being_run).c_str(),
              spec.description.empty() ? "" : ": ", spec.description.c_str());
  if (study->status == StudyStatus::kRunning && !being_run) print_interrupted_run(store, *study);
  const std::string prior = prior_text(spec.predictor.prior, space.get(), spec.objectives.front().metric);
  std::printf("space %s, predictor %s (prior %s), searcher %s, executor %s, parallel %lld\n", spec.space.name.c_str(),
              spec.predictor.name.c_str(), prior.c_str(),
              spec.searcher.name.c_str(), spec.executor.name.c_str(), static_cast<long long>(spec.parallel));
  std::printf("store %s\n", store.path().c_str());  // a URL's password is redacted
  // The command as it can be pasted: the store it reads (a URL's password left out).
  std::printf("workload key %s (its runs as CSV: cotune export-history --space %s --workload-key %s --store %s)\n",
              study->workload_key.c_str(), shell_word(spec.space.name).c_str(), study->workload_key.c_str(),
              shell_word(store_location_for_command(store.path())).c_str());
  // A calibrated study's model: the constants the run applied, as the store holds them.
  const nlohmann::json::json_pointer calibrated("/cluster/calibration");
  if (spec.workload.contains(calibrated))
    std::printf("calibration %s: %s\n", spec.calibration_file.empty() ? "(in the workload)" : spec.calibration_file.c_str(),
                spec.workload.at(calibrated).dump().c_str());
  for (const ObjectiveSpec& o : spec.objectives) {
    std::printf("objective: %s %s", std::string(to_string(o.direction)).c_str(), o.metric.c_str());
    for (const Constraint& k : o.constraints) {
      if (k.max) std::printf(", %s <= %s", k.metric.c_str(), compact_number(*k.max).c_str());
      if (k.min) std::printf(", %s >= %s", k.metric.c_str(), compact_number(*k.min).c_str());
    }
    std::printf("\n");
  }
  for (const report::WorkerStatus& w : report::worker_statuses(store, study->id, trials))
    std::printf("worker pid %lld on %s: last heard %.0f s ago, %lld trial(s) in flight\n", static_cast<long long>(w.pid),
                w.host.c_str(), w.last_heard_s, static_cast<long long>(w.in_flight));

  const std::string& metric = spec.objectives.front().metric;
  // The latest `limit` trials (all when 0); the best table below still covers every trial.
  const size_t shown = limit > 0 ? static_cast<size_t>(limit) : trials.size();
  const size_t skipped = trials.size() > shown ? trials.size() - shown : 0;
  std::printf("\n%-5s %-12s %-12s %-12s %s\n", "TRIAL", "STATUS", metric.c_str(), "PREDICTED", "CONFIGURATION / NOTE");
  if (skipped > 0)
    std::printf("(%zu earlier trials not shown; --limit 0 shows all %zu)\n", skipped, trials.size());
  for (size_t i = skipped; i < trials.size(); ++i) {
    const TrialRecord& t = trials[i];
    std::string status(to_string(t.status));
    // A trial left in flight by a stopped study is resumed by the next `cotune run`.
    if (!is_finished(t.status) && !being_run) status = "interrupted";
    std::optional<double> value = t.metrics_json ? metric_value(*t.metrics_json, metric) : std::nullopt;
    std::string config;
    try {
      std::vector<double> c = space->parse(t.config_json);
      config = config_summary(*space, c.data());
    } catch (const std::exception&) {
      config = t.config_json;
    }
    // One line per trial: a log tail's line breaks become " | ".
    std::string note;
    if (t.error) {
      note = " -- ";
      bool broke = false;
      for (char ch : *t.error) {
        if (ch == '\n' || ch == '\r') {
          broke = true;
          continue;
        }
        if (broke && !note.empty() && note != " -- ") note += " | ";
        broke = false;
        note += ch;
      }
    }
    std::printf("%-5lld %-12s %-12s %-12s %s%s\n", static_cast<long long>(t.seq), status.c_str(),
                value ? compact_number(*value).c_str() : "-", t.predicted ? compact_number(*t.predicted).c_str() : "-",
                config.c_str(), note.c_str());
  }
  std::printf("\n");
  // Launch arguments for the trial `cotune export` launches, as the run's summary prints them: the
  // recommended one (the predictor's denoised best), else the best measured.
  const std::vector<RankedTrial> best = best_trials(trials, spec.objectives, report::kBestTrialsListed);
  const TrialRecord* recommended = nullptr;
  for (const TrialRecord& t : trials)
    if (study->recommended_trial_id && t.id == *study->recommended_trial_id) recommended = &t;
  const bool apart = recommended != nullptr && !best.empty() && recommended->id != best.front().trial.id;
  print_best_table(stdout, best, spec, *space, apart ? 0 : 1);
  if (apart) {
    std::vector<double> config = space->parse(recommended->config_json);
    std::printf("\nrecommended (best by the predictor's denoised estimate; what cotune export launches): trial %lld, "
                "%s\n",
                static_cast<long long>(recommended->seq), config_summary(*space, config.data()).c_str());
    print_launch_arguments(stdout, *space, recommended->config_json, spec);
  }
  print_other_rows_hint(stdout, best, apart ? 0 : 1, spec, study->name, store.path());
}

int run(int argc, char** argv) {
  po::options_description opts("cotune show [STUDY] [options]");
  std::string name, store_path = default_store_path();
  std::int64_t limit = report::kDefaultTrialLimit;
  opts.add_options()("help,h", "show this help")("store", po::value(&store_path),
                                                  kStoreHelp)(
      "limit", po::value(&limit), "with STUDY: show its latest N trials (default 100; 0: all)")(
      "json", "write one JSON document instead of tables (docs/show-json.md)");
  po::options_description hidden;
  hidden.add_options()("study", po::value(&name));
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
  if (limit < 0) throw UserError("--limit: expected 0 (all trials) or a positive number, got " + std::to_string(limit));
  if (vm.count("help")) {
    std::cout << opts << "\nWithout STUDY: the studies of the store. With STUDY: its latest trials and best\n"
                         "configurations (the Pareto front when it has two objectives), over all its trials.\n";
    return 0;
  }
  Store::Options store_options;
  store_options.create = false;
  Store store(store_path, store_options);
  const bool as_json = vm.count("json") > 0;
  if (as_json) std::cout << (name.empty() ? report::studies_json(store) : report::study_json(store, name, limit)).dump(2) << "\n";
  else if (name.empty()) list_studies(store);
  else show_study(store, name, limit);
  return 0;
}

COTUNE_COMMAND("show", "list studies, or show a study's trials and best configurations", run);
}  // namespace
}  // namespace cotune::cli
