#include <cotune/core/model/objective.hpp>

#include <cmath>
#include <sstream>

namespace cotune::core {

std::optional<double> metric_value(const nlohmann::json& metrics, const std::string& name) {
  if (!metrics.is_object()) return std::nullopt;
  auto it = metrics.find(name);
  if (it == metrics.end() || !it->is_number()) return std::nullopt;
  double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<double> metric_value(const std::string& metrics_json, const std::string& name) {
  nlohmann::json metrics = nlohmann::json::parse(metrics_json, nullptr, /*allow_exceptions=*/false);
  return metric_value(metrics, name);
}

namespace {
std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// Why `name` has no value in `metrics`: absent, or present as something other than a finite number.
std::string unreported(const nlohmann::json& metrics, const std::string& name) {
  auto it = metrics.is_object() ? metrics.find(name) : metrics.end();
  if (!metrics.is_object() || it == metrics.end()) {
    // What was reported instead: a metric under another name ("step_s") is the likely cause.
    std::string names;
    if (metrics.is_object())
      for (auto m = metrics.begin(); m != metrics.end() && names.size() < 200; ++m)
        names += (names.empty() ? "" : ", ") + m.key();
    return "was not reported" + (names.empty() ? std::string(" (the trial reported no metric)")
                                               : " (the trial reported: " + names + ")");
  }
  return "was reported as " + it->dump().substr(0, 80) + ", not a finite number";
}
}  // namespace

Evaluation evaluate(const std::vector<ObjectiveSpec>& objectives, const nlohmann::json& metrics) {
  Evaluation e;
  for (const ObjectiveSpec& o : objectives) {
    auto v = metric_value(metrics, o.metric);
    if (!v) {
      e.values.clear();
      e.violation = "the objective metric '" + o.metric + "' " + unreported(metrics, o.metric);
      return e;
    }
    e.values.push_back(*v);
  }
  for (const ObjectiveSpec& o : objectives)
    for (const Constraint& k : o.constraints) {
      auto v = metric_value(metrics, k.metric);
      if (!v) {
        e.violation = "constraint on '" + k.metric + "': the metric " + unreported(metrics, k.metric);
        return e;
      }
      if (k.max && *v > *k.max) {
        e.violation = k.metric + " = " + number(*v) + " exceeds the maximum " + number(*k.max);
        return e;
      }
      if (k.min && *v < *k.min) {
        e.violation = k.metric + " = " + number(*v) + " is below the minimum " + number(*k.min);
        return e;
      }
    }
  e.feasible = true;
  return e;
}

bool better(double a, double b, Direction d) { return d == Direction::kMaximize ? a > b : a < b; }

size_t recommended_index(const std::vector<double>& measured, const std::vector<double>& estimated, Direction d) {
  const size_t n = measured.size();
  size_t best_measured = 0;
  for (size_t k = 1; k < n; ++k)
    if (better(measured[k], measured[best_measured], d)) best_measured = k;
  // How far a measurement falls short of the best, as a fraction of it (none when the best is not
  // positive: no fraction says it).
  const double top = measured[best_measured];
  auto within_noise = [&](size_t k) {
    if (!(top > 0)) return true;
    const double shortfall = d == Direction::kMaximize ? (top - measured[k]) / top : (measured[k] - top) / top;
    return shortfall <= kRecommendNoiseBand;
  };
  auto key = [&](size_t k) { return std::isfinite(estimated[k]) ? estimated[k] : measured[k]; };
  size_t best = best_measured;
  for (size_t k = 0; k < n; ++k) {
    if (k == best || !within_noise(k)) continue;
    const double a = key(k), b = key(best);
    const bool tie = std::fabs(a - b) <= 1e-12 * std::fabs(b);
    if (tie ? better(measured[k], measured[best], d) : better(a, b, d)) best = k;
  }
  return best;
}

std::vector<size_t> pareto_front(const std::vector<std::vector<double>>& points,
                                 const std::vector<Direction>& directions) {
  auto dominates = [&](const std::vector<double>& a, const std::vector<double>& b) {
    bool strictly = false;
    for (size_t k = 0; k < directions.size(); ++k) {
      if (better(b[k], a[k], directions[k])) return false;
      if (better(a[k], b[k], directions[k])) strictly = true;
    }
    return strictly;
  };
  std::vector<size_t> front;
  for (size_t i = 0; i < points.size(); ++i) {
    bool dominated = false;
    for (size_t j = 0; j < points.size() && !dominated; ++j) dominated = j != i && dominates(points[j], points[i]);
    if (!dominated) front.push_back(i);
  }
  return front;
}

}  // namespace cotune::core
