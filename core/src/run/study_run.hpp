// One invocation of the study loop (study_runner.hpp): the components, the store, the trials in
// flight and the bookkeeping between them. Setup and resume live in study_run_setup.cpp; the loop,
// from proposing to committing a trial and handing it to the observers, in study_run_loop.cpp; the
// recommended configuration in study_run_recommend.cpp.
#ifndef COTUNE_RUN_STUDY_RUN_HPP_
#define COTUNE_RUN_STUDY_RUN_HPP_

#include <cotune/core/abi/components.hpp>
#include <cotune/core/model/objective.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/run/study_runner.hpp>
#include <cotune/core/model/constraint_estimate.hpp>
#include <cotune/core/model/oom_bound.hpp>
#include <cotune/core/model/surrogate.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "run/budget.hpp"
#include "run/progress.hpp"

namespace cotune::core {

// A trial in flight (or waiting to be submitted again after a resume).
struct RunningTrial {
  std::int64_t trial_id = 0;
  std::int64_t seq = 0;
  std::vector<double> config;
  std::optional<double> predicted;
  double trace_gpus = 0;  // GPUs of its step trace, for GPU-hours when the executor does not say
  std::unique_ptr<Executor::Job> job;
  bool reattached = false;        // followed from an earlier run through Executor::attach
  bool cancel_requested = false;  // we asked the executor to stop it
  bool start_recorded = true;     // its external job id is in the store (see record_starts)
};

// Where a training row came from: a measured feasible trial of this study may be recommended
// (see RecommendedConfig); infeasible trials and the workload's history only teach the surrogate.
struct TrainingRowOrigin {
  bool feasible = false;
  std::int64_t trial_id = 0;
  std::int64_t seq = 0;
  double objective = 0;
};

// One stored trial, as the observers hear of it (StudyRun::install_observers).
struct FinishedTrial {
  const RunningTrial& trial;
  const TrialOutcome& outcome;    // what the store now holds for it
  const Evaluation* evaluation;   // its objectives, for an ok trial with metrics; nullptr otherwise
  const std::string& metrics_json;
  double gpu_hours;               // trial_gpu_hours (budget.hpp)
  const TrialRecord* stored;      // read back from the store; nullptr when it cannot be
};
using TrialObserver = std::function<void(const FinishedTrial&)>;

// One finished trial as the searcher hears of it.
struct Observation {
  std::int64_t seq = 0;
  std::vector<double> config;
  double score = 0;  // normalised objective; -inf when infeasible, NaN when not measured
  int32_t status = COTUNE_STATUS_OK;
};

class StudyRun {
 public:
  StudyRun(const StudySpec& spec, const RunOptions& options);
  ~StudyRun();
  // The observers hold `this`: a run stays where it was made.
  StudyRun(const StudyRun&) = delete;
  StudyRun& operator=(const StudyRun&) = delete;
  RunResult run();

 private:
  // setup and resume (study_run_setup.cpp)
  void load_components();
  void restrict_to_executor_candidates();
  // See BetterElsewhere (study_runner.hpp).
  std::optional<BetterElsewhere> better_elsewhere() const;
  // The GPUs of a finished trial's step trace, for its GPU-hours where its metrics lack them (0
  // when the space does not lower it).
  double trace_gpus_of(const double* config) const;
  void check_metric_names();
  cotune_trial study_trial(const std::string& workload_json) const;  // a trial without a configuration
  void open_study();
  // One run per study (Store::take_study_lease): refused with who holds it; a holder whose pid is
  // gone on this host, or whose heartbeat stopped, is taken over.
  void take_lease();
  // Before any component is made (an executor may claim a GPU, call Slurm or connect to agents):
  // refused as take_lease and join_study would be, when another live run holds the study. They
  // still decide, in one transaction, when two runs start together.
  void refuse_if_held();
  // The refusal itself: who holds the study, and what to do.
  [[noreturn]] void refuse_held(const StudyLease& holder, bool holder_is_worker) const;
  void renew_lease();  // at most every kLeaseRenewEvery (a worker: its heartbeat)
  void release_lease() noexcept;
  // Whether the lease or worker `holder` still works on the study: its pid alive on this host, a
  // recent heartbeat elsewhere.
  bool holds(const StudyLease& holder) const;
  void restore();
  void restore_history();
  void restore_searcher(const std::vector<TrialRecord>& finished, const std::vector<double>& configs);
  void add_training(const double* config, const std::string& metrics_json, const TrainingRowOrigin& origin = {});
  // A measured configuration that ran out of memory: the OOM bound learns it (and, at the first,
  // every configuration that ran before it).
  void add_out_of_memory(const double* config);
  // Warns when the study's calibration file has no constants for the GPU `probe` runs on.
  void warn_if_uncalibrated(const double* probe) const;

  // worker mode (study_run_worker.cpp)
  void join_study();  // instead of take_lease: refused with who holds the study alone
  // The trials the other workers finished since the last look: to the surrogate, the budget and
  // the searcher; and every configuration they have in flight into seen_.
  void sync_others();
  // The trials in flight of workers that are gone, taken over (at most every kOrphansEvery; now
  // when `now`): re-attached or queued for resubmission, as resume does.
  void adopt_orphans(bool now = false);
  void adopt(TrialRecord& t, std::vector<double> config);  // one trial in flight of an earlier run or worker

  // the loop (study_run_loop.cpp)
  void install_observers();
  void loop();
  void handle_stop_requests();
  void check_budget(double elapsed_s);
  void fill_slots();
  void refit(bool every_row = false);  // every_row: fit now if any row arrived since the last fit
  void note_oom_bound(std::optional<double> before);  // says how the OOM bound moved from `before`
  void cancel_all();
  void observe(const std::vector<Observation>& batch);
  void save_searcher_state();
  ProgressState progress_state() const;
  double elapsed_s() const;

  // the recommended configuration at the end of a run (study_run_recommend.cpp)
  std::optional<RecommendedConfig> recommend();
  // the constants every measured trial determines, per GPU type (study_run_recommend.cpp)
  std::map<std::string, MachineFit> machine_fit() const;

  // trials (study_run_loop.cpp)
  std::vector<RunningTrial> propose(size_t n);
  bool launch(RunningTrial& trial, const std::string* attach_id);
  // Stores the external job id of every trial submitted since the last call. Called after a whole
  // batch is submitted, not after each submit, so an executor may gather the batch into one job
  // (a Slurm job array) before it is asked about any of them.
  void record_starts();
  size_t poll_round();
  Observation commit(RunningTrial& trial, const TrialResult& result);

  const StudySpec& spec_;
  const RunOptions& options_;
  Registry registry_;
  std::unique_ptr<Space> space_;
  std::unique_ptr<Predictor> predictor_;
  std::unique_ptr<Searcher> searcher_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Surrogate> surrogate_;
  std::unique_ptr<ConstraintEstimate> constraints_;  // what the model says of the constraints
  std::unique_ptr<OomBound> oom_bound_;              // what out-of-memory trials say of the rest
  std::unique_ptr<Store> store_;
  StudyRecord study_;
  bool study_file_changed_ = false;  // a field that may change between runs differs from the store's
  bool reopen_finished_ = false;     // its budget changed: a finished study runs on
  std::string workload_json_;
  std::string fingerprint_json_;
  std::string runs_dir_;  // <store dir>/cotune-runs/<study>
  size_t capacity_ = 1;
  int32_t launch_format_ = COTUNE_RENDER_JSON;

  std::vector<TrialObserver> observers_;  // what follows a stored trial, in order
  BudgetTracker budget_;
  Progress progress_;
  std::unordered_set<std::string> seen_;  // Space::key of everything measured, in flight or in history
  std::vector<double> train_configs_;     // measured configurations (row-major) ...
  std::vector<double> train_values_;      // ... and their objective metric
  std::vector<TrainingRowOrigin> train_origins_;  // ... and where each came from
  size_t fitted_on_ = SIZE_MAX;           // training rows at the last refit
  std::set<std::int64_t> observed_;       // trials the searcher has been told about
  std::vector<RunningTrial> running_;
  std::deque<RunningTrial> resubmit_;     // interrupted trials waiting for a slot
  std::string best_config_;

  // worker mode
  bool worker_ = false;
  std::int64_t sync_from_seq_ = 1;    // every trial before this seq is finished and accounted for
  std::set<std::int64_t> accounted_;  // ... and these from it on (finished: ours and the others')
  std::int64_t others_in_flight_ = 0;  // trials in flight at other workers, at the last sync
  bool budget_full_ = false;           // the last proposal found the trial budget given out
  bool taken_by_others_ = false;       // ... or a configuration another worker had just claimed
  std::chrono::steady_clock::time_point orphans_checked_;
  size_t workers_ = 1;  // workers registered on the study, at the last look for orphans

  StudyLease lease_;  // this run, once it holds the study (pid 0 before)
  std::chrono::steady_clock::time_point lease_renewed_;

  std::chrono::steady_clock::time_point started_;
  std::optional<std::chrono::steady_clock::time_point> cancel_deadline_;
  bool stopping_ = false;  // a stop request: propose nothing more, on_stop for the trials in flight
  bool done_ = false;      // the budget or a stopping rule ended the study
  bool cancelled_all_ = false;
  int cancel_level_ = 0;  // the stop requests counted when the trials were cancelled
  int empty_rounds_ = 0;         // proposal rounds that brought nothing new, in a row
  bool said_seen_proposed_ = false;  // the searcher proposed a configuration already seen: said once
  int failed_submissions_ = 0;   // in a row
  int unreported_objective_ = 0;  // ok trials in a row whose metrics lack an objective metric
  // The constraints when the model expects no configuration to meet them (a bound most likely
  // wrong), and the measured trials in a row that broke them before any met them.
  std::string bound_expected_unmet_;
  int infeasible_in_a_row_ = 0;
  // Failed trials in a row with one error text, before any trial of this run was ok.
  int same_failure_ = 0;
  std::string last_failure_;
  bool any_ok_this_run_ = false;
  std::string reason_;
  std::int64_t finished_this_run_ = 0;
};

}  // namespace cotune::core

#endif  // COTUNE_RUN_STUDY_RUN_HPP_
