// A space's table schema (ABI 1.4: cotune_space_api.table_schema, table_read, table_write): how one
// row of a table of runs (a CSV) says a workload and a configuration of the space, and back. The
// table commands (`simulate --batch`, `import`, `export-history`, `predictor eval`) read and write
// runs of any space through it; the host knows no space's columns.
#ifndef COTUNE_CORE_ABI_TABLE_SCHEMA_HPP_
#define COTUNE_CORE_ABI_TABLE_SCHEMA_HPP_

#include <cotune/core/abi/components.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cotune::core {

class Registry;

// One row as the space reads it.
struct TableRow {  // NOLINT(bugprone-exception-escape): nlohmann::json's moves cannot throw
  nlohmann::json workload;  // docs/workloads.md
  nlohmann::json config;    // a configuration as the space's parse() reads it
  nlohmann::json options;   // space options under which the row's values are in the domain
  double devices = 1;       // GPUs the run used (per-GPU metrics are converted with it)
};

// A workload and configuration written as cells.
struct TableCells {  // NOLINT(bugprone-exception-escape): see TableRow
  std::map<std::string, std::string> cells;
  std::string inexact;                      // what the cells cannot say ("" when nothing)
  std::optional<nlohmann::json> read_back;  // the workload reading the cells back gives
};

class TableSchema {
 public:
  // The schema of the space `space` (an id or a short name); UserError naming it when no loaded
  // space has that name or the space offers no table schema.
  static TableSchema of(const Registry& registry, const std::string& space);
  // The same, or nullopt when the space is not loaded or has no table schema.
  static std::optional<TableSchema> find(const Registry& registry, const std::string& space);

  const std::string& space() const { return space_; }  // as named
  const ComponentInfo& info() const { return ref_.info; }
  // Every column it writes, in table order; those of them that say the configuration.
  const std::vector<std::string>& columns() const { return columns_; }
  const std::vector<std::string>& config_columns() const { return config_columns_; }
  // True for a column its reader reads: one of columns() or another name it accepts.
  bool reads(const std::string& column) const { return reads_.count(column) != 0; }

  // The row of `cells` (column -> text; empty cells count as absent). Throws std::invalid_argument
  // with the space's message ("column tp: expected a whole number, got 'x'").
  TableRow read(const std::map<std::string, std::string>& cells) const;
  // The cells of a workload and a configuration (JSON as the space renders it), or of the workload
  // alone when `config` is null. Throws std::invalid_argument with the space's message.
  TableCells write(const nlohmann::json& workload, const nlohmann::json* config) const;

 private:
  explicit TableSchema(ComponentRef ref, std::string space);

  ComponentRef ref_;
  const cotune_space_api* api_ = nullptr;
  std::string space_;
  std::vector<std::string> columns_, config_columns_;
  std::set<std::string> reads_;
};

}  // namespace cotune::core

#endif  // COTUNE_CORE_ABI_TABLE_SCHEMA_HPP_
