// How well a predictor plugin ranks measured configurations it has not seen: repeated random
// train/test splits, a fresh predictor fitted on each training part, figures on the held-out part.
// The engine of `cotune predictor eval` and of the predictor quality benchmark.
//
// Samples may come from different workloads: each carries its own space, which gives its features
// and (with a prior) lowers it to a trace. Targets are handled as the study surrogate does
// (surrogate.hpp): log(measured) without a prior; with one the residual log(measured) -
// log(estimated), with log(estimated) as one more feature. The analytic estimate is the performance
// model's; the roofline estimate is a CostModel over the trace's roofline terms, fitted on each
// repeat's training rows only (the held-out rows never inform it).
#ifndef COTUNE_CORE_HISTORY_PREDICTOR_EVAL_HPP_
#define COTUNE_CORE_HISTORY_PREDICTOR_EVAL_HPP_

#include <cotune/core/abi/components.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cotune::core {

struct EvalSample {
  const Space* space = nullptr;  // must outlive the evaluation
  std::vector<double> config;    // in the space's parameters
  double measured = 0;           // the target metric (> 0)
  std::string group;             // rows with equal groups are ranked among themselves ("" : none)
};

struct EvalOptions {
  std::string predictor = "krr";
  std::string predictor_options = "{}";  // the plugin's options; "log" and "seed" are set here
  Prior prior = Prior::kAnalytic;         // the prior to learn over (analytic: where the model estimates the target)
  std::string target;                    // metric name (for the prior's estimate)
  bool minimize = false;                 // which way is best (for top-1 / top-3 within groups)
  double train_frac = 0.2;               // fraction of the rows to train on...
  size_t train_rows = 0;                 // ...or this many rows when > 0
  size_t repeats = 10;
  std::uint64_t seed = 1;
  bool grouped = false;                  // compute the within-group figures
};

// Mean and standard deviation over the repeats of one figure (NaN when no repeat had a value).
struct EvalFigure {
  double mean = 0, std = 0;
  size_t count = 0;  // repeats with a value
};

struct EvalResult {
  size_t rows = 0, train_rows = 0, test_rows = 0, repeats = 0;
  Prior prior = Prior::kNone;  // the prior used
  std::string prior_note;   // why not, when it was asked for and not used
  size_t dropped = 0;       // samples the model could not estimate (left out under the prior)
  EvalFigure kendall_tau, spearman_rho, mape, r_squared;
  size_t groups = 0;        // groups with at least two held-out rows (mean over repeats)
  EvalFigure group_tau, group_top1, group_top3;
};

// Throws UserError when the options cannot work on these samples (too few rows for the split, no
// rows, a fraction outside (0, 1)); PluginError from the predictor is passed on.
EvalResult evaluate_predictor(const Registry& registry, const std::vector<EvalSample>& samples,
                              const EvalOptions& options);

}  // namespace cotune::core

#endif  // COTUNE_CORE_HISTORY_PREDICTOR_EVAL_HPP_
