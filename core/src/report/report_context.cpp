#include "report/report_context.hpp"

#include <cotune/core/errors.hpp>
#include <cotune/core/report/html.hpp>
#include <cotune/core/report/study_json.hpp>
#include <cotune/core/run/study_setup.hpp>

namespace cotune::core::report {

std::string ReportContext::metric_label() const {
  return objective().metric + (objective().direction == Direction::kMaximize ? " (max)" : " (min)");
}

std::string note_html(const std::string& text) { return "<p class=\"note\">" + escape(text) + "</p>"; }

std::string config_text(const ReportContext& c, const ReportTrial& t) {
  if (c.space && !t.config.empty()) return config_summary(*c.space, t.config.data());
  return t.record.config_json;
}

ReportContext load_report_context(Store& store, const StudyRecord& study, const HtmlReportOptions& options) {
  ReportContext c;
  c.study = study;
  c.status_text = study_status_text(store, study);
  c.being_run = study_being_run(store, study);
  c.options = options;
  c.spec = spec_from_store(study);
  if (c.spec.objectives.empty()) throw UserError("study " + study.name + ": its stored study file has no objective");
  try {
    load_study_plugins(c.registry, c.spec);
    c.space = make_study_space(c.registry, c.spec);
  } catch (const std::exception& e) {
    c.space_problem = e.what();
  }
  for (TrialRecord& t : store.trials(study.id)) {
    ReportTrial r;
    r.record = std::move(t);
    if (c.space) {
      try {
        r.config = c.space->parse(r.record.config_json);
      } catch (const std::exception&) {
        r.config.clear();  // a configuration the space no longer reads: shown as stored JSON
      }
    }
    if (r.record.status == TrialStatus::kOk && r.record.metrics_json) {
      nlohmann::json metrics = nlohmann::json::parse(*r.record.metrics_json, nullptr, false);
      r.measured = metric_value(metrics, c.objective().metric);
      Evaluation e = evaluate(c.spec.objectives, metrics);
      r.feasible = e.feasible;
      r.values = e.values;
    }
    c.trials.push_back(std::move(r));
  }
  return c;
}

}  // namespace cotune::core::report
