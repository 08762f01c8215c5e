// The study loop (DESIGN.md "The study loop"): keeps up to `parallel` trials in flight, refits the
// surrogate whenever capacity frees, asks the searcher for what to run next, records every trial in
// the store before it is submitted and commits it the moment it ends, and stops on the budget, a
// target, patience, or a stop request (Ctrl-C). Running the same study again resumes it: finished
// trials stay, trials that were in flight are re-attached (executors that can) or submitted again
// under the same trial record, and the searcher carries on from its saved state.
#ifndef COTUNE_CORE_RUN_STUDY_RUNNER_HPP_
#define COTUNE_CORE_RUN_STUDY_RUNNER_HPP_

#include <cotune/core/store/store_records.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cotune::core {

struct RunOptions {
  std::string store_path = "cotune.db";
  // Progress: "live" redraws one line (for a terminal), "lines" writes one line per finished trial,
  // "quiet" writes nothing but warnings.
  enum class Display { kLive, kLines, kQuiet } display = Display::kLines;
  std::FILE* display_out = stderr;
  // Stop requests (a signal handler increments it): 1 stops proposing and applies the study's
  // on_stop to the trials in flight; 2 or more cancels them at once; one more after the cancel stops
  // waiting for cancelled trials to report back. nullptr: never stopped.
  const std::atomic<int>* stop = nullptr;
  // How long cancelled trials get to report back before the run ends without them (they stay
  // recorded as running: the next run re-attaches to them or runs them again).
  double cancel_grace_s = 60;
  // Advanced by every round of the study loop: a watchdog that sees it stand still after a stop
  // request knows a plugin call does not return (cotune run then exits; see cli/run.cpp).
  std::atomic<std::int64_t>* heartbeat = nullptr;
  // Worker mode (`cotune run --worker`): instead of holding the study alone, join the other workers
  // on it. Each worker proposes and runs its own trials, claimed in the store, learns from the
  // trials the others finish, and takes over the trials of a worker that is gone; together they
  // never start more trials than the budget. Refused while a plain run holds the study (and a
  // plain run is refused while workers are live).
  bool worker = false;
  // Called after each trial is committed (tests use it to interrupt at a chosen point).
  std::function<void(const TrialRecord&)> on_trial_committed;
  // Whether the search skips what trials that ran out of memory say will run out too
  // (model/oom_bound.hpp). Off only to measure what that saves (bench/search_quality_bench.cpp).
  bool oom_bound = true;
};

// The recommended configuration of a single-objective study: among the measured feasible trials of
// the study measured within 15 % of the best, the one the surrogate (fitted on every measurement)
// predicts best (recommended_index, objective.hpp). Under noisy measurements the best measured trial
// is often one that noise lifted; the surrogate's estimate averages the noise out over similar
// configurations.
struct RecommendedConfig {
  std::int64_t trial_id = 0;
  std::int64_t seq = 0;
  std::string config_json;
  double measured = 0;              // its measured objective value
  std::optional<double> predicted;  // the surrogate's estimate; none when it has no fit yet
};

// A feasible measurement of the study's workload, by another study of the store, better than this
// study's best: the study never measures again what the store has measured, so it can end on a
// worse answer than the store holds.
struct BetterElsewhere {
  std::string study;  // its study's name; "" for a run of the imported history
  std::int64_t seq = 0;  // the trial's number, or the history row's in its file
  std::string config_json;
  double measured = 0;
  std::string source;  // the history row's file (cotune import)
};

// One GPU type's constants fitted on the study's measured trials at its end, as `cotune calibrate
// --runs` fits them (the constants that lower the cross-validated error; docs/calibration.md):
// each one's catalogue (or gpu_spec) value, fitted value and one-sigma range.
struct MachineFit {
  struct Constant {
    std::string name;
    double catalogue = 0, fitted = 0, low = 0, high = 0;
    bool at_limit = false;  // the fit stopped at the end of the constant's range
  };
  // The measured runs of that GPU type it was fitted on: the study's trials and the store's earlier
  // runs of the same workload, what the predictor learns from.
  size_t trials = 0;
  bool sampled = false;  // a seeded sample of them (64)
  std::string refused;   // why no constant could be fitted (too few runs, or runs the model times alike)
  std::vector<Constant> constants;
  double mape_before = 0;    // the model's step-time error on those trials with the catalogue's constants
  double held_out_mape = 0;  // and held out (k-fold) with the fitted ones; NaN when too few runs to hold any out
};

struct RunResult {
  std::int64_t study_id = 0;
  StudyStatus status = StudyStatus::kRunning;  // finished or stopped
  std::string reason;                         // why the loop ended
  bool interrupted = false;                   // a stop request ended it
  std::int64_t counted_trials = 0;            // trials that count against the budget, all runs
  std::int64_t trials_this_run = 0;           // trials that finished during this call
  bool already_finished = false;              // the study had finished before this call
  bool found_feasible = false;                // some trial, of any run, measured a feasible configuration
  // Set at the end of a run of a single-objective study with a feasible measured trial (two
  // objectives: the Pareto front is the answer); not set when the study had already finished.
  std::optional<RecommendedConfig> recommended_config;
  // Single objective, at the end of a run that was not stopped: the best such measurement, if any.
  std::optional<BetterElsewhere> better_elsewhere;
  // With the analytic prior's in-study calibration: the constants fitted on every measured trial
  // at the end, per GPU type (empty without it, or when the trials cannot determine any).
  std::map<std::string, MachineFit> prior_calibration;
};

// Runs (or resumes) the study. Throws UserError for bad input (unknown plugins, a study name taken
// by another study file, ...); on any error the study is marked stopped and can be resumed.
RunResult run_study(const StudySpec& spec, const RunOptions& options);

}  // namespace cotune::core

#endif  // COTUNE_CORE_RUN_STUDY_RUNNER_HPP_
