// The surrogate of a study: the predictor plugin, optionally on top of the analytic prior.
//
// The host owns the target transform. Every target is the log of a positive metric, so relative
// errors count the same at every scale, and the predictor is created with {"log": false}:
//  - without the prior, the predictor learns log(metric) from the space's features;
//  - with the prior (issue 5), the space lowers each configuration to a step trace, the performance
//    model estimates the same metric, and the predictor learns the residual
//    r = log(measured) - log(estimated) from the features plus log(estimated) as one more feature.
//    The prediction is estimated x exp(predicted r): with no measurement it is the model's estimate,
//    and every measurement corrects the model where it is biased.
//  - with the roofline prior, the estimate comes from a CostModel over the trace's roofline terms
//    (perf::roofline_terms), its rates fitted on the same measurements at every fit; the predictor
//    learns the residual over it as above. No catalogue efficiency enters: a space whose traces
//    describe the work is enough, and a dozen measurements rank layouts the way time is spent.
// Targets that are all equal (one measurement, or a flat metric) are kept as a constant instead of
// fitting a regression to nothing.
#ifndef COTUNE_CORE_MODEL_SURROGATE_HPP_
#define COTUNE_CORE_MODEL_SURROGATE_HPP_

#include <cotune/cotune.h>
#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/abi/components.hpp>
#include <cotune/core/model/cost_model.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cotune::core {

// The performance model's value of a metric for a simulated trace: step_time_s, tokens_per_s,
// tflops_per_gpu, mfu, cost_per_mtokens, peak_memory_bytes, peak_mem_gib (the sim executor's name),
// gpus. nullopt for a metric the model does not produce.
std::optional<double> model_metric(const cotune_sim_result& result, const cotune_trace& trace,
                                   const std::string& metric);
// Whether the performance model produces `metric` (model_metric knows it).
bool model_estimates(const std::string& metric);

// The predictor options the surrogate needs on top of the study's ({"log": false}); a UserError when
// the study sets "log" itself.
std::string surrogate_predictor_options(const std::string& study_options_json, const std::string& where);

// The roofline terms (perf::kRooflineTerms) of one configuration of `space` into `out`; false when
// it cannot be lowered (an invalid configuration may not).
bool roofline_terms_of(const Space& space, const double* config, double* out);

// Why `prior` cannot be used with `space` for the objective `metric` whatever the trials ("" when it
// may be): a space that does not lower configurations has no estimate, and the analytic prior has
// none of a metric the performance model does not produce (model_metric). An empty `metric` is not
// checked. Used by `show` and the report.
std::string prior_unusable_with(Prior prior, const Space& space, const std::string& metric = "");

// The study's prior as `show` and the report print it: "analytic", or "analytic, not used: why".
std::string prior_text(Prior prior, const Space* space, const std::string& metric = "");

class Surrogate {
 public:
  // `prior`: the analytic prior is used when the space lowers and the model knows `metric`; the
  // roofline prior when the space lowers (prior_note() says why not otherwise). `probe`: one valid
  // configuration on which the model is tried once (an estimate that is not positive, a price-less
  // cost for instance, turns the analytic prior off; a trace that cannot be lowered, either).
  Surrogate(const Space& space, Predictor& predictor, std::string metric, Prior prior,
            const double* probe = nullptr);

  // The prior in use: the one asked for, or none when it could not be (see prior_note()).
  Prior prior() const { return prior_kind_; }
  bool uses_prior() const { return prior_kind_ != Prior::kNone; }
  // Changes with every fit(): never the same for two models in one process, never 0. Searchers
  // keep scores while it stays the same (cotune_search_context.score_version).
  uint64_t version() const { return version_; }
  const std::string& prior_note() const { return prior_note_; }
  const std::string& metric() const { return metric_; }
  size_t fitted_rows() const { return fitted_rows_; }
  // True when predict() says something: fitted, or the analytic prior alone (the roofline prior
  // has no rates before two measurements).
  bool informed() const;

  // At most this many rows are fitted on: a larger history is sampled (seeded, uniform), so a
  // refit on a study of a million trials stays bounded in time and memory.
  static constexpr size_t kMaxFitRows = 20000;

  // Fits on n configurations (row-major) and their measured metric values; values that are not
  // positive and finite are skipped (with a warning). n may be 0 (forgets any fit).
  void fit(const double* configs, size_t n, const double* values);

  // Predicted metric values into out_value (NaN where nothing is known: no data and no prior, or a
  // configuration the model cannot estimate) and, when out_log_std is not null, the uncertainty of
  // log(value) (0 when unknown).
  void predict(const double* configs, size_t n, double* out_value, double* out_log_std) const;

  // The prior's estimate of the metric for one configuration; nullopt without a prior, when the
  // configuration cannot be lowered, or before the roofline prior's first fit.
  std::optional<double> estimate(const double* config) const;

  // The roofline prior's cost model (nullptr with another prior).
  const CostModel* cost_model() const { return cost_ ? &*cost_ : nullptr; }

  // With the analytic prior: at every fit, refit the performance model's cheap constants (GEMM
  // efficiency and its size curve, grouped GEMMs, attention and network efficiency, the host's issue time:
  // kInStudyConstants) on the measured configurations, per GPU type, from the second one on (the
  // most probable constants given the trials: CalibrationOptions::underdetermined), so that a few
  // real trials correct a miscalibrated model for the rest of the search (calibration.hpp). Off
  // until turned on; a study turns it on unless its predictor says "calibrate": false.
  void calibrate_prior(bool on) { calibrate_ = on; }
  bool calibrates_prior() const { return calibrate_ && prior_kind_ == Prior::kAnalytic; }
  // The constants the last fit() found, per GPU type (GPU-description fields; empty when none).
  const std::map<std::string, nlohmann::json>& prior_constants() const { return constants_json_; }
  // The measured configurations as calibration runs (the model's step time scaled by how far the
  // metric is off), per GPU type: those that lower and that the model can time, at most `limit` of
  // them (a seeded sample; *sampled says whether one was drawn). Empty for a metric that does not
  // follow the step time (memory, GPUs).
  std::map<std::string, std::vector<perf::CalibrationRun>> calibration_runs(const double* configs, size_t n,
                                                                            const double* values,
                                                                            size_t limit = kMaxCalibrationRows,
                                                                            bool* sampled = nullptr) const;
  static const std::vector<std::string> kInStudyConstants;
  // At most this many measured configurations are calibrated on (a seeded sample beyond).
  static constexpr size_t kMaxCalibrationRows = 256;

  // The fit as one blob, for other processes on the same study (workers) to take instead of fitting
  // again: the predictor's own state, the prior's in-study constants, the constant target, and
  // `trained_on` (the training rows given to fit()). Empty when there is nothing to take: nothing
  // fitted, a predictor that cannot save, or the roofline prior (its rates are not saved).
  std::string save_state(size_t trained_on) const;
  // The training rows a blob of save_state() was fitted on; nullopt when this surrogate cannot take
  // it (another format, predictor or feature width).
  std::optional<size_t> state_rows(std::string_view blob) const;
  // Takes the fit a blob of save_state() holds, as fit() would have left it; false (and nothing
  // changed) when state_rows() says it cannot.
  bool load_state(std::string_view blob);

 private:
  // The roofline terms of n configurations (rows of perf::kRooflineTerms), and which lowered.
  struct RooflineRows {
    std::vector<double> terms;
    std::vector<char> lowered;
  };
  RooflineRows roofline_rows(const double* configs, size_t n) const;

  // Features of n configurations, with log(estimate) appended under the prior; rows the prior
  // cannot estimate are marked false in `ok`. `roofline`: the rows' terms when already computed
  // (the roofline prior; computed here otherwise).
  std::vector<double> features(const double* configs, size_t n, std::vector<double>* log_estimates,
                               std::vector<char>* ok, const RooflineRows* roofline = nullptr) const;

  const Space& space_;
  Predictor& predictor_;
  std::string metric_;
  Prior prior_kind_ = Prior::kNone;  // any but none: the predictor sees log(estimate) as one more feature
  std::string prior_note_;
  size_t fitted_rows_ = 0;
  bool fitted_predictor_ = false;  // false with a constant target (or no data)
  double constant_ = 0;            // the target when it is constant
  size_t width_ = 0;               // feature columns given to the predictor
  bool capped_noted_ = false;      // the sampling of a large history was logged once
  uint64_t version_ = 0;
  std::optional<CostModel> cost_;  // the roofline prior's
  // In-study calibration of the analytic prior.
  void refit_constants(const std::vector<double>& configs, const std::vector<double>& values);
  bool calibrate_ = false;
  std::map<std::string, perf::ConstantSet> constants_;
  std::map<std::string, nlohmann::json> constants_json_;
};

}  // namespace cotune::core

#endif  // COTUNE_CORE_MODEL_SURROGATE_HPP_
