// History in and out of the store as CSV: `cotune import` turns measured runs (table_runs.hpp) into
// history rows, `cotune export-history` writes a workload's history back in the same schema (the
// schema columns of docs/simulate.md, status, and one column per metric), so that a file exported
// from one store imports into another unchanged.
#ifndef COTUNE_CORE_HISTORY_HISTORY_IO_HPP_
#define COTUNE_CORE_HISTORY_HISTORY_IO_HPP_

#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/store/store.hpp>

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace cotune::core {

// The member of a history row's metrics_json that holds the workload JSON of an imported row (the
// history table keeps only the workload's key; export needs the workload itself).
inline constexpr const char* kHistoryWorkloadMember = "workload";
// The launch target of an imported row's format column, kept beside its workload so that
// export-history writes it back.
inline constexpr const char* kHistoryTargetMember = "launch_target";

// The workload keys that `cotune import` gives a run of `workload` written in the space's CSV
// schema (the workload through the schema's columns and back: defaults spelled as the reader spells
// them; and a cluster's gpus_per_node left out where it is the GPU's own, as a table's gpus column
// leaves it, or spelled out where the workload leaves it out, as a table's gpus_per_node column
// gives it), those that differ from the workload's own key; none when the space has no schema.
// A study looks its history up under each.
std::vector<std::string> imported_workload_keys(const Registry& registry, const nlohmann::json& workload,
                                                const std::string& space);

// History rows of the runs of `space`, from file `source` (row number = the CSV line).
std::vector<HistoryRow> history_rows(const std::vector<TableRun>& runs, const std::string& source,
                                     const std::string& space);

// Writes the rows as CSV in the schema's columns. The workload of a row comes from its metrics_json (imported rows) or from
// its study ("study:<name>" rows). Rows whose workload cannot be found or written are skipped with
// a warning; so is every row that would re-import under another workload key (a study workload with
// a network description, say), with one warning saying why. Returns the number of rows written.
size_t write_history_csv(std::ostream& out, const std::vector<HistoryRow>& rows, Store& store,
                         const TableSchema& schema, std::vector<std::string>* warnings);

// Every (workload key, space) pair in the store with history or a study, ordered by key
// (Store::workloads of an existing store: a missing one is a StoreError, not created).
std::vector<std::pair<std::string, std::string>> stored_workloads(const std::string& store_location);

}  // namespace cotune::core

#endif  // COTUNE_CORE_HISTORY_HISTORY_IO_HPP_
