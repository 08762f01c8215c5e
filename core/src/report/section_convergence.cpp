// Convergence: the best feasible value after each trial, against random search's expected curve
// over the whole space (timed with the performance model) where the space is small enough.
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/report/html.hpp>
#include <cotune/core/report/random_baseline.hpp>
#include <cotune/core/report/svg_chart.hpp>

#include <algorithm>
#include <cmath>

#include "report/report_context.hpp"

namespace cotune::core::report {
namespace {

// The metrics the sim executor reports for a timed configuration (the names objectives use).
nlohmann::json simulated_metrics(const cotune_sim_result& r, const cotune_trace& t) {
  nlohmann::json m = {{"step_time_s", r.step_time_s},          {"tokens_per_s", r.tokens_per_s},
                      {"tflops_per_gpu", r.tflops_per_gpu},    {"mfu", r.mfu},
                      {"peak_mem_gib", r.peak_memory_bytes / 1073741824.0}, {"gpus", t.gpus}};
  if (r.cost_per_mtokens > 0) m["cost_per_mtokens"] = r.cost_per_mtokens;
  return m;
}

// The first objective of every valid configuration of the space (nullopt: infeasible), or a reason
// why the space cannot be enumerated.
std::optional<std::vector<std::optional<double>>> enumerate_space(const ReportContext& c, std::string* why) {
  if (!c.space) return *why = "the space is not loaded", std::nullopt;
  if (!c.space->can_lower()) return *why = "the space cannot be timed by the performance model", std::nullopt;
  std::vector<std::vector<double>> domains;
  double size = 1;
  for (const Param& p : c.space->params()) {
    domains.push_back(p.domain());
    size *= static_cast<double>(domains.back().size());
    if (domains.back().empty() || size > static_cast<double>(c.options.random_baseline_max_configs))
      return *why = "the space has more than " + std::to_string(c.options.random_baseline_max_configs) +
                    " configurations",
             std::nullopt;
  }
  const size_t d = domains.size(), total = static_cast<size_t>(size);
  std::vector<double> configs(total * d);
  for (size_t i = 0; i < total; ++i) {
    size_t rest = i;
    for (size_t j = 0; j < d; ++j) {
      configs[i * d + j] = domains[j][rest % domains[j].size()];
      rest /= domains[j].size();
    }
  }
  std::vector<int32_t> valid(total, 0);
  if (total > 0) c.space->check(configs.data(), total, valid.data());
  std::vector<std::optional<double>> values;
  for (size_t i = 0; i < total; ++i) {
    if (!valid[i]) continue;
    const cotune_trace& trace = c.space->lower(&configs[i * d]);
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    perf::simulate(trace, &r);
    Evaluation e = evaluate(c.spec.objectives, simulated_metrics(r, trace));
    values.push_back(r.fits && e.feasible ? std::optional<double>(e.values[0]) : std::nullopt);
  }
  if (std::none_of(values.begin(), values.end(), [](const auto& v) { return v.has_value(); }))
    return *why = "no configuration of the space is feasible by the performance model (or it does not report " +
                  c.objective().metric + ")",
           std::nullopt;
  return values;
}

}  // namespace

std::string convergence_html(const ReportContext& c) {
  std::vector<double> xs, best;
  std::optional<double> so_far;
  double n = 0;
  for (const ReportTrial& t : c.trials) {
    if (!is_finished(t.record.status)) continue;
    ++n;
    if (t.feasible && (!so_far || better(t.values[0], *so_far, c.objective().direction))) so_far = t.values[0];
    if (so_far) {
      xs.push_back(n);
      best.push_back(*so_far);
    }
  }
  std::string note;
  std::vector<double> random_x, random_y;
  if (n > 0) {
    try {
      std::string why;
      if (auto values = enumerate_space(c, &why)) {
        std::vector<size_t> ks;
        const size_t last = std::min(values->size(), static_cast<size_t>(n));
        const size_t step = std::max<size_t>(1, last / 200);
        for (size_t k = 1; k <= last; k += step) ks.push_back(k);
        if (ks.back() != last) ks.push_back(last);
        random_y = expected_best_of_random(*values, c.objective().direction, ks);
        for (size_t k : ks) random_x.push_back(static_cast<double>(k));
        note = "Random search's expected curve: the exact expectation over all " + std::to_string(values->size()) +
               " valid configurations, timed by the performance model.";
      } else {
        note = "No random-search curve: " + why + ".";
      }
    } catch (const std::exception& e) {
      note = std::string("No random-search curve: ") + e.what();
    }
  }
  std::vector<double> all_y = best;
  all_y.insert(all_y.end(), random_y.begin(), random_y.end());
  double lo = 1e300, hi = -1e300;
  for (double v : all_y)
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  ScaleKind ykind = lo > 0 && hi / lo > 20 ? ScaleKind::kLog : ScaleKind::kLinear;
  // A linear axis spans at least a quarter of the largest value, so that a 3 % change fills an
  // eighth of the height at most and does not look like a cliff.
  if (ykind == ScaleKind::kLinear && lo > 0 && hi - lo < 0.25 * hi) all_y.push_back(0.75 * hi);
  Chart chart("Best so far", "trials", c.metric_label(), Scale::fit({1.0, std::max(1.0, n)}), Scale::fit(all_y, ykind));
  chart.line(xs, best, "#1f77b4", "this study", false, true);
  if (!random_y.empty()) chart.line(random_x, random_y, "#7f7f7f", "random search (expected)", true);
  if (best.empty()) chart.note("no feasible measured trial yet");
  return "<div class=\"charts\">" + chart.svg() + "</div>" + (note.empty() ? "" : note_html(note));
}

}  // namespace cotune::core::report
