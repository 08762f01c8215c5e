// What the performance model says of a study's constraints before a configuration runs.
//
// A study's constraints bound measured metrics ("peak_mem_gib" at most 76, "gpus" at most 256). Where
// the performance model estimates the metric, a trial need not be spent to learn that a configuration
// breaks one. ConstraintEstimate takes each such metric as the model's estimate times a correction
// learnt from the measured trials: the median ratio of measured to estimated, so that a machine whose
// allocator keeps 3 % more than the model says moves every estimate by 3 %. A configuration breaks
// a constraint when its corrected estimate lies beyond the bound by more than the trials' scatter
// around that median (1.4826 median absolute deviations of the log ratio): the search scores it as
// it scores an invalid one. With no measurement yet the model's own estimate decides.
#ifndef COTUNE_CORE_MODEL_CONSTRAINT_ESTIMATE_HPP_
#define COTUNE_CORE_MODEL_CONSTRAINT_ESTIMATE_HPP_

#include <cotune/core/abi/components.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace cotune::core {

class ConstraintEstimate {
 public:
  // The constraints of every objective whose metric the performance model estimates (model_metric);
  // none when the space does not lower configurations to step traces. `space` is borrowed.
  ConstraintEstimate(const Space& space, const std::vector<ObjectiveSpec>& objectives);

  bool empty() const { return bounds_.empty(); }
  // The constraints it estimates, as the study file states them ("peak_mem_gib <= 76").
  std::vector<std::string> describe() const;

  // A measured configuration and the metrics its trial reported (a JSON object).
  void learn(const double* config, const nlohmann::json& metrics);
  // Takes what learn() gathered into the corrections. The study calls it when it refits the
  // surrogate, so that what a searcher sees changes only with the surrogate's score version.
  void update();

  // out[i] = 1 where the i-th configuration (valid in the space) is expected to break a constraint.
  void breaks(const double* configs, size_t n, int32_t* out) const;

  // The correction of a metric (the median log ratio of measured to estimated) and the scatter
  // around it, as of the last update(); 0 and 0 before any measurement.
  struct Correction {
    double log_bias = 0;
    double log_scatter = 0;
    size_t runs = 0;
  };
  Correction correction(const std::string& metric) const;

  // At most this many log ratios are kept per metric (a uniform sample of a longer history), so
  // that resuming a study of a million trials does not simulate them all.
  static constexpr size_t kMaxRatios = 1024;

 private:
  struct Bound {
    size_t metric = 0;  // into metrics_
    std::optional<double> max, min;
  };
  struct Metric {
    std::string name;
    std::vector<double> log_ratios;  // measured / estimated, a reservoir sample
    size_t offered = 0;              // ratios offered to the reservoir
    Correction correction;
  };

  const Space& space_;
  std::vector<Metric> metrics_;
  std::vector<Bound> bounds_;
  // The reservoir's draws: a fixed seed, so that a resumed study decides alike.
  // NOLINTNEXTLINE(cert-msc32-c,cert-msc51-cpp)
  std::mt19937_64 rng_{0x636f6e73};
};

}  // namespace cotune::core

#endif  // COTUNE_CORE_MODEL_CONSTRAINT_ESTIMATE_HPP_
