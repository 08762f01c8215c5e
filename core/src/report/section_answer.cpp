// The report's first screen: the answer. The configuration to launch, its measured value, how far
// it is above the first measured trial and above the space's default layout, what the search cost,
// and the launch command in the study's format.
#include <cotune/core/model/objective.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/report/html.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/core/run/study_report.hpp>
#include <cotune/core/model/surrogate.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "report/report_context.hpp"
#include "run/budget.hpp"

namespace cotune::core::report {
namespace {

// "+12.3 % better" / "2.10x better": how much `value` improves on `base` in the objective's direction.
std::string gain_text(double value, double base, Direction direction) {
  if (!(base > 0) || !(value > 0)) return number_text(value) + " against " + number_text(base);
  const double ratio = direction == Direction::kMaximize ? value / base : base / value;
  if (ratio >= 2) return number_text(std::round(ratio * 100) / 100) + "x better";
  const double pct = std::round((ratio - 1) * 1000) / 10;
  if (pct == 0) return "the same, to 0.1 %";
  return (pct > 0 ? "+" : "") + number_text(pct) + " % " + (pct > 0 ? "better" : "worse");
}

// The best measured feasible trial (first objective), or nullptr.
const ReportTrial* best_measured(const ReportContext& c) {
  std::vector<TrialRecord> records;
  for (const ReportTrial& t : c.trials) records.push_back(t.record);
  const std::vector<RankedTrial> best = best_trials(records, c.spec.objectives, 1);
  if (best.empty()) return nullptr;
  for (const ReportTrial& t : c.trials)
    if (t.record.id == best.front().trial.id) return &t;
  return nullptr;
}

// The trial to launch: the one the study recommended (its predictor's pick among the measured), else
// the best measured feasible trial.
const ReportTrial* recommended(const ReportContext& c, const ReportTrial* best, std::string* why) {
  if (c.study.recommended_trial_id)
    for (const ReportTrial& t : c.trials)
      if (t.record.id == *c.study.recommended_trial_id && t.feasible) {
        *why = "recommended by the study: the measured trial its predictor rates best over every run";
        return &t;
      }
  *why = "the best measured trial";
  return best;
}

// The space's default configuration (every parameter at its default: what a run without tuning
// gets): as a trial measured it when one did, else as the performance model times it against the
// model's time of `t` (a measurement against an estimate would hold the model's error on this
// machine); "" when the space cannot say.
std::string default_layout_text(const ReportContext& c, const ReportTrial& t) {
  const double value = t.values.front();
  if (!c.space || !c.space->can_lower()) return "";
  std::vector<double> config;
  try {
    config = c.space->parse("{}");
  } catch (const std::exception&) {
    return "";
  }
  const std::string name = config_summary(*c.space, config.data());
  // A measurement of it outranks the model's word on it.
  const std::string key = c.space->key(config.data());
  for (const ReportTrial& d : c.trials) {
    if (d.config.empty() || c.space->key(d.config.data()) != key) continue;
    const std::string trial = "trial " + std::to_string(d.record.seq);
    if (d.record.status == TrialStatus::kOom) return "The space's default layout (" + name + ") ran out of memory (" + trial + ").";
    if (d.measured)
      return "Against the space's default layout (" + name + "), measured in " + trial + " at " + c.objective().metric +
             " " + number_text(*d.measured) + ": " + gain_text(value, *d.measured, c.objective().direction) + ".";
  }
  const std::string why = c.space->explain(config.data());
  if (!why.empty())
    return "The space's default layout (" + name + ") " +
           (why.rfind("out of memory", 0) == 0 ? "does not fit by the memory estimate (" + why + ")"
                                               : "is not a valid configuration here: " + why) +
           "; no trial measured it.";
  const auto timed = [&](const std::vector<double>& x) -> std::optional<double> {
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    const cotune_trace& trace = c.space->lower(x.data());
    perf::simulate(trace, &r);
    return model_metric(r, trace, c.objective().metric);
  };
  const std::optional<double> base = timed(config);
  if (!base) return "";
  const std::optional<double> mine = t.config.empty() ? std::nullopt : timed(t.config);
  if (!mine) return "";
  return "No trial measured the space's default layout (" + name + "); the performance model times it at " +
         c.objective().metric + " " + number_text(*base) + " and this configuration at " + number_text(*mine) + ": " +
         gain_text(*mine, *base, c.objective().direction) + " (estimates of both, so that the model's error on this "
         "machine does not enter the comparison).";
}

std::string cost_text(const ReportContext& c) {
  std::int64_t measured = 0, failed = 0, oom = 0;
  double gpu_hours = 0;
  for (const ReportTrial& t : c.trials) {
    const TrialStatus s = t.record.status;
    if (!counts_against_budget(s)) continue;
    ++measured;
    if (s == TrialStatus::kOom) ++oom;
    else if (s != TrialStatus::kOk) ++failed;
    // The trace's GPUs only when the trial's metrics do not say (trial_gpu_hours prefers them).
    double gpus = 0;
    const std::string metrics = t.record.metrics_json.value_or("{}");
    if (!metric_value(metrics, "gpus") && c.space && c.space->can_lower() && !t.config.empty()) {
      try {
        gpus = c.space->lower(t.config.data()).gpus;
      } catch (const std::exception&) {
        gpus = 0;
      }
    }
    gpu_hours += trial_gpu_hours(metrics, t.record.started_at, t.record.finished_at, gpus);
  }
  std::string s = std::to_string(measured) + " trial" + (measured == 1 ? "" : "s") + " measured";
  std::string not_ok;
  if (oom > 0) not_ok = std::to_string(oom) + " out of memory";
  if (failed > 0) not_ok += (not_ok.empty() ? "" : ", ") + std::to_string(failed) + " failed";
  if (!not_ok.empty()) s += " (" + not_ok + ")";
  // The performance model and a table of runs answer without running anything.
  const std::string& executor = c.spec.executor.name;
  if (executor == "sim" || executor == "replay")
    return s + ", no GPU time: the " + (executor == "sim" ? "performance model" : "replayed table") +
           " answered them.";
  s += ", " + number_text(gpu_hours) + " GPU-hours";
  const nlohmann::json* cluster = c.spec.workload.contains("cluster") ? &c.spec.workload["cluster"] : nullptr;
  if (cluster && cluster->is_object() && cluster->contains("price_per_gpu_hour") &&
      (*cluster)["price_per_gpu_hour"].is_number())
    s += " (" + number_text(gpu_hours * (*cluster)["price_per_gpu_hour"].get<double>()) + " at " +
         number_text((*cluster)["price_per_gpu_hour"].get<double>()) + " per GPU-hour)";
  return s + ".";
}

// The launch arguments in the study's format, else the first format the space renders.
std::string launch_html(const ReportContext& c, const ReportTrial& t) {
  if (!c.space || t.config.empty()) return "";
  const std::pair<RenderFormat, int32_t> formats[] = {{RenderFormat::kMegatron, COTUNE_RENDER_MEGATRON},
                                                      {RenderFormat::kTorchtitan, COTUNE_RENDER_TORCHTITAN},
                                                      {RenderFormat::kNemo, COTUNE_RENDER_NEMO},
                                                      {RenderFormat::kDeepspeed, COTUNE_RENDER_DEEPSPEED},
                                                      {RenderFormat::kTorchrec, COTUNE_RENDER_TORCHREC}};
  std::string text;
  for (const auto& [format, code] : formats) {
    if (c.spec.format != RenderFormat::kJson && format != c.spec.format) continue;
    if (c.space->try_render(t.config.data(), code, &text))
      return "<div class=\"launch\">Launch (" +
             escape(c.space->target().empty() ? std::string(to_string(format)) : c.space->target()) + "):<pre>" +
             escape(text) + "</pre></div>";
  }
  return "";
}

}  // namespace

std::string answer_html(const ReportContext& c) {
  if (c.spec.pareto()) {
    std::vector<TrialRecord> records;
    for (const ReportTrial& t : c.trials) records.push_back(t.record);
    const size_t front = best_trials(records, c.spec.objectives, 0).size();
    if (front == 0) return note_html("No feasible measured configuration yet.") + "<p>" + escape(cost_text(c)) + "</p>";
    return "<p>" + std::to_string(front) + " configuration" + (front == 1 ? "" : "s") +
           " on the Pareto front of " + escape(c.spec.objectives[0].metric) + " and " +
           escape(c.spec.objectives[1].metric) + ": see the table below and the chart of the front.</p><p>" +
           escape(cost_text(c)) + "</p>";
  }
  std::string why;
  const ReportTrial* top = best_measured(c);
  const ReportTrial* t = recommended(c, top, &why);
  if (t == nullptr) return note_html("No feasible measured configuration yet.") + "<p>" + escape(cost_text(c)) + "</p>";
  const double value = t->values.front();
  std::string h = "<p class=\"answer\"><strong>" + escape(config_text(c, *t)) + "</strong></p>";
  h += "<p>Trial " + std::to_string(t->record.seq) + ", " + escape(why) + ": " + escape(c.objective().metric) + " " +
       "<strong>" + escape(number_text(value)) + "</strong> measured.";
  // The recommendation weighs the predictor's estimate over one noisy measurement: say when a
  // higher value was measured.
  if (top != nullptr && top != t)
    h += " Trial " + std::to_string(top->record.seq) + " measured " + escape(number_text(top->values.front())) +
         ", the best single measurement; the predictor, fitted on every trial, rates this one better once "
         "measurement noise is averaged out.";
  for (const ReportTrial& first : c.trials)
    if (first.feasible) {
      if (first.record.id != t->record.id)
        h += " Against the first feasible measured trial (" + escape(number_text(first.values.front())) + "): " +
             escape(gain_text(value, first.values.front(), c.objective().direction)) + ".";
      break;
    }
  h += "</p>";
  try {
    const std::string baseline = default_layout_text(c, *t);
    if (!baseline.empty()) h += "<p>" + escape(baseline) + "</p>";
  } catch (const std::exception& e) {
    h += note_html(std::string("No comparison with the default layout: ") + e.what());
  }
  h += "<p>Search cost: " + escape(cost_text(c)) + "</p>";
  h += launch_html(c, *t);
  return h;
}

}  // namespace cotune::core::report
