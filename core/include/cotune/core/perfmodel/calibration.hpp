// Calibration of the performance model on measured runs: the hardware and software constants that
// the catalogue only guesses (GEMM efficiency per dtype, attention and memory efficiency, per-kernel
// GPU and host costs, collective efficiency and latency per network level) fitted so that the
// model's step times match a team's own runs. The calibration file (docs/calibration.md) holds them
// per GPU type; a workload applies it as cluster.calibration, over the catalogue and gpu_spec.
#ifndef COTUNE_CORE_PERFMODEL_CALIBRATION_HPP_
#define COTUNE_CORE_PERFMODEL_CALIBRATION_HPP_

#include <cotune/cotune.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace cotune::core::perf {

// One constant calibration can fit, named as a GPU description names it ("host_launch_us",
// "network_efficiency.cluster"), in the description's units.
struct CalibrationConstant {
  const char* name;
  const char* what;    // one line: what it is
  double lower, upper; // its range
  double prior_scale;  // its prior's width, in units of CalibrationOptions::prior_sigma
};
const std::vector<CalibrationConstant>& calibration_constants();
// The index of a constant by name, or -1.
int calibration_constant_index(const std::string& name);
// A constant's value on an effective_hardware(), and the hardware with it changed.
double constant_value(const cotune_hardware& hw, size_t index);
void set_constant(cotune_hardware& hw, size_t index, double value);

// A step trace that owns its ops (a space's lower() lends its trace only until the next call).
class TraceCopy {
 public:
  explicit TraceCopy(const cotune_trace& trace);
  TraceCopy(const TraceCopy& other);
  TraceCopy& operator=(const TraceCopy& other);
  // The trace, timed on `hardware` (with the trace's own nodes).
  const cotune_trace& on(const cotune_hardware& hardware);
  const cotune_trace& trace() const { return trace_; }

 private:
  void rebind();
  std::vector<cotune_op> ops_;
  cotune_trace trace_{};
};

// One measured run: its trace and the step time it took.
struct CalibrationRun {
  std::string label;  // "row 12" (for messages)
  TraceCopy trace;
  double measured_step_s = 0;
};

struct CalibrationOptions {
  // Constants to fit; empty: every constant these runs determine (at most one fewer than the
  // distinct runs, the most telling first), among `candidates` when that is not empty.
  std::vector<std::string> fit;
  std::vector<std::string> candidates;
  size_t folds = 5;          // for the held-out error (fewer when there are fewer runs)
  // How far (in log) a constant may stray from its catalogue value at 1 sigma, times the constant's
  // prior_scale (how well the catalogue knows it).
  double prior_sigma = 0.5;
  bool held_out = true;      // compute the k-fold held-out error (a fit per fold)
  // Without `fit`: fit only as many of the most telling constants as lower the cross-validated error
  // (leave-one-out up to 12 runs, else `folds` folds), at most max_selected; false fits every
  // constant the runs determine.
  bool select = true;
  size_t max_selected = 14;
  // Without `fit`: fit every candidate some run depends on, even more of them than the distinct runs
  // determine, from a single run on: the prior then shares each run's error among the constants by
  // how much the run depends on each (the most probable constants given the runs). Implies no
  // selection.
  bool underdetermined = false;
  // With underdetermined: the fewest distinct runs (runs the model times differently) to fit from.
  size_t underdetermined_fewest = 1;
  // How many runs a refusal names before "and N more" (the command line names them all).
  size_t listed_runs = 8;
};

struct ConstantFit {
  std::string name;
  double before = 0;       // the catalogue (or gpu_spec) value
  double value = 0;        // fitted
  double low = 0, high = 0;  // one standard deviation either side
  // The fit stopped at the end of the constant's range (gemm_efficiency_max at 1): the runs ask
  // more of it than the model can give, which a wrong column of the runs (recompute, sp, a TFLOP/s
  // converted with other FLOPs) does more often than the hardware.
  bool at_limit = false;
};

struct ErrorFigures {
  double mape = 0, median_ape = 0;
};

struct CalibrationResult {
  std::string gpu;
  size_t runs = 0;
  std::vector<ConstantFit> fitted;
  std::vector<std::string> not_fitted;  // "gemm_efficiency_fp4: no run's step depends on it"
  ErrorFigures before, after, held_out;
  size_t folds = 0;  // 0 when no held-out error was computed
  // With options.select: the cross-validated mean |log(modelled / measured)| fitting the 0, 1, 2, ...
  // most telling constants.
  std::vector<double> selection_error;
  // The fitted values as GPU-description fields ({"gemm_efficiency_max": .., "network_efficiency":
  // {"cluster": ..}, ...}).
  nlohmann::json constants() const;
};

// Fits the constants of one GPU type on its runs (all of the same GPU). Throws UserError naming the
// runs when they cannot determine what is asked: fewer than two distinct runs, a constant in
// options.fit that no run's step time depends on, measured times that are not positive.
CalibrationResult calibrate(const std::vector<CalibrationRun>& runs, const CalibrationOptions& options);

// The model's step time of each run with the constants of `result` applied to its hardware.
std::vector<double> calibrated_step_times(const std::vector<CalibrationRun>& runs, const nlohmann::json& constants);

// Constants (a calibration's constants(): GPU-description fields) ready to apply to hardware.
class ConstantSet {
 public:
  ConstantSet() = default;
  explicit ConstantSet(const nlohmann::json& constants);
  bool empty() const { return values_.empty(); }
  // `hardware` as an effective_hardware() with the constants set.
  cotune_hardware apply(const cotune_hardware& hardware) const;

 private:
  std::vector<std::pair<size_t, double>> values_;  // constant index, value
};

// The trace's struct with `hardware` in place of its own (the ops stay the trace's: it lives as
// long as they do).
cotune_trace retimed(const cotune_trace& trace, const cotune_hardware& hardware);

// The calibration file: {"cotune_calibration": 1, "gpus": {"h100-sxm": {"constants": {..}, ...}}}.
nlohmann::json calibration_file(const std::vector<CalibrationResult>& results, const std::string& source);
// Reads a calibration file; returns its per-GPU constants ({"h100-sxm": {...}}), checked field by
// field. Throws UserError naming the file and the field.
nlohmann::json read_calibration_file(const std::string& path);
// Sets workload["cluster"]["calibration"] to the per-GPU constants (replacing any there).
void apply_calibration(nlohmann::json& workload, const nlohmann::json& per_gpu, const std::string& where);
// Whether a calibration's key names the GPU of that (catalogue or gpu_spec) name: the name itself or
// any spelling of its catalogue name. The host applies an entry by this rule.
bool calibration_key_names(const std::string& key, const std::string& gpu_name);
// Whether the per-GPU constants have a non-empty entry for that GPU (an empty one: nothing fitted).
bool calibration_covers(const nlohmann::json& per_gpu, const std::string& gpu_name);
// The GPU types the per-GPU constants set something for, comma-separated ("" when none).
std::string calibrated_gpus(const nlohmann::json& per_gpu);
// Why the per-GPU constants change nothing for that GPU, to follow a calibration file's name ("sets
// no constants (its runs determined none)", "has no constants for h100-sxm (it has some for
// a100-80gb)"); "" when they cover it.
std::string calibration_gap(const nlohmann::json& per_gpu, const std::string& gpu_name);

}  // namespace cotune::core::perf

#endif  // COTUNE_CORE_PERFMODEL_CALIBRATION_HPP_
