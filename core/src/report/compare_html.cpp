// The studies of one workload side by side (see study_html.hpp): how each was searched, what it found
// and how soon, and their best-so-far curves on one chart.
#include <cotune/core/errors.hpp>
#include <cotune/core/model/objective.hpp>
#include <cotune/core/report/html.hpp>
#include <cotune/core/report/study_html.hpp>
#include <cotune/core/report/study_json.hpp>
#include <cotune/core/report/svg_chart.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cotune::core::report {
namespace {

struct Compared {
  StudyRecord study;
  std::string status_text;                // study_status_text
  std::string searched;                   // "reinforce, krr (prior analytic)"
  std::vector<double> xs, best;           // best so far after each finished trial
  std::int64_t finished = 0;
  std::optional<double> best_value;
  std::int64_t best_seq = 0;
  std::string best_config;
};

Compared compare_one(Store& store, const StudyRecord& study) {
  Compared c;
  c.study = study;
  c.status_text = study_status_text(store, study);
  try {
    const StudySpec spec = spec_from_store(study);
    c.searched = spec.searcher.name + ", " + spec.predictor.name + " (prior " + std::string(to_string(spec.predictor.prior)) +
                 ")";
  } catch (const std::exception& e) {
    c.searched = std::string("(study file unreadable: ") + e.what() + ")";
  }
  for (const TrialRecord& t : store.trials(study.id)) {
    if (!is_finished(t.status)) continue;
    ++c.finished;
    if (t.status == TrialStatus::kOk && t.objective && (!c.best_value || better(*t.objective, *c.best_value, study.direction))) {
      c.best_value = t.objective;
      c.best_seq = t.seq;
      c.best_config = t.config_json;
    }
    if (c.best_value) {
      c.xs.push_back(static_cast<double>(c.finished));
      c.best.push_back(*c.best_value);
    }
  }
  return c;
}

// The first trial (count) after which the study's best is within 1 % of `target`.
std::optional<double> trials_to_within(const Compared& c, double target, Direction d) {
  for (size_t i = 0; i < c.best.size(); ++i) {
    const double v = c.best[i];
    const bool close = d == Direction::kMaximize ? v >= target * 0.99 : v <= target * 1.01;
    if (close) return c.xs[i];
  }
  return std::nullopt;
}

}  // namespace

std::string workload_comparison_html(Store& store, const std::string& workload_key,
                                     const std::function<std::string(const std::string&)>& link) {
  std::vector<Compared> studies;
  for (const StudySummary& s : store.list_studies())
    if (s.study.workload_key == workload_key) studies.push_back(compare_one(store, s.study));
  if (studies.empty()) throw UserError("store " + store.path() + ": no study of workload key '" + workload_key + "'");
  Page page("cotune: the studies of one workload");
  page.set_subtitle_html("Workload key " + escape(workload_key) + ", " + std::to_string(studies.size()) +
                         " studies, in store " + escape(store.path()) + ".");
  // Studies are comparable on a metric they share with the same direction: the first study's.
  const std::string metric = objective_metric(studies.front().study);
  const Direction direction = studies.front().study.direction;
  std::optional<double> overall;
  for (const Compared& c : studies)
    if (c.best_value && objective_metric(c.study) == metric && c.study.direction == direction &&
        (!overall || better(*c.best_value, *overall, direction)))
      overall = c.best_value;

  std::string table = "<table class=\"studies\"><thead><tr><th>study</th><th>status</th><th>searcher, predictor</th>"
                      "<th>trials</th><th>best " + escape(metric) + "</th><th>found at trial</th>"
                      "<th>trials to within 1 % of the best of all</th><th>best configuration</th></tr></thead><tbody>";
  static const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  std::vector<double> all_y;
  double most = 1;
  for (const Compared& c : studies) {
    const bool same = objective_metric(c.study) == metric && c.study.direction == direction;
    const std::string href = link(c.study.name);
    std::optional<double> within = same && overall ? trials_to_within(c, *overall, direction) : std::nullopt;
    table += "<tr><td>" +
             (href.empty() ? escape(c.study.name) : "<a href=\"" + escape(href) + "\">" + escape(c.study.name) + "</a>") +
             "</td><td>" + escape(c.status_text) + "</td><td>" + escape(c.searched) +
             "</td><td class=\"num\">" + std::to_string(c.finished) + "</td><td class=\"num\">" +
             (c.best_value ? escape((same ? "" : objective_metric(c.study) + " ") + number_text(*c.best_value)) : "-") +
             "</td><td class=\"num\">" + (c.best_value ? std::to_string(c.best_seq) : "-") + "</td><td class=\"num\">" +
             (within ? number_text(*within) : "-") + "</td><td><pre>" + escape(c.best_config) + "</pre></td></tr>";
    if (same) {
      all_y.insert(all_y.end(), c.best.begin(), c.best.end());
      most = std::max(most, static_cast<double>(c.finished));
    }
  }
  table += "</tbody></table>";
  Chart chart("Best so far", "trials", metric + (direction == Direction::kMaximize ? " (max)" : " (min)"),
              Scale::fit({1.0, most}), Scale::fit(all_y));
  size_t i = 0;
  for (const Compared& c : studies) {
    if (objective_metric(c.study) != metric || c.study.direction != direction) continue;
    chart.line(c.xs, c.best, kColors[i++ % (sizeof kColors / sizeof *kColors)], c.study.name, false, true);
  }
  if (all_y.empty()) chart.note("no feasible measured trial yet");
  page.add_section("studies", "Studies", table);
  page.add_section("convergence", "Convergence",
                   "<div class=\"charts\">" + chart.svg() + "</div><p class=\"note\">" +
                       escape("Studies that optimise another metric or direction than " + metric +
                              " are listed but not drawn.") +
                       "</p>");
  return page.str();
}

}  // namespace cotune::core::report
