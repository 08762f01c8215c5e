// The HTML report of a stored study (`cotune report`, the end of `cotune run`, `cotune serve`): one
// self-contained file -- inline styles, charts as inline SVG, no scripts, nothing fetched -- with the
// study's facts, the best configurations and their launch arguments, convergence, predicted against
// measured, the effect of each parameter, the Pareto front (two objectives), the step-time breakdown
// of the best configuration and the failed trials. All user-provided text is escaped.
//
// The report loads the study's space and predictor plugins (as `cotune show` does). When they cannot
// be loaded, the sections that need them say why and the rest of the report is still written.
#ifndef COTUNE_CORE_REPORT_STUDY_HTML_HPP_
#define COTUNE_CORE_REPORT_STUDY_HTML_HPP_

#include <cotune/core/store/store.hpp>

#include <cstddef>
#include <functional>
#include <string>

namespace cotune::core::report {

struct HtmlReportOptions {
  size_t best_limit = 10;  // rows of the best-configurations table (one objective)
  // The partial dependence refits the study's predictor on at most this many of the latest ok
  // trials, so that a report of a long study stays fast.
  size_t surrogate_fit_limit = 400;
  // Random search's expected curve is computed by timing every valid configuration with the
  // performance model when the space has at most this many configurations.
  size_t random_baseline_max_configs = 20000;
  int refresh_s = 0;  // > 0: the page reloads itself (live view of a running study)
};

// The report of study `name`; a UserError when the store has no such study.
std::string study_report_html(Store& store, const std::string& name, const HtmlReportOptions& options = {});

// Writes the report to `path` (through a temporary file and a rename, so a reader never sees half a
// report). Throws UserError when the file cannot be written.
void write_study_report(Store& store, const std::string& name, const std::string& path,
                        const HtmlReportOptions& options = {});

// What `cotune run` does at the end: writes the report of `name` to
// <store directory>/cotune-reports/<name>.html (characters other than letters, digits, '.', '-' and
// '_' become '_') and returns "report: <path>". A report that cannot be written does not fail the
// run: the returned line then says why.
std::string write_run_report(const std::string& store_path, const std::string& name);
// Where `cotune run` writes a study's report, and `cotune report` by default:
// cotune-reports/STUDY.html beside an SQLite store (the directory is created).
std::string default_report_path(const std::string& store_path, const std::string& name);

// The list of a store's studies with their status, trial counts and best value; `link` gives each
// study's URL (relative), or "" for no link; `compare_link`, when given, a workload key's comparison
// page, linked for each workload that several studies tuned.
std::string studies_index_html(Store& store, const std::function<std::string(const std::string&)>& link,
                               int refresh_s = 0,
                               const std::function<std::string(const std::string&)>& compare_link = {});

// The studies of one workload side by side: how each searched (searcher, predictor, prior), its
// trials, best value, the trial that found it and how many trials it took to come within 1 % of the
// best of them all, and their best-so-far curves on one chart. `link` gives each study's URL.
// UserError when no study has that workload key.
std::string workload_comparison_html(Store& store, const std::string& workload_key,
                                     const std::function<std::string(const std::string&)>& link);

}  // namespace cotune::core::report

#endif  // COTUNE_CORE_REPORT_STUDY_HTML_HPP_
