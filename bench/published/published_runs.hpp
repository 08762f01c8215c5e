// The accuracy check of the performance model against published measurements (../shared/data:
// Megatron-LM SC'21 Table 1, Korthikanti et al. MLSys'23 Table 5, and the recipe tables under
// published/). Used by bench/perfmodel_accuracy_bench.cpp and tests/unit/perf_accuracy_test.cpp.
#ifndef COTUNE_BENCH_PUBLISHED_PUBLISHED_RUNS_HPP_
#define COTUNE_BENCH_PUBLISHED_PUBLISHED_RUNS_HPP_

#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/registry.hpp>

#include <nlohmann/json.hpp>

#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "published/published_table.hpp"

namespace cotune::core::perf {

struct PublishedRun {
  std::string label;   // "gpt-175b full", "145.6B tp8 pp8"
  std::string config;  // the configuration simulated, as JSON
  double measured = 0;
  double predicted = 0;
  double error() const { return (predicted - measured) / measured; }
};

struct TableAccuracy {
  std::string table;   // "megatron_table1"
  std::string metric;  // "tflops_per_gpu", "iteration_time_s"
  std::vector<PublishedRun> rows;
  double mape = 0;        // mean absolute relative error
  int pairs = 0;          // row pairs whose measurements differ by more than 5%
  int pairs_ordered = 0;  // of those, pairs the model orders the same way
};

// Simulates every row of both tables with the llm space of `registry` and the performance model.
// Rules, the same for every row (no per-row constants): A100-80GB Selene nodes, fp16, unfused
// attention with dropout (the papers predate fused attention), no overlap of the data-parallel
// all-reduce, no distributed optimizer. Table 1 does not give micro-batch size and interleaving:
// the paper tuned them, so each row takes the fastest valid micro_batch in {1, 2, 4, 8} and
// vpp (as the model ranks them) with full recomputation.
std::vector<TableAccuracy> check_published_runs(const Registry& registry, const std::string& data_dir);

// The model's step time for one row of a published table (published_table.hpp). What the row
// leaves unstated is what its recipe tuned: micro_batch in {1, 2, 4, 8} and vpp among those the
// pipeline allows, the fastest as the model ranks them, each with the lightest recomputation
// (none, then selective module sets) whose memory estimate fits; an unstated etp is 1 (what
// Megatron-Bridge's MoE recipes set), or the tensor-parallel degree where the expert grid needs it;
// an unstated ep (MoE) the fastest fitting power of two dividing the experts; an unstated token
// dispatcher (MoE) the faster of alltoall and flex (DeepEP / HybridEP, which every MoE perf recipe
// of Megatron-Bridge names). `calibration`, when not null, is set as the
// workload's cluster.calibration (docs/calibration.md).
struct RowPrediction {
  double step_s = 0;    // 0 when refused
  double measured_step_s = 0;  // the row's, or from its TFLOP/s and the model's FLOPs
  std::string config;   // the configuration simulated, as JSON
  std::string refused;  // why it was not simulated: the rule the layout breaks
  bool oom = false;     // simulated, but the memory estimate exceeds the GPU's
  std::shared_ptr<const TraceCopy> trace;  // of the configuration simulated (for calibration)
  std::string workload;  // the workload simulated, as JSON (cotune simulate --workload)
  std::string options;   // the space options it was simulated under, as JSON (--space-options)
};
RowPrediction predict_published_row(const Registry& registry, const PublishedRow& row,
                                    const nlohmann::json* calibration = nullptr);

// The accuracy of a set of rows: counts, refusals by reason, errors of the step time (predicted /
// measured - 1) and Kendall's tau-b of throughput within each group (published_table.hpp's
// group(): one model on one GPU type in one dtype), averaged with each group weighted by its pairs;
// and the same within each release_group() (one software release).
struct Accuracy {
  int rows = 0, simulated = 0, oom = 0;
  std::map<std::string, int> refused;  // reason -> rows
  double mape = 0, median_ape = 0, signed_mean = 0;  // fractions
  double tau = std::numeric_limits<double>::quiet_NaN();
  int tau_pairs = 0;
  double release_tau = std::numeric_limits<double>::quiet_NaN();
  int release_tau_pairs = 0;
};
Accuracy accuracy_of(const std::vector<const PublishedRow*>& rows, const std::vector<RowPrediction>& predictions);

// Calibrated on a fraction of the rows, judged on the rest: `repeats` draws (seeded) of
// max(1, round(fraction x rows)) simulated rows; the constants of each GPU type with at least two
// drawn rows are fitted on them (calibrate() with its defaults, no held-out folds) and applied to
// that GPU's other rows. Returns the predictions of every draw's other rows (a GPU without a fit
// keeps the uncalibrated prediction), pooled, with `rows` to score them by.
struct HeldOutPredictions {
  std::vector<const PublishedRow*> rows;
  std::vector<RowPrediction> predictions;
  int fitted_gpus = 0, draws = 0;  // GPU types calibrated, summed over draws
};
HeldOutPredictions calibrated_held_out(const std::vector<const PublishedRow*>& rows,
                                       const std::vector<RowPrediction>& predictions, double fraction, int repeats);

}  // namespace cotune::core::perf

#endif
