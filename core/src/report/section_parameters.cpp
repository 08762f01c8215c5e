// The effect of each parameter: the measured objective by the parameter's value (mean, and the range
// from worst to best), and the partial dependence of the study's predictor refitted on the latest ok
// trials (the mean prediction over those trials with the parameter set to each value).
#include <cotune/core/report/html.hpp>
#include <cotune/core/report/svg_chart.hpp>
#include <cotune/core/model/surrogate.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "report/report_context.hpp"

namespace cotune::core::report {
namespace {

constexpr size_t kMaxLevels = 24;  // more distinct values than this are binned
constexpr size_t kBins = 10;

struct Levels {
  std::vector<double> values;  // the representative value of each level (ascending)
  bool categorical = false;    // x positions are level indices with labels
};

Levels levels_of(const Param& p, const std::vector<const ReportTrial*>& ok, size_t column) {
  Levels l;
  std::vector<double> domain = p.domain();
  if (!domain.empty() && domain.size() <= kMaxLevels) {
    l.values = domain;
    l.categorical = p.type == COTUNE_PARAM_CATEGORICAL || p.type == COTUNE_PARAM_BOOL || domain.size() <= 8;
    return l;
  }
  double lo = p.low, hi = p.high;
  if (!(std::isfinite(lo) && std::isfinite(hi) && hi > lo)) {
    lo = 1e300, hi = -1e300;
    for (const ReportTrial* t : ok) lo = std::min(lo, t->config[column]), hi = std::max(hi, t->config[column]);
    if (!(hi > lo)) return l;
  }
  for (size_t b = 0; b < kBins; ++b) l.values.push_back(lo + (hi - lo) * (b + 0.5) / kBins);
  return l;
}

size_t level_index(const Levels& l, double v) {
  size_t best = 0;
  for (size_t i = 1; i < l.values.size(); ++i)
    if (std::abs(l.values[i] - v) < std::abs(l.values[best] - v)) best = i;
  return best;
}

// The partial dependence curve of every parameter (empty vectors when the predictor is unusable).
std::vector<std::vector<double>> partial_dependence(const ReportContext& c, const std::vector<const ReportTrial*>& ok,
                                                    const std::vector<Levels>& levels, bool log_target,
                                                    std::string* problem) {
  std::vector<std::vector<double>> curves(levels.size());
  try {
    std::vector<const ReportTrial*> fit(ok.end() - static_cast<long>(std::min(ok.size(), c.options.surrogate_fit_limit)),
                                        ok.end());
    const size_t d = c.space->num_params(), f = c.space->feature_names().size();
    std::vector<double> configs, y;
    for (const ReportTrial* t : fit) {
      configs.insert(configs.end(), t->config.begin(), t->config.end());
      y.push_back(log_target ? std::log(*t->measured) : *t->measured);
    }
    std::vector<double> x(fit.size() * f);
    c.space->featurize(configs.data(), fit.size(), x.data());
    // The targets are transformed here (log when every value is positive), so the predictor must not
    // transform them again: the options the study loop gives it ("log": false).
    std::unique_ptr<Predictor> predictor = c.registry.make_predictor(
        c.spec.predictor.name, surrogate_predictor_options(c.spec.predictor.options.dump(), "/predictor/options"));
    predictor->fit(x.data(), fit.size(), f, y.data());
    // Each trial's configuration with parameter j set to the level, averaged over those that stay
    // valid (tp 8 where the heads allow it, ...); NaN where none does.
    std::vector<double> probe, features, out;
    for (size_t j = 0; j < levels.size(); ++j) {
      for (double v : levels[j].values) {
        probe.clear();
        for (size_t i = 0; i < fit.size(); ++i) {
          const size_t at = probe.size();
          probe.insert(probe.end(), configs.begin() + static_cast<long>(i * d), configs.begin() + static_cast<long>((i + 1) * d));
          probe[at + j] = v;
          if (!c.space->valid(probe.data() + at)) probe.resize(at);
        }
        const size_t n = probe.size() / d;
        if (n == 0) {
          curves[j].push_back(std::numeric_limits<double>::quiet_NaN());
          continue;
        }
        features.resize(n * f);
        out.resize(n);
        c.space->featurize(probe.data(), n, features.data());
        predictor->predict(features.data(), n, f, out.data());
        double mean = 0;
        for (double p : out) mean += log_target ? std::exp(p) : p;
        curves[j].push_back(mean / static_cast<double>(n));
      }
    }
  } catch (const std::exception& e) {
    *problem = e.what();
    return std::vector<std::vector<double>>(levels.size());
  }
  return curves;
}

// The spread (standard deviation) of finite values; 0 with fewer than two.
double spread(const std::vector<double>& v) {
  double n = 0, sum = 0, sq = 0;
  for (double x : v)
    if (std::isfinite(x)) ++n, sum += x, sq += x * x;
  if (n < 2) return 0;
  const double mean = sum / n;
  return std::sqrt(std::max(0.0, sq / n - mean * mean));
}

}  // namespace

std::string parameters_html(const ReportContext& c) {
  if (!c.space) return note_html("The space is not loaded: " + c.space_problem);
  std::vector<const ReportTrial*> ok;
  bool positive = true;
  for (const ReportTrial& t : c.trials)
    if (t.measured && t.config.size() == c.space->num_params()) {
      ok.push_back(&t);
      positive = positive && *t.measured > 0;
    }
  if (ok.empty()) return note_html("No measured trial yet.");
  const std::vector<Param>& params = c.space->params();
  std::vector<Levels> levels;
  std::vector<size_t> measured_levels(params.size(), 0);  // distinct levels the measured trials took
  for (size_t j = 0; j < params.size(); ++j) {
    levels.push_back(levels_of(params[j], ok, j));
    std::map<size_t, bool> used;
    for (const ReportTrial* t : ok) used[level_index(levels[j], t->config[j])] = true;
    measured_levels[j] = used.size();
  }
  std::string problem;
  std::vector<std::vector<double>> pd;
  if (ok.size() >= 2) pd = partial_dependence(c, ok, levels, positive, &problem);
  else problem = "fewer than two measured trials";

  // Importance: how far the objective moves with each parameter, as the spread of its partial
  // dependence (of the measured means where the predictor could not be refitted), as a share.
  std::vector<std::pair<std::string, double>> importance;
  bool from_predictor = true;
  double mean_objective = 0;
  for (const ReportTrial* t : ok) mean_objective += std::fabs(*t->measured) / static_cast<double>(ok.size());
  for (size_t j = 0; j < params.size(); ++j) {
    if (levels[j].values.size() < 2 || measured_levels[j] < 2) continue;
    double effect = pd.empty() ? 0 : spread(pd[j]);
    if (pd.empty() || pd[j].empty()) {
      from_predictor = false;
      std::map<size_t, std::pair<double, double>> by_level;  // sum, count
      for (const ReportTrial* t : ok) {
        auto& m = by_level[level_index(levels[j], t->config[j])];
        m.first += *t->measured, m.second += 1;
      }
      std::vector<double> means;
      for (const auto& [k, m] : by_level) means.push_back(m.first / m.second);
      effect = spread(means);
    }
    importance.emplace_back(params[j].name, effect);
  }
  double total = 0, largest = 0;
  for (const auto& [name, v] : importance) total += v, largest = std::max(largest, v);
  std::string h;
  // Shares of effects that move the objective by a fraction of a percent would look significant.
  if (total > 0 && largest < 0.005 * mean_objective) {
    h += note_html("No importance chart: no parameter moves " + c.objective().metric +
                   " by more than 0.5 % of its mean over the values measured.");
  } else if (total > 0) {
    for (auto& [name, v] : importance) v = std::round(1000 * v / total) / 10;
    std::stable_sort(importance.begin(), importance.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    h += bar_chart_svg("Importance of each parameter (% of the total effect)", importance);
    h += note_html(std::string("Importance: the spread (standard deviation) of ") +
                   (from_predictor ? "the predictor's partial dependence" : "the measured mean") +
                   " over each parameter's values, as a share of all parameters'. First-order effects only: what "
                   "parameters do together (tp with dp at a fixed GPU count) is not split out.");
  }
  h += "<div class=\"charts\">";
  for (size_t j = 0; j < params.size(); ++j) {
    const Levels& l = levels[j];
    if (l.values.size() < 2 || measured_levels[j] < 2) continue;  // one value measured: no effect to show
    std::vector<double> sum(l.values.size(), 0), lo(l.values.size(), 1e300), hi(l.values.size(), -1e300);
    std::vector<size_t> count(l.values.size(), 0);
    for (const ReportTrial* t : ok) {
      size_t k = level_index(l, t->config[j]);
      sum[k] += *t->measured;
      lo[k] = std::min(lo[k], *t->measured);
      hi[k] = std::max(hi[k], *t->measured);
      ++count[k];
    }
    auto xpos = [&](size_t k) { return l.categorical ? static_cast<double>(k) : l.values[k]; };
    std::vector<double> mx, my, all_y;
    std::vector<Point> ranges;
    for (size_t k = 0; k < l.values.size(); ++k) {
      if (count[k] == 0) continue;
      mx.push_back(xpos(k));
      my.push_back(sum[k] / static_cast<double>(count[k]));
      ranges.push_back({xpos(k), lo[k], "#9ecae1", "worst " + number_text(lo[k])});
      ranges.push_back({xpos(k), hi[k], "#9ecae1", "best " + number_text(hi[k])});
      all_y.push_back(lo[k]);
      all_y.push_back(hi[k]);
    }
    std::vector<double> px, py;  // the predictor's curve where some configuration was valid
    for (size_t k = 0; k < l.values.size(); ++k) {
      if (pd.empty() || k >= pd[j].size() || !std::isfinite(pd[j][k])) continue;
      px.push_back(xpos(k));
      py.push_back(pd[j][k]);
    }
    all_y.insert(all_y.end(), py.begin(), py.end());
    std::vector<double> every_x;
    for (size_t k = 0; k < l.values.size(); ++k) every_x.push_back(xpos(k));
    Scale xs = l.categorical ? Scale{ScaleKind::kLinear, -0.5, static_cast<double>(l.values.size()) - 0.5}
                             : Scale::fit(every_x);
    Chart chart(params[j].name, params[j].name + (params[j].unit.empty() ? "" : " [" + params[j].unit + "]"),
                c.objective().metric, xs, Scale::fit(all_y), 340, 260);
    if (l.categorical) {
      std::vector<std::pair<double, std::string>> ticks;
      for (size_t k = 0; k < l.values.size(); ++k) ticks.emplace_back(static_cast<double>(k), params[j].format(l.values[k]));
      chart.x_categories(ticks);
    }
    chart.scatter(ranges, 2.5);
    chart.line(mx, my, "#1f77b4", "measured mean");
    if (!py.empty()) chart.line(px, py, "#ff7f0e", "predictor", true);
    h += chart.svg();
  }
  h += "</div>";
  h += note_html("Measured: the mean of the ok trials at each value (dots: worst and best). Predictor: the partial "
                 "dependence of the study's predictor (" + c.spec.predictor.name + ") refitted on the latest " +
                 std::to_string(std::min(ok.size(), c.options.surrogate_fit_limit)) + " measured trials.");
  if (!problem.empty()) h += note_html("No partial dependence: " + problem);
  return h;
}

std::string parallel_html(const ReportContext& c) {
  if (!c.space) return note_html("The space is not loaded: " + c.space_problem);
  std::vector<const ReportTrial*> ok;
  for (const ReportTrial& t : c.trials)
    if (t.measured && t.config.size() == c.space->num_params()) ok.push_back(&t);
  if (ok.size() < 2) return note_html("Fewer than two measured trials.");
  const std::vector<Param>& params = c.space->params();
  // An axis per parameter that varies among the measured trials, its values evenly spaced; the
  // objective last.
  std::vector<ParallelAxis> axes;
  std::vector<size_t> columns;
  std::vector<Levels> levels;
  for (size_t j = 0; j < params.size(); ++j) {
    Levels l = levels_of(params[j], ok, j);
    std::map<size_t, bool> used;
    for (const ReportTrial* t : ok) used[level_index(l, t->config[j])] = true;
    if (used.size() < 2) continue;
    ParallelAxis a;
    a.name = params[j].name;
    const double last = static_cast<double>(l.values.size() - 1);
    for (size_t k = 0; k < l.values.size(); ++k)
      if (used.count(k)) a.ticks.emplace_back(static_cast<double>(k) / last, params[j].format(l.values[k]));
    axes.push_back(a);
    columns.push_back(j);
    levels.push_back(l);
  }
  double lo = 1e300, hi = -1e300;
  for (const ReportTrial* t : ok) lo = std::min(lo, *t->measured), hi = std::max(hi, *t->measured);
  const Scale y = Scale::fit({lo, hi});
  ParallelAxis objective;
  objective.name = c.metric_label();
  for (double v : y.ticks(5)) objective.ticks.emplace_back(y.fraction(v), tick_label(v));
  axes.push_back(objective);
  const bool maximize = c.objective().direction == Direction::kMaximize;
  const ReportTrial* best = nullptr;
  for (const ReportTrial* t : ok)
    if (t->feasible && (!best || better(t->values[0], best->values[0], c.objective().direction))) best = t;
  std::vector<ParallelLine> lines;
  for (const ReportTrial* t : ok) {
    ParallelLine line;
    for (size_t i = 0; i < columns.size(); ++i)
      line.positions.push_back(static_cast<double>(level_index(levels[i], t->config[columns[i]])) /
                               static_cast<double>(levels[i].values.size() - 1));
    line.positions.push_back(y.fraction(*t->measured));
    const double goodness = hi > lo ? (*t->measured - lo) / (hi - lo) : 1;
    line.color = ramp_color(maximize ? goodness : 1 - goodness);
    line.tooltip = "trial " + std::to_string(t->record.seq) + ": " + number_text(*t->measured);
    if (t == best) line.color = "#d62728", line.width = 3, line.tooltip += " (best)";
    lines.push_back(std::move(line));
  }
  // The best drawn last, on top.
  std::stable_partition(lines.begin(), lines.end(), [](const ParallelLine& l) { return l.width < 3; });
  return parallel_coordinates_svg("Measured trials across the parameters", axes, lines) +
         note_html("One line per measured trial through its value of each parameter that varied; colour from worst "
                   "(blue) to best (orange) " + c.objective().metric + ", the best feasible trial in red.");
}

}  // namespace cotune::core::report
