// The study's objective applied to measured metrics: the value of each objective, whether the
// constraints hold, comparisons in the objective's direction and the Pareto front of two objectives.
#ifndef COTUNE_CORE_MODEL_OBJECTIVE_HPP_
#define COTUNE_CORE_MODEL_OBJECTIVE_HPP_

#include <cotune/core/store/store_records.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace cotune::core {

// The value of metric `name` in a metrics object; nullopt when absent or not a finite number.
std::optional<double> metric_value(const nlohmann::json& metrics, const std::string& name);
// The same from metrics JSON text; nullopt also when the text is not a JSON object.
std::optional<double> metric_value(const std::string& metrics_json, const std::string& name);

// How one measured trial stands against the study's objectives.
struct Evaluation {
  std::vector<double> values;  // one per objective, when every objective metric was measured
  bool feasible = false;       // every objective measured and every constraint met
  std::string violation;       // why it is not feasible ("" when it is)
};

// Evaluates the metrics of an ok trial. Constraints of every objective apply; a constraint on a
// metric that was not measured is violated (the trial cannot be shown to meet it).
Evaluation evaluate(const std::vector<ObjectiveSpec>& objectives, const nlohmann::json& metrics);

// True when `a` is strictly better than `b` in direction `d`.
bool better(double a, double b, Direction d);

// The recommended one of measured feasible trials, by index: the one the surrogate estimates best
// (`estimated`, NaN where it has no estimate: the measurement stands in), among the trials measured
// within kRecommendNoiseBand of the best measured one; ties go to the better measurement. A
// training step's run-to-run noise is a few % (the search benchmark's sim executor draws 5 %): the
// estimate denoises measurements that close, and two trials measured more than 15 % apart (twice
// the spread of the difference of two such measurements) differ by more than noise. With few
// trials the surrogate is mostly its prior, which must not overrule such a measurement.
// `measured` is not empty and has the size of `estimated`.
inline constexpr double kRecommendNoiseBand = 0.15;
size_t recommended_index(const std::vector<double>& measured, const std::vector<double>& estimated, Direction d);

// Indices of the points no other point dominates (at least as good in every objective and better in
// one), in input order. Each point holds one value per direction.
std::vector<size_t> pareto_front(const std::vector<std::vector<double>>& points,
                                 const std::vector<Direction>& directions);

}  // namespace cotune::core

#endif  // COTUNE_CORE_MODEL_OBJECTIVE_HPP_
