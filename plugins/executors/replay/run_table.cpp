#include "run_table.hpp"

#include <sys/stat.h>

#include <cotune/cotune.hpp>
#include <cotune/support/column_spellings.hpp>
#include <cotune/support/likely_meant.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <system_error>

#include "cells.hpp"
#include "csv_reader.hpp"

namespace cotune_replay {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, msg); }

// A column one or two edits from a metric the table lacks ("mfuu", "tokens_pr_s") is not read as
// that metric: say so, or the study only learns that the executor reports no such metric.
void warn_near_metric_columns(const std::string& file, const std::vector<std::string>& columns,
                              const std::vector<std::string>& found, const std::vector<size_t>& metric_cols) {
  std::vector<std::string> missing;
  for (const std::string& m : default_metric_columns())
    if (std::find(found.begin(), found.end(), m) == found.end()) missing.push_back(m);
  for (size_t c = 0; c < columns.size(); ++c) {
    if (std::find(metric_cols.begin(), metric_cols.end(), c) != metric_cols.end()) continue;
    const std::string meant = cotune::support::likely_meant(columns[c], missing);
    if (meant.empty()) continue;
    cotune::log(COTUNE_LOG_WARN, "org.cotune.executor.replay",
                file + ": column '" + columns[c] + "' is not read as a metric (did you mean \"" + meant +
                    "\"?); rename it, or name it in the option \"metrics\": {\"" + meant + "\": \"" + columns[c] + "\"}");
  }
}

std::string lower(std::string_view s) {
  std::string t(trim(s));
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t;
}

// COTUNE_STATUS_* of a status cell; -1 for rows that measured nothing; throws for anything else.
int32_t row_status(std::string_view cell, const std::string& where) {
  const std::string s = lower(cell);
  for (const char* ok : {"", "ok", "completed", "complete", "success", "succeeded", "done", "finished"})
    if (s == ok) return COTUNE_STATUS_OK;
  for (const char* failed : {"failed", "fail", "error", "node_fail", "boot_fail"})
    if (s == failed) return COTUNE_STATUS_FAILED;
  if (s == "oom" || s == "out_of_memory") return COTUNE_STATUS_OOM;
  if (s == "timeout" || s == "timed_out" || s == "deadline") return COTUNE_STATUS_TIMEOUT;
  if (s == "invalid" || s == "cancelled" || s == "canceled" || s == "unavailable") return -1;
  bad(where + ": expected ok, failed, oom or timeout (or invalid, cancelled, unavailable for rows that measured "
              "nothing; completed, success, error, out_of_memory, timed_out, ... in any case), got '" +
      std::string(cell) + "'");
}

// Seconds per unit of a time suffix ("_s", "_ms", "_us", "_min", "_h"), also as logs write the unit
// after a space or in brackets ("elapsed time per iteration (ms)", "step time [s]"); 0 for a name
// without one.
double seconds_per_unit(const std::string& name) {
  static const std::pair<const char*, double> kUnits[] = {{"ms", 1e-3}, {"us", 1e-6}, {"min", 60}, {"h", 3600},
                                                          {"s", 1}};
  std::string n = lower(name);
  const bool bracketed = !n.empty() && (n.back() == ')' || n.back() == ']');
  if (bracketed) n.pop_back();
  for (const auto& [unit, seconds] : kUnits) {
    const std::string u(unit);
    if (n.size() <= u.size() || n.compare(n.size() - u.size(), u.size(), u) != 0) continue;
    const char before = n[n.size() - u.size() - 1];
    if (before == '_' || (bracketed ? before == '(' || before == '[' : before == ' ')) return seconds;
  }
  return 0;
}

// The factor that turns a cell of `column` into the metric's unit: a time metric ("step_time_s")
// read from a column in another time unit ("step_time_ms", "iteration_time_ms") is converted; 1
// otherwise.
double unit_factor(const std::string& metric, const std::string& column) {
  const double to = seconds_per_unit(metric), from = seconds_per_unit(column);
  return to > 0 && from > 0 ? from / to : 1.0;
}

// The stem of a time metric ("step_time" of "step_time_s"); "" for a metric without a time unit.
std::string time_stem(const std::string& metric) {
  if (seconds_per_unit(metric) <= 0) return "";
  return metric.substr(0, metric.rfind('_'));
}

}  // namespace

RunTable::RunTable(const ReplayOptions& options) : file_(options.file) {
  // Only a regular file: a folder fails mid-read, a FIFO blocks the open until some writer comes.
  struct stat st {};
  if (::stat(options.file.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "replay executor: the table " + options.file + " is " +
                                                         (S_ISDIR(st.st_mode) ? "a folder" : "not a regular file") +
                                                         " (expected a CSV file)");
  std::ifstream in(options.file, std::ios::binary);
  if (!in) {
    const int err = errno;
    std::error_code ec;
    const std::string where = options.file.empty() || options.file[0] == '/'
                                  ? std::string()
                                  : " (a relative path resolves against the current directory, " +
                                        std::filesystem::current_path(ec).string() + ")";
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "replay executor options/file: cannot open the table " +
                                                         options.file + ": " +
                                                         (err != 0 ? std::generic_category().message(err) : "unknown error") +
                                                         where);
  }
  CsvReader csv(in, options.file);
  std::vector<std::string> fields;
  size_t line = 0;
  if (!csv.next(fields, &line)) bad(options.file + ": empty (expected a header row naming the columns)");
  std::set<std::string> names;
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string name(trim(fields[i]));
    if (i == 0 && name.rfind("\xEF\xBB\xBF", 0) == 0) name.erase(0, 3);  // a spreadsheet's UTF-8 BOM
    if (name.empty()) bad(options.file + " line " + std::to_string(line) + ": column " + std::to_string(i + 1) + " has no name");
    if (!names.insert(name).second) bad(options.file + " line " + std::to_string(line) + ": column '" + name + "' appears twice");
    columns_.push_back(std::move(name));
  }
  result_column_.assign(columns_.size(), false);
  // The table's own names for parameters and workload fields: read under the space's names.
  for (const auto& [name, col] : options.columns) {
    const size_t c = require_column(col, "columns/" + name);
    if (col != name && column(name))
      bad("replay executor options/columns/" + name + ": " + options.file + " has a column '" + name +
          "' already; map '" + col + "' to another name or leave it out");
    columns_[c] = name;
  }
  // Columns spelled as run logs spell them (Megatron-LM's global_batch_size, num_gpus, ...) are read
  // under the schema's names, as `cotune import` reads them: a table that says its global batch as
  // global_batch_size must not have rows of two batch sizes answer one configuration. Not when the
  // table has the schema's column too, or the option "columns" named it.
  for (std::string& name : columns_) {
    const std::string_view to = cotune::support::column_spelled_by(name);
    if (to.empty() || column(to)) continue;
    cotune::log(COTUNE_LOG_INFO, "org.cotune.executor.replay",
                options.file + ": column " + name + " is read as " + std::string(to) + " (as cotune import reads it)");
    name = std::string(to);
  }

  // Metric columns: the ones named, else every column named like a known metric.
  std::vector<size_t> metric_cols;
  std::vector<double> factors;  // per metric: the cell's unit into the metric's
  if (!options.metrics.empty()) {
    for (const auto& [metric, col] : options.metrics) {
      // A per-GPU throughput under the job's would be gpus times too small, with nothing to say so.
      const size_t c = require_column(col, "metrics/" + metric);
      if ((metric == "tokens_per_s" || metric == "samples_per_s") && lower(col).find("per_gpu") != std::string::npos)
        bad("replay executor options/metrics/" + metric + ": the column '" + col + "' is per GPU and " + metric +
            " is the whole job's; map it to " + metric + "_per_gpu (a tokens_per_s_per_gpu answers tokens_per_s "
            "as well, times the GPUs)");
      metric_names_.push_back(metric);
      metric_cols.push_back(c);
      factors.push_back(unit_factor(metric, col));
    }
  } else {
    for (const std::string& m : default_metric_columns()) {
      std::optional<size_t> c = column(m);
      // A time metric the table gives in another unit ("step_time_ms", "iteration_time_ms"):
      // converted into the metric's.
      const std::string stem = time_stem(m);
      for (const std::string& base : {stem, std::string(stem == "step_time" ? "iteration_time" : "")})
        for (const char* unit : {"_s", "_ms", "_us", "_min", "_h"})
          if (!c && !base.empty()) c = column(base + unit);
      // MFU in per cent, as published tables give it ("mfu_pct"), is the fraction mfu.
      double percent = 1;
      for (const char* spelled : {"mfu_pct", "mfu_percent"})
        if (!c && m == "mfu" && (c = column(spelled))) percent = 0.01;
      if (c) {
        metric_names_.push_back(m);
        metric_cols.push_back(*c);
        factors.push_back(unit_factor(m, columns_[*c]) * percent);
      }
    }
    warn_near_metric_columns(options.file, columns_, metric_names_, metric_cols);
    if (metric_names_.empty()) {
      std::string known;
      for (const std::string& m : default_metric_columns()) known += (known.empty() ? "" : ", ") + m;
      bad(options.file + ": no metric column (looked for " + known +
          "); name the measured columns with the option \"metrics\": {\"tokens_per_s\": \"<column>\"}");
    }
  }
  std::optional<size_t> status_col, reason_col;
  if (options.status_column) status_col = require_column(*options.status_column, "status_column");
  else status_col = column("status");
  if (options.reason_column) reason_col = require_column(*options.reason_column, "reason_column");
  else if (!(reason_col = column("reason"))) reason_col = column("error");
  for (size_t c : metric_cols) result_column_[c] = true;
  if (status_col) result_column_[*status_col] = true;
  if (reason_col) result_column_[*reason_col] = true;

  std::vector<std::pair<size_t, const nlohmann::json*>> filters;
  for (const auto& [col, value] : options.where) filters.emplace_back(require_column(col, "where/" + col), &value);

  while (csv.next(fields, &line)) {
    const std::string at = options.file + " line " + std::to_string(line);
    if (fields.size() != columns_.size())
      bad(at + ": " + std::to_string(fields.size()) + " fields, but the header names " + std::to_string(columns_.size()) +
          " columns");
    bool keep = true;
    for (const auto& [col, value] : filters) keep = keep && cell_matches(fields[col], *value);
    if (!keep) continue;
    RunRow row;
    row.line = line;
    row.status = status_col ? row_status(fields[*status_col], at + ", column " + columns_[*status_col]) : COTUNE_STATUS_OK;
    if (row.status < 0) {
      ++skipped_;
      continue;
    }
    if (reason_col) row.error = std::string(trim(fields[*reason_col]));
    row.metrics.assign(metric_cols.size(), std::numeric_limits<double>::quiet_NaN());
    if (row.status == COTUNE_STATUS_OK) {
      for (size_t m = 0; m < metric_cols.size(); ++m) {
        const std::string& cell = fields[metric_cols[m]];
        if (trim(cell).empty()) continue;
        std::optional<double> v = parse_number(cell);
        if (!v)
          bad(at + ", column " + columns_[metric_cols[m]] + ": expected a number for the metric " + metric_names_[m] +
              ", got '" + cell + "'");
        row.metrics[m] = *v * factors[m];
      }
    }
    row.cells = std::move(fields);
    fields = {};
    rows_.push_back(std::move(row));
  }
  if (!filters.empty() && rows_.empty() && skipped_ == 0) {
    std::string asked;
    for (const auto& [col, value] : options.where) asked += (asked.empty() ? "" : ", ") + col + " = " + value.dump();
    bad("replay executor options/where: no row of " + options.file + " holds " + asked);
  }
}

std::optional<size_t> RunTable::column(std::string_view name) const {
  for (size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i] == name) return i;
  return std::nullopt;
}

size_t RunTable::require_column(const std::string& name, const std::string& option) const {
  if (std::optional<size_t> c = column(name)) return *c;
  std::string list;
  for (const std::string& c : columns_) list += (list.empty() ? "" : ", ") + c;
  bad("replay executor options/" + option + ": " + file_ + " has no column '" + name + "' (its columns: " + list + ")");
}

}  // namespace cotune_replay
