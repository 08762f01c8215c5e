// The accuracy check of the performance model against published measurements
// (/work/shared/data: Megatron-LM SC'21 Table 1, Korthikanti et al. MLSys'23 Table 5). Used by
// bench/perfmodel_accuracy_bench.cpp and tests/unit/perf_accuracy_test.cpp.
#ifndef COTUNE_CORE_PERFMODEL_PUBLISHED_RUNS_HPP_
#define COTUNE_CORE_PERFMODEL_PUBLISHED_RUNS_HPP_

#include <cotune/core/registry.hpp>

#include <string>
#include <vector>

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

}  // namespace cotune::core::perf

#endif
