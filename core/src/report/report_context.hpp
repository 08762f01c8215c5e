// What every section of the study report reads: the study, its spec, its trials with their parsed
// configurations and evaluations, and the space (when its plugin could be loaded).
#ifndef COTUNE_REPORT_REPORT_CONTEXT_HPP_
#define COTUNE_REPORT_REPORT_CONTEXT_HPP_

#include <cotune/core/abi/components.hpp>
#include <cotune/core/model/objective.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/report/study_html.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cotune::core::report {

struct ReportTrial {
  TrialRecord record;
  std::vector<double> config;     // parsed by the space; empty when it could not be
  std::optional<double> measured;  // the first objective's metric, when measured
  bool feasible = false;           // ok, every objective measured, every constraint met
  std::vector<double> values;      // one per objective (feasible trials)
};

struct ReportContext {
  StudyRecord study;
  std::string status_text;  // study_status_text: "interrupted" when no live run holds a running study
  bool being_run = false;   // study_being_run
  StudySpec spec;
  std::vector<ReportTrial> trials;  // ordered by seq
  Registry registry;
  std::unique_ptr<Space> space;
  std::string space_problem;  // why `space` is missing ("" when loaded)
  HtmlReportOptions options;

  const ObjectiveSpec& objective() const { return spec.objectives.front(); }
  std::string metric_label() const;  // "step_time_s (min)"
};

ReportContext load_report_context(Store& store, const StudyRecord& study, const HtmlReportOptions& options);

// The sections, each an HTML fragment.
std::string answer_html(const ReportContext& c);
std::string study_facts_html(const ReportContext& c);
std::string best_configurations_html(const ReportContext& c);
std::string convergence_html(const ReportContext& c);
std::string prediction_html(const ReportContext& c);
std::string parameters_html(const ReportContext& c);
std::string parallel_html(const ReportContext& c);
std::string pareto_html(const ReportContext& c);
std::string breakdown_html(const ReportContext& c);
std::string failures_html(const ReportContext& c);
std::string trials_table_html(const ReportContext& c);

// "<p class=\"note\">...</p>" with the text escaped.
std::string note_html(const std::string& text);
// A trial's configuration as "tp=8 pp=2 ...", or its stored JSON when the space cannot read it.
std::string config_text(const ReportContext& c, const ReportTrial& t);

}  // namespace cotune::core::report

#endif  // COTUNE_REPORT_REPORT_CONTEXT_HPP_
