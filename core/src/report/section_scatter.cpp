// Predicted against measured (with Kendall's tau and MAPE) and, for two objectives, the Pareto front.
#include <cotune/core/history/ranking_metrics.hpp>
#include <cotune/core/report/html.hpp>
#include <cotune/core/report/svg_chart.hpp>

#include <cmath>

#include "report/report_context.hpp"

namespace cotune::core::report {
namespace {
ScaleKind scale_for(const std::vector<double>& values) {
  for (double v : values)
    if (!(v > 0)) return ScaleKind::kLinear;
  return ScaleKind::kLog;
}
}  // namespace

std::string prediction_html(const ReportContext& c) {
  std::vector<double> predicted, measured;
  std::vector<Point> points;
  const double count = static_cast<double>(c.trials.size());
  for (size_t i = 0; i < c.trials.size(); ++i) {
    const ReportTrial& t = c.trials[i];
    if (!t.measured || !t.record.predicted || !std::isfinite(*t.record.predicted)) continue;
    predicted.push_back(*t.record.predicted);
    measured.push_back(*t.measured);
    points.push_back({*t.measured, *t.record.predicted, ramp_color(count > 1 ? static_cast<double>(i) / (count - 1) : 0),
                      "trial " + std::to_string(t.record.seq)});
  }
  if (points.empty()) return note_html("No trial has both a prediction and a measurement yet.");
  std::vector<double> both = predicted;
  both.insert(both.end(), measured.begin(), measured.end());
  // One scale for both axes, so that the identity line is the diagonal.
  Scale s = Scale::fit(both, scale_for(both));
  Chart chart("Predicted against measured", "measured " + c.objective().metric, "predicted", s, s, 520, 460);
  chart.line({s.lo, s.hi}, {s.lo, s.hi}, "#999", "identity", true);
  chart.scatter(points);
  const double tau = kendall_tau(predicted, measured), error = mape(predicted, measured);
  std::string stats = "<p class=\"stats\">" + std::to_string(points.size()) + " trials; Kendall's tau " +
                      escape(std::isnan(tau) ? std::string("n/a") : number_text(tau)) + ", MAPE " +
                      escape(std::isnan(error) ? std::string("n/a") : number_text(error) + "%") +
                      ". Colour: when the trial ran (blue early, orange late).</p>";
  return "<div class=\"charts\">" + chart.svg() + "</div>" + stats;
}

std::string pareto_html(const ReportContext& c) {
  const ObjectiveSpec &a = c.spec.objectives[0], &b = c.spec.objectives[1];
  std::vector<std::vector<double>> values;
  std::vector<int64_t> seqs;
  for (const ReportTrial& t : c.trials)
    if (t.feasible) values.push_back(t.values), seqs.push_back(t.record.seq);
  std::vector<Direction> dirs = {a.direction, b.direction};
  std::vector<size_t> front = pareto_front(values, dirs);
  std::vector<bool> on_front(values.size(), false);
  for (size_t i : front) on_front[i] = true;
  std::vector<Point> points;
  std::vector<double> xs, ys;
  for (size_t i = 0; i < values.size(); ++i) {
    points.push_back({values[i][0], values[i][1], on_front[i] ? "#d62728" : "#bbbbbb",
                      "trial " + std::to_string(seqs[i]) + (on_front[i] ? " (Pareto front)" : "")});
    xs.push_back(values[i][0]);
    ys.push_back(values[i][1]);
  }
  std::vector<std::pair<double, double>> line;
  for (size_t i : front) line.emplace_back(values[i][0], values[i][1]);
  std::sort(line.begin(), line.end());
  std::vector<double> lx, ly;
  for (const auto& [x, y] : line) lx.push_back(x), ly.push_back(y);
  Chart chart("Pareto front", a.metric + " (" + std::string(to_string(a.direction)) + ")",
              b.metric + " (" + std::string(to_string(b.direction)) + ")", Scale::fit(xs), Scale::fit(ys));
  chart.line(lx, ly, "#d62728", "Pareto front", false, true);
  chart.scatter(points);
  if (points.empty()) chart.note("no feasible measured trial yet");
  return "<div class=\"charts\">" + chart.svg() + "</div>" +
         note_html(std::to_string(front.size()) + " of " + std::to_string(values.size()) +
                   " feasible trials are on the front (red).");
}

}  // namespace cotune::core::report
