// Measured runs for `cotune calibrate --runs` (see calibrate.hpp): each CSV row through its space's
// table schema to its step trace, with the step time it took.
#include <cotune/core/history/csv.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <cmath>
#include <stdexcept>

#include "cli/calibrate.hpp"

namespace cotune::cli {
namespace {

using nlohmann::json;

double positive(const std::string& text, const std::string& where) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v) && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw core::UserError(where + ": expected a positive number, got '" + text + "'");
}

}  // namespace

CalibrationRuns read_calibration_runs(const core::Registry& registry, const core::TableSchema& schema,
                                      const std::string& path) {
  if ((schema.info().capabilities & COTUNE_CAP_LOWER_TRACE) == 0)
    throw core::UserError("--space '" + schema.space() + "': the space does not lower configurations to step traces, "
                          "so there is nothing to calibrate the performance model on");
  const core::CsvTable table = core::read_csv_file(path);
  const char* const measured[] = {"step_time_s", "step_time_ms", "tokens_per_s", "tokens_per_s_per_gpu"};
  bool any = false;
  for (const char* m : measured) any = any || table.column(m) >= 0;
  if (!any)
    throw core::UserError(path + ": no measured column (expected step_time_s, step_time_ms, tokens_per_s or "
                          "tokens_per_s_per_gpu beside the columns of cotune simulate --batch)");
  CalibrationRuns runs;
  for (const core::CsvRecord& rec : table.rows) {
    auto cell = [&](const std::string& col) -> const std::string* {
      const long i = table.column(col);
      return i < 0 || rec.fields[size_t(i)].empty() ? nullptr : &rec.fields[size_t(i)];
    };
    // Whatever keeps this row from being a run leaves it out, named; the other rows still count.
    try {
      std::map<std::string, std::string> cells;
      for (size_t c = 0; c < table.header.size(); ++c)
        if (schema.reads(table.header[c]) && !rec.fields[c].empty()) cells.emplace(table.header[c], rec.fields[c]);
      const core::TableRow row = schema.read(cells);
      const std::unique_ptr<core::Space> space =
          registry.make_space(schema.space(), row.workload.dump(), row.options.dump());
      // Timed as its framework runs it (a study's "format"): TorchTitan's eager kernels, its rules.
      if (const std::string* f = cell(core::kFormatColumn)) {
        const std::string column = std::string("column ") + core::kFormatColumn;
        core::set_launch_target(*space, core::launch_target_of(*f, column), column);
      }
      const std::vector<double> values = space->parse(row.config.dump());
      const std::string why = space->explain(values.data());
      if (!why.empty() && why.rfind("out of memory", 0) != 0)  // it ran, so a memory estimate over the GPU's is no reason
        throw core::UserError("the " + schema.space() + " space refuses this layout: " + why);
      const cotune_trace& trace = space->lower(values.data());
      // The measurement as a step time; tokens per step come from the trace (a preset's seq_len too).
      double step = 0;
      if (const std::string* t = cell("step_time_s")) step = positive(*t, "column step_time_s");
      else if (const std::string* t = cell("step_time_ms")) step = positive(*t, "column step_time_ms") / 1e3;
      else if (const std::string* t = cell("tokens_per_s"))
        step = trace.tokens_per_step / positive(*t, "column tokens_per_s");
      else if (const std::string* t = cell("tokens_per_s_per_gpu"))
        step = trace.tokens_per_step / (positive(*t, "column tokens_per_s_per_gpu") * trace.gpus);
      else  // a run that did not finish: nothing to fit on
        throw core::UserError("no measured value (step_time_s, step_time_ms, tokens_per_s or tokens_per_s_per_gpu)");
      const std::string gpu(trace.hardware.gpu_name.data, trace.hardware.gpu_name.len);
      runs.by_gpu[gpu].push_back({"line " + std::to_string(rec.line), core::perf::TraceCopy(trace), step});
    } catch (const std::exception& e) {
      runs.skipped.push_back({rec.line, e.what()});
    }
  }
  if (table.rows.empty()) throw core::UserError(path + ": no runs (a header and no rows)");
  return runs;
}

}  // namespace cotune::cli
