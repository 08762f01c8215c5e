#include <cotune/core/study_report.hpp>
#include <cotune/core/study_setup.hpp>

#include <algorithm>
#include <sstream>

#include "study/progress.hpp"

namespace cotune::core {

std::vector<RankedTrial> best_trials(const std::vector<TrialRecord>& trials, const std::vector<ObjectiveSpec>& objectives,
                                     size_t limit) {
  std::vector<RankedTrial> feasible;
  for (const TrialRecord& t : trials) {
    if (t.status != TrialStatus::ok || !t.metrics_json) continue;
    Evaluation e = evaluate(objectives, nlohmann::json::parse(*t.metrics_json, nullptr, false));
    if (e.feasible) feasible.push_back({t, e.values});
  }
  const Direction first = objectives.front().direction;
  auto order = [&](const RankedTrial& a, const RankedTrial& b) {
    if (better(a.values[0], b.values[0], first)) return true;
    if (better(b.values[0], a.values[0], first)) return false;
    return a.trial.seq < b.trial.seq;
  };
  if (objectives.size() > 1) {
    std::vector<std::vector<double>> points;
    std::vector<Direction> directions;
    for (const ObjectiveSpec& o : objectives) directions.push_back(o.direction);
    for (const RankedTrial& r : feasible) points.push_back(r.values);
    std::vector<RankedTrial> front;
    for (size_t i : pareto_front(points, directions)) front.push_back(feasible[i]);
    std::sort(front.begin(), front.end(), order);
    return front;
  }
  std::sort(feasible.begin(), feasible.end(), order);
  if (feasible.size() > limit) feasible.resize(limit);
  return feasible;
}

std::string render_stored_config(const Space& space, const std::string& config_json, int32_t format) {
  std::vector<double> config = space.parse(config_json);
  return space.render(config.data(), format);
}

void print_best_table(std::FILE* out, const std::vector<RankedTrial>& best, const StudySpec& spec, const Space& space) {
  if (best.empty()) {
    std::fprintf(out, "no feasible measured configuration yet\n");
    return;
  }
  std::fprintf(out, "%s\n", spec.pareto() ? "Pareto front (non-dominated feasible trials):" : "best configurations:");
  std::vector<std::string> columns;
  for (const ObjectiveSpec& o : spec.objectives)
    columns.push_back(o.metric + (o.direction == Direction::maximize ? " (max)" : " (min)"));
  std::fprintf(out, "  %-3s %-6s", "#", "trial");
  for (const std::string& c : columns) std::fprintf(out, " %-*s", static_cast<int>(std::max<size_t>(c.size(), 12)), c.c_str());
  std::fprintf(out, " configuration\n");

  const int32_t format = render_format_code(spec.format);
  for (size_t i = 0; i < best.size(); ++i) {
    const RankedTrial& r = best[i];
    std::vector<double> config = space.parse(r.trial.config_json);
    std::fprintf(out, "  %-3zu %-6lld", i + 1, static_cast<long long>(r.trial.seq));
    for (size_t k = 0; k < columns.size(); ++k)
      std::fprintf(out, " %-*s", static_cast<int>(std::max<size_t>(columns[k].size(), 12)),
                   compact_number(r.values[k]).c_str());
    std::fprintf(out, " %s\n", config_summary(space, config.data()).c_str());
    if (format == COTUNE_RENDER_JSON) continue;
    std::string args;
    if (!space.try_render(config.data(), format, &args)) {
      std::fprintf(out, "      (the space cannot render %s launch arguments)\n", std::string(to_string(spec.format)).c_str());
      continue;
    }
    std::istringstream lines(args);
    for (std::string l; std::getline(lines, l);) std::fprintf(out, "      %s\n", l.c_str());
  }
}

std::string status_counts_text(const std::map<TrialStatus, std::int64_t>& counts) {
  std::string text;
  for (const auto& [status, n] : counts) {
    if (n == 0) continue;
    if (!text.empty()) text += ", ";
    text += std::to_string(n) + " " + std::string(to_string(status));
  }
  return text.empty() ? "no trials" : text;
}

}  // namespace cotune::core
