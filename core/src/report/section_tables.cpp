// The report's tables: the study's facts, the best configurations, the failures and every trial.
#include <cotune/core/model/objective.hpp>
#include <cotune/core/model/surrogate.hpp>
#include <cotune/core/report/html.hpp>
#include <cotune/core/run/study_report.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <algorithm>
#include <set>

#include "report/report_context.hpp"
#include "run/progress.hpp"

namespace cotune::core::report {
namespace {

std::string fact(const std::string& name, const std::string& value_html) {
  return "<dt>" + escape(name) + "</dt><dd>" + value_html + "</dd>";
}

std::string objectives_text(const StudySpec& spec) {
  std::string s;
  for (const ObjectiveSpec& o : spec.objectives) {
    if (!s.empty()) s += "; ";
    s += std::string(to_string(o.direction)) + " " + o.metric;
    for (const Constraint& k : o.constraints) {
      if (k.max) s += ", " + k.metric + " <= " + number_text(*k.max);
      if (k.min) s += ", " + k.metric + " >= " + number_text(*k.min);
    }
  }
  return s;
}

std::string space_size_text(const ReportContext& c) {
  if (!c.space) return "unknown (space not loaded)";
  double size = 1;
  for (const Param& p : c.space->params()) {
    std::vector<double> d = p.domain();
    if (d.empty()) return std::to_string(c.space->num_params()) + " parameters, continuous";
    size *= static_cast<double>(d.size());
  }
  return std::to_string(c.space->num_params()) + " parameters, " + number_text(size) +
         " combinations before validity checks";
}

std::string budget_text(const ReportContext& c) {
  std::int64_t counted = 0;
  double first = 0, last = 0;
  for (const ReportTrial& t : c.trials) {
    if (counts_against_budget(t.record.status)) ++counted;
    if (first == 0 || t.record.created_at < first) first = t.record.created_at;
    last = std::max(last, t.record.finished_at.value_or(t.record.created_at));
  }
  const Budget& b = c.spec.budget;
  std::string s = std::to_string(counted) + (b.trials ? " of " + std::to_string(*b.trials) : std::string()) + " trials";
  s += ", " + duration_text(last > first ? last - first : 0) + " wall time" +
       (b.wall_time_s ? " of " + duration_text(*b.wall_time_s) : std::string());
  if (b.gpu_hours) s += ", GPU-hour budget " + number_text(*b.gpu_hours);
  if (b.patience) s += ", patience " + std::to_string(*b.patience);
  if (b.target) s += ", target " + number_text(*b.target);
  return s;
}

}  // namespace

std::string study_facts_html(const ReportContext& c) {
  const StudySpec& s = c.spec;
  std::set<std::string> executors;
  std::map<TrialStatus, std::int64_t> counts;
  for (const ReportTrial& t : c.trials) {
    if (!t.record.executor.empty()) executors.insert(t.record.executor);
    ++counts[t.record.status];
  }
  std::string executors_text = s.executor.name;
  for (const std::string& e : executors)
    if (e != s.executor.name) executors_text += ", " + e;
  std::string h = "<dl class=\"facts\">";
  h += fact("study", escape(s.name) + " (" + escape(c.status_text) + ")");
  if (!s.description.empty()) h += fact("description", escape(s.description));
  h += fact("workload", "<pre>" + escape(s.workload.dump(2)) + "</pre>");
  h += fact("space", escape(s.space.name) + ": " + escape(space_size_text(c)));
  h += fact("objective", escape(objectives_text(s)));
  h += fact("budget used", escape(budget_text(c)));
  h += fact("trials", escape(status_counts_text(counts, c.being_run)));
  const std::string prior = prior_text(s.predictor.prior, c.space.get(), s.objectives.front().metric);
  h += fact("predictor", escape(s.predictor.name + " (prior " + prior + ")"));
  h += fact("searcher", escape(s.searcher.name));
  h += fact("executors", escape(executors_text) + ", " + std::to_string(s.parallel) + " in parallel");
  nlohmann::json env = nlohmann::json::parse(c.study.environment_json, nullptr, false);
  h += fact("environment", "<pre>" + escape(env.is_discarded() ? c.study.environment_json : env.dump(2)) + "</pre>");
  h += "</dl>";
  if (!c.space_problem.empty()) h += note_html("The study's space could not be loaded: " + c.space_problem);
  return h;
}

std::string best_configurations_html(const ReportContext& c) {
  std::vector<TrialRecord> records;
  for (const ReportTrial& t : c.trials) records.push_back(t.record);
  std::vector<RankedTrial> best = best_trials(records, c.spec.objectives, c.options.best_limit);
  if (best.empty()) return note_html("No feasible measured configuration yet.");
  std::string h;
  if (c.spec.pareto()) h += note_html("The Pareto front: feasible trials no other trial beats in both objectives.");
  h += "<table class=\"best\"><thead><tr><th>#</th><th>trial</th>";
  for (const ObjectiveSpec& o : c.spec.objectives)
    h += "<th>" + escape(o.metric + (o.direction == Direction::kMaximize ? " (max)" : " (min)")) + "</th>";
  h += "<th>configuration and launch arguments</th></tr></thead><tbody>";
  const int32_t formats[] = {COTUNE_RENDER_MEGATRON, COTUNE_RENDER_TORCHTITAN, COTUNE_RENDER_TORCHREC};
  const char* const format_names[] = {"Megatron-LM", "TorchTitan", "TorchRec plan"};
  for (size_t i = 0; i < best.size(); ++i) {
    const RankedTrial& r = best[i];
    h += "<tr><td class=\"num\">" + std::to_string(i + 1) + "</td><td class=\"num\">" + std::to_string(r.trial.seq) +
         "</td>";
    for (double v : r.values) h += "<td class=\"num\">" + escape(number_text(v)) + "</td>";
    h += "<td><pre>" + escape(r.trial.config_json) + "</pre>";
    if (c.space) {
      try {
        std::vector<double> config = c.space->parse(r.trial.config_json);
        for (size_t f = 0; f < 3; ++f) {
          std::string args;
          if (c.space->try_render(config.data(), formats[f], &args))
            h += "<div class=\"launch\">" + escape(format_names[f]) + ":<pre>" + escape(args) + "</pre></div>";
        }
      } catch (const std::exception& e) {
        h += note_html(std::string("launch arguments unavailable: ") + e.what());
      }
    }
    h += "</td></tr>";
  }
  return h + "</tbody></table>";
}

std::string failures_html(const ReportContext& c) {
  std::string rows;
  size_t n = 0;
  for (const ReportTrial& t : c.trials) {
    TrialStatus s = t.record.status;
    if (s == TrialStatus::kOk || !is_finished(s)) continue;
    ++n;
    rows += "<tr><td class=\"num\">" + std::to_string(t.record.seq) + "</td><td class=\"status-" +
            escape(to_string(s)) + "\">" + escape(to_string(s)) + "</td><td>" + escape(t.record.error.value_or("")) +
            "</td><td>" + escape(config_text(c, t)) + "</td></tr>";
  }
  if (n == 0) return note_html("No trial failed.");
  return "<table class=\"failures\"><thead><tr><th>trial</th><th>status</th><th>reason</th><th>configuration</th></tr>"
         "</thead><tbody>" +
         rows + "</tbody></table>";
}

std::string trials_table_html(const ReportContext& c) {
  if (c.trials.empty()) return note_html("No trials yet.");
  // Besides the objective: MFU and peak memory where the trials report them (the objective's own
  // column is not repeated), and the note a trial ended with (why it failed, was refused, ...).
  std::vector<std::string> extra;
  for (const char* m : {"mfu", "peak_mem_gib"}) {
    if (m == c.objective().metric) continue;
    for (const ReportTrial& t : c.trials)
      if (t.record.metrics_json && t.record.metrics_json->find(std::string("\"") + m + "\"") != std::string::npos) {
        extra.emplace_back(m);
        break;
      }
  }
  std::string h = "<table class=\"trials\"><thead><tr><th>trial</th><th>status</th><th>" + escape(c.metric_label()) +
                  "</th><th>predicted</th>";
  for (const std::string& m : extra) h += "<th>" + escape(m) + "</th>";
  h += "<th>executor</th><th>configuration</th><th>note</th></tr></thead><tbody>";
  h.reserve(c.trials.size() * 240);
  for (const ReportTrial& t : c.trials) {
    h += "<tr><td class=\"num\">";
    h += std::to_string(t.record.seq);
    h += "</td><td class=\"status-";
    append_escaped(h, to_string(t.record.status));
    h += "\">";
    append_escaped(h, to_string(t.record.status));
    h += "</td><td class=\"num\">";
    h += t.measured ? number_text(*t.measured) : "-";
    h += "</td><td class=\"num\">";
    h += t.record.predicted ? number_text(*t.record.predicted) : "-";
    h += "</td>";
    for (const std::string& m : extra) {
      const std::optional<double> v = t.record.metrics_json ? metric_value(*t.record.metrics_json, m) : std::nullopt;
      h += "<td class=\"num\">" + (v ? number_text(*v) : std::string("-")) + "</td>";
    }
    h += "<td>";
    append_escaped(h, t.record.executor);
    h += "</td><td>";
    append_escaped(h, config_text(c, t));
    h += "</td><td>";
    append_escaped(h, t.record.error.value_or(""));
    h += "</td></tr>";
  }
  return h + "</tbody></table>";
}

}  // namespace cotune::core::report
