// The step time of the best configuration split by the performance model into compute, exposed
// communication of each kind, pipeline bubble and optimizer.
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/report/html.hpp>
#include <cotune/core/report/svg_chart.hpp>
#include <cotune/core/run/study_report.hpp>

#include "report/report_context.hpp"

namespace cotune::core::report {

std::string breakdown_html(const ReportContext& c) {
  if (!c.space) return note_html("The space is not loaded: " + c.space_problem);
  if (!c.space->can_lower()) return note_html("The space " + c.spec.space.name + " does not lower configurations to step traces.");
  std::vector<TrialRecord> records;
  for (const ReportTrial& t : c.trials) records.push_back(t.record);
  std::vector<RankedTrial> best = best_trials(records, c.spec.objectives, 1);
  if (best.empty()) return note_html("No feasible measured configuration yet.");
  std::vector<double> config = c.space->parse(best.front().trial.config_json);
  const cotune_trace& trace = c.space->lower(config.data());
  cotune_sim_result r{};
  r.struct_size = sizeof r;
  perf::simulate(trace, &r);
  static const char* const kGroups[COTUNE_GROUP_COUNT] = {"other", "TP", "CP", "EP", "PP", "DP", "embedding"};
  std::vector<std::pair<std::string, double>> parts = {{"compute", r.compute_s}};
  for (int g = 0; g < COTUNE_GROUP_COUNT; ++g)
    parts.emplace_back(std::string("exposed ") + kGroups[g] + " communication", r.exposed_comm_s[g]);
  parts.emplace_back("pipeline bubble", r.bubble_s);
  parts.emplace_back("optimizer", r.optimizer_s);
  std::string title = "Step time of trial " + std::to_string(best.front().trial.seq) + ": " + number_text(r.step_time_s) + " s";
  return stacked_bar_svg(title, parts, "s") +
         note_html("From the performance model (MFU " + number_text(r.mfu * 100) + "%, peak memory " +
                   number_text(r.peak_memory_bytes / 1073741824.0) + " GiB per GPU).");
}

}  // namespace cotune::core::report
