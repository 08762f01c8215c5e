#include <cotune/core/run/study_report.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <algorithm>
#include <sstream>

#include "run/progress.hpp"

#include <cotune/core/store/store_location.hpp>

#include "cli/shell_word.hpp"

namespace cotune::core {

std::vector<RankedTrial> best_trials(const std::vector<TrialRecord>& trials, const std::vector<ObjectiveSpec>& objectives,
                                     size_t limit) {
  // Indices and values first; only the records returned are copied (a study may hold a million).
  std::vector<size_t> feasible;
  std::vector<std::vector<double>> values;
  for (size_t i = 0; i < trials.size(); ++i) {
    const TrialRecord& t = trials[i];
    if (t.status != TrialStatus::kOk || !t.metrics_json) continue;
    Evaluation e = evaluate(objectives, nlohmann::json::parse(*t.metrics_json, nullptr, false));
    if (!e.feasible) continue;
    feasible.push_back(i);
    values.push_back(std::move(e.values));
  }
  const Direction first = objectives.front().direction;
  auto order = [&](size_t a, size_t b) {  // positions in `feasible`
    if (better(values[a][0], values[b][0], first)) return true;
    if (better(values[b][0], values[a][0], first)) return false;
    return trials[feasible[a]].seq < trials[feasible[b]].seq;
  };
  std::vector<size_t> picked;
  if (objectives.size() > 1) {
    std::vector<Direction> directions;
    for (const ObjectiveSpec& o : objectives) directions.push_back(o.direction);
    picked = pareto_front(values, directions);
    std::sort(picked.begin(), picked.end(), order);
  } else {
    picked.resize(feasible.size());
    for (size_t k = 0; k < picked.size(); ++k) picked[k] = k;
    // A total order (ties go to the earlier trial): the first `limit` are those a full sort gives.
    const size_t keep = std::min(limit, picked.size());
    std::partial_sort(picked.begin(), picked.begin() + static_cast<std::ptrdiff_t>(keep), picked.end(), order);
    picked.resize(keep);
  }
  std::vector<RankedTrial> out;
  out.reserve(picked.size());
  for (size_t k : picked) out.push_back({trials[feasible[k]], values[k]});
  return out;
}

std::string render_stored_config(const Space& space, const std::string& config_json, int32_t format) {
  std::vector<double> config = space.parse(config_json);
  return space.render(config.data(), format);
}

void print_best_table(std::FILE* out, const std::vector<RankedTrial>& best, const StudySpec& spec, const Space& space,
                      size_t launch_args_rows) {
  if (best.empty()) {
    std::fprintf(out, "no feasible measured configuration yet\n");
    return;
  }
  std::fprintf(out, "%s\n", spec.pareto() ? "Pareto front (non-dominated feasible trials):" : "best configurations:");
  std::vector<std::string> columns;
  for (const ObjectiveSpec& o : spec.objectives)
    columns.push_back(o.metric + (o.direction == Direction::kMaximize ? " (max)" : " (min)"));
  std::fprintf(out, "  %-3s %-6s", "#", "trial");
  for (const std::string& c : columns) std::fprintf(out, " %-*s", static_cast<int>(std::max<size_t>(c.size(), 12)), c.c_str());
  std::fprintf(out, " configuration\n");

  for (size_t i = 0; i < best.size(); ++i) {
    const RankedTrial& r = best[i];
    std::vector<double> config = space.parse(r.trial.config_json);
    std::fprintf(out, "  %-3zu %-6lld", i + 1, static_cast<long long>(r.trial.seq));
    for (size_t k = 0; k < columns.size(); ++k)
      std::fprintf(out, " %-*s", static_cast<int>(std::max<size_t>(columns[k].size(), 12)),
                   compact_number(r.values[k]).c_str());
    std::fprintf(out, " %s\n", config_summary(space, config.data()).c_str());
    if (i < launch_args_rows) print_launch_arguments(out, space, r.trial.config_json, spec);
  }
}

void print_launch_arguments(std::FILE* out, const Space& space, const std::string& config_json, const StudySpec& spec) {
  const int32_t format = render_format_code(spec.format);
  if (format == COTUNE_RENDER_JSON) return;
  std::vector<double> config = space.parse(config_json);
  std::string args;
  if (!space.try_render(config.data(), format, &args)) {
    std::fprintf(out, "      (the space cannot render %s launch arguments)\n", std::string(to_string(spec.format)).c_str());
    return;
  }
  std::istringstream lines(args);
  for (std::string l; std::getline(lines, l);) std::fprintf(out, "      %s\n", l.c_str());
}

std::string status_counts_text(const std::map<TrialStatus, std::int64_t>& counts, bool study_running) {
  std::string text;
  std::int64_t interrupted = 0;
  for (const auto& [status, n] : counts) {
    if (n == 0) continue;
    if (!study_running && (status == TrialStatus::kPending || status == TrialStatus::kRunning)) {
      interrupted += n;
      continue;
    }
    if (!text.empty()) text += ", ";
    text += std::to_string(n) + " " + std::string(to_string(status));
  }
  if (interrupted > 0) text += (text.empty() ? "" : ", ") + std::to_string(interrupted) + " interrupted";
  return text.empty() ? "no trials" : text;
}

void print_other_rows_hint(std::FILE* out, const std::vector<RankedTrial>& best, size_t launch_args_rows,
                           const StudySpec& spec, const std::string& study, const std::string& store) {
  if (best.size() <= launch_args_rows || render_format_code(spec.format) == COTUNE_RENDER_JSON) return;
  bool password_left_out = false;
  std::fprintf(out, "  (launch arguments of another row: cotune export %s --trial N --store %s)\n",
               cli::shell_word(study).c_str(),
               cli::shell_word(store_location_for_command(store, &password_left_out)).c_str());
}

}  // namespace cotune::core
