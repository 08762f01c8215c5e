// Measured runs for `cotune calibrate --runs` (see calibrate.hpp): the CSV read as import reads it
// (the shared reader: mapping, recognised metric columns, a format column, status), each run
// lowered to its step trace with the step time it took.
#include <cotune/core/errors.hpp>
#include <cotune/core/history/csv.hpp>
#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>

#include <algorithm>
#include <string>

#include "cli/calibrate.hpp"

namespace cotune::cli {
namespace {

// A run as messages and --rows name it: its line, and the name the team gave it where a column
// holds one (name, run, run_name, id, run_id, job_id).
std::string run_label(const core::TableRun& run) {
  std::string label = "line " + std::to_string(run.line);
  for (const char* column : {"name", "Name", "run", "run_name", "id", "run_id", "job_id"}) {
    const auto it = run.cells.find(column);
    if (it != run.cells.end() && !it->second.empty()) return label + " (" + it->second + ")";
  }
  return label;
}

}  // namespace

CalibrationRuns read_calibration_runs(const core::Registry& registry, const core::TableSchema& schema,
                                      const std::string& path,
                                      const std::vector<std::pair<std::string, std::string>>& mapping) {
  if ((schema.info().capabilities & COTUNE_CAP_LOWER_TRACE) == 0)
    throw core::UserError("--space '" + schema.space() + "': the space does not lower configurations to step traces, "
                          "so there is nothing to calibrate the performance model on");
  const core::CsvTable table = core::read_csv_file(path);
  if (table.rows.empty()) throw core::UserError(path + ": no runs (a header and no rows)");
  // A column that gives the step time or the tokens per second (as import recognises them, after --map).
  bool measured = false;
  for (const std::string& column : table.header) {
    std::string name = core::canonical_column(column, schema, table.header);
    for (const auto& [from, to] : mapping)
      if (from == column) name = to;
    const auto m = core::recognise_metric(name);
    measured = measured || (m && (m->canonical == "step_time_s" || m->canonical == "tokens_per_s"));
  }
  if (!measured)
    throw core::UserError(path + ": no measured column (expected step_time_s, step_time_ms, iteration_time_s, "
                          "iteration_time_ms, tokens_per_s or tokens_per_s_per_gpu beside the columns of cotune "
                          "simulate --batch; --map names another)");

  core::refuse_simulated_runs(table);
  const core::TableRuns read = core::read_table_runs(table, mapping, registry, schema);
  CalibrationRuns runs;
  runs.warnings = read.warnings;
  // Calibration keeps no extra metrics: a misspelt parameter column would leave the parameter at
  // its default and fit the constants to the wrong layout, unseen. The counts the replay executor
  // adds to what it answers (export-history writes them) are no parameter of anything.
  std::string names;
  for (const std::string& n : read.unread_numeric_columns)
    if (n != "replay_rows" && n != "replay_failed_rows") names += (names.empty() ? "" : ", ") + n;
  if (!names.empty()) {
    runs.warnings.push_back(path + ": columns not read (neither a column of the " + schema.space() +
                            " space's table schema nor a recognised metric): " + names +
                            " (a misspelt parameter column leaves the parameter at its default; --map 'COLUMN=NAME' "
                            "reads a column under another name)");
  }
  for (const core::RejectedRow& r : read.rejected) runs.skipped.push_back({r.line, r.reason});
  // Runs that finished although the memory estimate says they cannot fit: usually a cell misread or
  // left unstated (recompute, micro_batch, zero or fsdp), whose layout the constants would then be
  // fitted to. They are fitted as read, and said.
  std::string over_memory;
  const core::TableRun* first = nullptr;
  size_t over_memory_runs = 0;
  for (const core::TableRun& run : read.runs) {
    if (run.memory_note.empty() || run.status != core::TrialStatus::kOk) continue;
    if (over_memory_runs++ < 10) over_memory += (over_memory.empty() ? "" : ", ") + std::to_string(run.line);
    if (first == nullptr) first = &run;
  }
  if (first != nullptr)
    runs.warnings.push_back(path + ": " + std::to_string(over_memory_runs) + " run(s) measured although, as read, " +
                            "they do not fit in memory (" +
                            (over_memory_runs > 1 ? "lines " + over_memory + (over_memory_runs > 10 ? ", ..." : "") + "; "
                                                  : std::string()) +
                            "line " + std::to_string(first->line) + ": " + first->memory_note +
                            "): a recompute, micro_batch, zero or fsdp cell misread or left unstated fits the "
                            "constants to another layout; they are fitted as read");
  for (const core::TableRun& run : read.runs) {
    if (run.status != core::TrialStatus::kOk) {
      runs.skipped.push_back({run.line, "status " + std::string(core::to_string(run.status)) +
                                          ": only runs that finished (status ok) are fitted"});
      continue;
    }
    const cotune_trace& trace = run.space->lower(run.config.data());
    // The measurement as a step time; tokens per step come from the trace (a preset's seq_len too).
    double step = 0;
    if (run.metrics.contains("step_time_s")) step = run.metrics["step_time_s"].get<double>();
    else if (run.metrics.contains("tokens_per_s") && run.metrics["tokens_per_s"].get<double>() > 0)
      step = trace.tokens_per_step / run.metrics["tokens_per_s"].get<double>();
    if (!(step > 0)) {  // a run that did not finish: nothing to fit on
      const auto tflops = run.cells.find("tflops_per_gpu");
      runs.skipped.push_back(
          {run.line, tflops != run.cells.end() && !tflops->second.empty()
                         ? "only TFLOP/s (tflops_per_gpu): a step time or tokens per second is needed, since TFLOP/s "
                           "count FLOPs as the source did (attention causal or whole, recomputation or not); the "
                           "step time is the source's FLOPs per step / (TFLOP/s x GPUs)"
                         : "no measured value (a positive step time or tokens per second)"});
      continue;
    }
    const std::string gpu(trace.hardware.gpu_name.data, trace.hardware.gpu_name.len);
    runs.by_gpu[gpu].push_back({run_label(run), core::perf::TraceCopy(trace), step});
    runs.configurations[gpu].push_back(run.config_json);
  }
  std::sort(runs.skipped.begin(), runs.skipped.end(),
            [](const core::RejectedRow& a, const core::RejectedRow& b) { return a.line < b.line; });
  return runs;
}

}  // namespace cotune::cli
