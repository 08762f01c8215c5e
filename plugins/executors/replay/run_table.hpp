// The table of measured runs, read once when the executor is created: the header, the rows that
// pass the "where" filter, each row's status, error text and metric values (checked here, so a bad
// cell is reported before any trial runs).
#ifndef COTUNE_EXECUTOR_REPLAY_RUN_TABLE_HPP_
#define COTUNE_EXECUTOR_REPLAY_RUN_TABLE_HPP_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "replay_options.hpp"

namespace cotune_replay {

struct RunRow {
  size_t line = 0;                  // where the record starts in the file
  int32_t status = 0;               // COTUNE_STATUS_OK, FAILED, OOM or TIMEOUT
  std::string error;                // the reason column's text (non-ok rows)
  std::vector<double> metrics;      // per metric; NaN where the cell is empty
  std::vector<std::string> cells;   // every cell, in column order
};

class RunTable {
 public:
  explicit RunTable(const ReplayOptions& options);

  const std::string& file() const { return file_; }  // as given in the options, for messages
  const std::vector<std::string>& columns() const { return columns_; }
  std::optional<size_t> column(std::string_view name) const;
  // Columns that hold metrics, the status or the reason (not configuration or workload).
  bool is_result_column(size_t column) const { return result_column_[column]; }

  const std::vector<std::string>& metric_names() const { return metric_names_; }
  const std::vector<RunRow>& rows() const { return rows_; }
  size_t skipped_rows() const { return skipped_; }  // rows that measured nothing (invalid, cancelled)

 private:
  size_t require_column(const std::string& name, const std::string& option) const;

  std::string file_;
  std::vector<std::string> columns_;
  std::vector<bool> result_column_;
  std::vector<std::string> metric_names_;
  std::vector<RunRow> rows_;
  size_t skipped_ = 0;
};

}  // namespace cotune_replay

#endif  // COTUNE_EXECUTOR_REPLAY_RUN_TABLE_HPP_
