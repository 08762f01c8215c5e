// Measured runs read from a CSV in a space's table schema (its columns, ABI 1.4, plus metric
// columns, docs/history.md): what `cotune import` stores as history and `cotune predictor eval`
// learns from. Columns are renamed by a mapping, metric columns converted to canonical units by
// their name, and every row checked by the space of its own workload.
#ifndef COTUNE_CORE_HISTORY_TABLE_RUNS_HPP_
#define COTUNE_CORE_HISTORY_TABLE_RUNS_HPP_

#include <cotune/core/abi/components.hpp>
#include <cotune/core/abi/table_schema.hpp>
#include <cotune/core/history/csv.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store/store_records.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cotune::core {

// The columns export-history writes with each row's provenance (the source it was recorded under
// and its row there); import records such a row under them, so re-importing an export into the
// store it came from finds every row already there.
inline constexpr const char* kHistorySourceColumn = "history_source";
inline constexpr const char* kHistoryRowColumn = "history_row";
// The framework a run was launched with, as a study file's "format" ("torchtitan@v0.2.2"): the row
// is read, checked and timed under that launch target (Space::set_target), as its study would.
inline constexpr const char* kFormatColumn = "format";

// "source column=canonical name" from --map; UserError when there is no '=' or a side is empty.
std::pair<std::string, std::string> parse_column_mapping(const std::string& text);

// How a recognised metric column becomes a canonical metric: value x factor, then x gpus (a
// per-GPU figure made total) or / gpus (a total made per-GPU).
struct MetricConversion {
  std::string canonical;
  double factor = 1;
  enum class PerGpu { kNone, kMultiply, kDivide } gpus = PerGpu::kNone;
};
// nullopt for a name that is not a recognised metric (docs/history.md lists them).
std::optional<MetricConversion> recognise_metric(const std::string& column);
// The status of a measured run from a status cell, in any case: ok (or completed, complete,
// success, succeeded, done, finished), failed (fail, error, node_fail, boot_fail), oom
// (out_of_memory), timeout (timed_out, deadline), cancelled (canceled), unavailable. nullopt for
// another word.
std::optional<TrialStatus> measured_status(const std::string& cell);

// The column a header name stands for in a table of runs: itself when the schema reads it or it is a
// recognised metric, else the schema column of a Megatron-LM argument name ("hidden_size" ->
// "hidden") or of a common spelling ("num_gpus" -> "gpus", "gpu_type" -> "gpu",
// "padded_vocab_size" -> "vocab", "elapsed_time_per_iteration_ms" -> "step_time_ms") when the
// header does not already hold that column; else itself.
std::string canonical_column(const std::string& name, const TableSchema& schema, const std::vector<std::string>& header);

// Every recognised metric column name, for messages and documentation.
std::vector<std::string> recognised_metric_names();

struct TableRun {
  size_t line = 0;  // line of the CSV file the row starts on
  nlohmann::json workload;
  std::string workload_key;  // canonical_json.hpp workload_key(workload, the space's name)
  std::shared_ptr<const Space> space;  // the space of this workload (shared by its rows)
  std::vector<double> config;          // in the space's parameters
  std::string config_json;             // the space's JSON rendering
  TrialStatus status = TrialStatus::kOk;
  nlohmann::json metrics = nlohmann::json::object();  // canonical metric name -> number
  std::map<std::string, std::string> cells;           // column (after mapping) -> cell text
  // Set when the space's memory estimate says the configuration does not fit although the row was
  // measured: the row is kept (a measurement beats the estimate).
  std::string memory_note;
  std::string target;  // the launch target of its format column; empty: none
};

struct RejectedRow {
  size_t line = 0;
  std::string reason;
};

// The rejected rows for a message, rows of one reason together, in the order the reasons first
// appear: where ("line 7", "lines 2, 3, 4, 5, 6 and 101 more") and why.
struct RejectionGroup {
  std::string where;
  std::string reason;
  size_t rows = 0;
};
std::vector<RejectionGroup> rejection_groups(const std::vector<RejectedRow>& rows);

struct TableRuns {
  std::vector<TableRun> runs;
  std::vector<RejectedRow> rejected;
  std::vector<std::string> warnings;  // one per ignored column
  std::vector<std::string> notes;     // the columns kept as extra metrics
  // Those columns, each with the schema column or metric it most likely misspells (" (did you mean
  // "micro_batch"?)"): a reader that keeps no extra metrics says them as ignored.
  std::vector<std::string> unread_numeric_columns;
  // Unread columns one edit or two from a schema column the table does not have ("micro_bach" for
  // micro_batch), as "'micro_bach' (did you mean \"micro_batch\"?)": every run would read that
  // parameter at its default. `cotune import`, whose rows stay in the store, refuses them.
  std::vector<std::string> misspelt_schema_columns;
};

// The columns `cotune simulate --batch` writes after the input's, in order. fp8_recipe_used and
// tp_comm are its own: a table with both is simulate's output, whose step times are the model's.
const std::vector<std::string>& simulate_output_columns();
bool written_by_simulate(const std::vector<std::string>& header);
// Refuses such a table where its rows would be kept or fitted as measurements (import, calibrate);
// predictor eval may judge a predictor on simulated runs.
void refuse_simulated_runs(const CsvTable& table);

// Whether a table's reader reads the column (a canonical name) itself: the schema's columns, a
// recognised metric, status, reason, format and the history columns. Others are extra.
bool reads_column(const std::string& name, const TableSchema& schema);

// " (did you mean "NAME"?)" naming the schema column or recognised metric `column` most likely
// misspells, or "".
std::string column_hint(const std::string& column, const TableSchema& schema);

// Reads every row of `table`. Header problems (a mapping naming no column or clashing with another
// column, two columns of the same canonical metric, a column named like the output of simulate
// other than the metrics and status) are UserErrors; a bad row is rejected with its line and reason
// and the others are kept. Unknown columns whose cells are all numbers are kept as extra metrics
// under their own name; others are ignored with one warning each. `calibration`, when not null, is
// the per-GPU constants of a calibration file, set as every workload's cluster.calibration (the
// spaces' model uses it; workload keys are the same without it).
TableRuns read_table_runs(const CsvTable& table, const std::vector<std::pair<std::string, std::string>>& mapping,
                          const Registry& registry, const TableSchema& schema,
                          const nlohmann::json* calibration = nullptr);

}  // namespace cotune::core

#endif  // COTUNE_CORE_HISTORY_TABLE_RUNS_HPP_
