// Runs as people have them, turned into the table of runs `cotune import` reads (docs/history.md):
//  - megatron-log: Megatron-LM's log of a job (the argument dump, the "elapsed time per iteration
//    (ms)" lines); one run per argument dump, so a log a restarted job appended to gives several;
//  - wandb: a Weights & Biases runs table exported as CSV (config columns, State, summary metrics);
//  - sacct: `sacct -P` output (State, Elapsed, AllocTRES, and the configuration as key=value words
//    or a JSON object in Comment or JobName);
//  - csv: cotune's own schema, as is.
// Known configuration names (Megatron-LM's arguments: tensor_model_parallel_size, swiglu,
// num_query_groups, use_distributed_optimizer, ...) become the schema's columns; each run that cannot
// become a row is skipped with its line and why.
#ifndef COTUNE_CORE_HISTORY_RUN_LOGS_HPP_
#define COTUNE_CORE_HISTORY_RUN_LOGS_HPP_

#include <cotune/core/history/csv.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cotune::core {

enum class RunsFormat { kCsv, kMegatronLog, kWandb, kSacct };

// Whether a name is a column of the space's table schema (TableSchema::reads): such names in a
// log's settings are taken as they are.
using ColumnCheck = std::function<bool(const std::string&)>;

// "csv", "megatron-log", "wandb", "sacct"; nullopt for another name.
std::optional<RunsFormat> runs_format_named(const std::string& name);
const char* runs_format_name(RunsFormat f);

// The format of a file from its first 1 MiB: an argument dump is a Megatron-LM log, a '|'-separated
// header with JobID is sacct, a CSV header with State and Megatron-LM argument names is a W&B
// export; anything else is read as cotune's CSV. UserError when the file cannot be read.
RunsFormat detect_runs_format(const std::string& path);

struct SkippedRun {
  size_t line = 0;  // where the run starts in the file
  std::string reason;
};

struct ConvertedRuns {
  CsvTable table;                     // cotune's schema, plus status and metric columns
  std::vector<SkippedRun> skipped;    // runs that are not rows, with why
  std::vector<std::string> notes;     // what was left out of every row (unused columns, ...)
};

// Reads `path` in `format`; `settings` ("gpu" -> "a100-80gb", from --set) fill a column in every
// row that does not give it. UserError for a file that cannot be read or is not of the format.
ConvertedRuns read_runs_file(const std::string& path, RunsFormat format,
                             const std::map<std::string, std::string>& settings = {},
                             const ColumnCheck& is_column = {});

// The schema column a Megatron-LM argument name stands for ("tensor_model_parallel_size" -> "tp"),
// or "" for a name that is not one of those read as they are.
std::string megatron_argument_column(const std::string& name);

// The schema cells of one run from its settings by name (Megatron-LM argument names, or the
// schema's own column names); names it does not know are left out.
std::map<std::string, std::string> cells_from_settings(const std::map<std::string, std::string>& settings,
                                                       const ColumnCheck& is_column = {});

}  // namespace cotune::core

#endif  // COTUNE_CORE_HISTORY_RUN_LOGS_HPP_
