// What a step trace says of how the step runs where the configuration alone does not show it, for
// `cotune simulate` (both forms): the GEMMs' number formats, how FP8 operands are scaled, and
// whether tensor-parallel transfers overlap the GEMMs, with what the workload asked for.
#ifndef COTUNE_CLI_EXECUTION_SUMMARY_HPP_
#define COTUNE_CLI_EXECUTION_SUMMARY_HPP_

#include <cotune/cotune.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>

namespace cotune::cli {

struct ExecutionSummary {
  std::map<std::string, double> gemm_share;  // dtype name -> share of GEMM FLOPs
  std::string fp8_scaling;                   // "per-block", "per-tensor", or "" without FP8 GEMMs
  std::string fp8_recipe;                    // the workload's training.fp8_recipe as it ran ("" unknown)
  std::string tp_comm;                       // "overlapped", "blocking", or "" without TP transfers
  std::string tp_comm_note;                  // why a requested overlap did not take effect
};

// `workload` is the workload JSON the trace was lowered from (its training fields say what was
// asked for; a space's workload without them gives the trace's side only).
ExecutionSummary summarize_execution(const cotune_trace& trace, const nlohmann::json& workload);

// As --json prints it: {"gemm_flops_share", "fp8_scaling", "fp8_recipe", "tp_comm", "tp_comm_note"},
// the last four only where they apply.
nlohmann::json execution_json(const ExecutionSummary& summary);

}  // namespace cotune::cli

#endif
