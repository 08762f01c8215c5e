// One row of the llm CSV schema (docs/simulate.md: model, training, cluster and configuration
// columns) as the llm space's workload JSON and configuration JSON, with the documented defaults.
// Shared by `cotune simulate --batch`, `cotune import` and `cotune predictor eval`.
#ifndef COTUNE_CORE_HISTORY_LLM_CSV_ROW_HPP_
#define COTUNE_CORE_HISTORY_LLM_CSV_ROW_HPP_

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cotune::core {

// Its implicit move constructor cannot throw (nlohmann::json's is noexcept); clang-tidy 14 follows
// calls into noexcept functions and reports an exception escaping it all the same.
struct LlmCsvRow {  // NOLINT(bugprone-exception-escape): see above
  nlohmann::json workload;       // {"model", "training", "cluster"} (docs/workloads.md)
  nlohmann::json config;         // tp, pp, dp, cp, ep, micro_batch, vpp, zero, recompute, sp, gpus, gpu (+ etp,
                                 // first_stage_layers, last_stage_layers when given)
  nlohmann::json space_options;  // the row's own values as each parameter's domain
};

// The text of a cell, or nullptr when the column is absent or the cell empty.
using CsvCellLookup = std::function<const std::string*(const std::string& column)>;

// Builds the workload and configuration of one row. Throws std::invalid_argument naming the
// column and what was expected ("column tp: expected a whole number, got 'x'").
LlmCsvRow llm_row_from_cells(const CsvCellLookup& cell);

// Every column name of the schema (inputs only), in the documented order.
const std::vector<std::string>& llm_csv_columns();
// True for a column the row reader reads: a schema column, or another name published tables use
// for one (moe_ffn_hidden for expert_ffn_hidden; fsdp, whose value > 0 means zero 3).
bool llm_csv_reads(const std::string& column);
// The configuration columns (the space's parameters).
const std::vector<std::string>& llm_config_columns();

// The inverse: cells of the schema for a workload and a configuration JSON (as the llm space
// renders it). Fields the row builder would not have written (defaults) are left out, so that
// reading the cells back gives the same workload JSON. A workload the schema cannot express exactly
// (a network or gpu_spec object, a price, defaults left out, nodes other than ceil(gpus /
// gpus_per_node)) still gives its cells; `inexact`, when given, is set to what is lost ("" when
// nothing), because reading those cells back gives another workload key. Throws
// std::invalid_argument for a configuration without one of the parameters.
std::map<std::string, std::string> llm_cells_from_json(const nlohmann::json& workload, const nlohmann::json& config,
                                                       std::string* inexact = nullptr);

}  // namespace cotune::core

#endif  // COTUNE_CORE_HISTORY_LLM_CSV_ROW_HPP_
