// The recommended configuration at the end of a run (RecommendedConfig in study_runner.hpp): among
// the measured feasible trials of the study, the one the surrogate predicts best (recommended_index). And what the
// trials say of the machine (MachineFit).
#include <cotune/core/abi/log.hpp>
#include <cotune/core/model/objective.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/calibration.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "run/study_run.hpp"

namespace cotune::core {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

std::optional<RecommendedConfig> StudyRun::recommend() {
  if (spec_.objectives.size() != 1) return std::nullopt;  // two objectives: the Pareto front is the answer
  const size_t p = space_->num_params();
  std::vector<size_t> rows;
  std::vector<double> configs;
  for (size_t i = 0; i < train_origins_.size(); ++i) {
    if (!train_origins_[i].feasible) continue;
    rows.push_back(i);
    configs.insert(configs.end(), train_configs_.begin() + i * p, train_configs_.begin() + (i + 1) * p);
  }
  if (rows.empty()) return std::nullopt;

  const size_t n = rows.size();
  std::vector<double> predicted(n, kNaN);
  try {
    refit(/*every_row=*/true);
    surrogate_->predict(configs.data(), n, predicted.data(), nullptr);
  } catch (const std::exception& e) {
    // The study itself is done; without a fit the recommendation falls back to the measurements.
    log(COTUNE_LOG_WARN, "study", std::string("the predictor cannot rank the measured configurations: ") + e.what());
    std::fill(predicted.begin(), predicted.end(), kNaN);
  }

  // Rows without an estimate (no fit yet, or the prior cannot lower the configuration) are ranked by
  // their measurement.
  std::vector<double> measured(n);
  for (size_t k = 0; k < n; ++k) measured[k] = train_origins_[rows[k]].objective;
  const size_t best = recommended_index(measured, predicted, spec_.objectives.front().direction);

  const TrainingRowOrigin& origin = train_origins_[rows[best]];
  RecommendedConfig r;
  r.trial_id = origin.trial_id;
  r.seq = origin.seq;
  r.config_json = space_->render(configs.data() + best * p, COTUNE_RENDER_JSON);
  r.measured = origin.objective;
  if (std::isfinite(predicted[best])) r.predicted = predicted[best];
  return r;
}

std::map<std::string, MachineFit> StudyRun::machine_fit() const {
  std::map<std::string, MachineFit> out;
  try {
    // A cross-validated fit costs a fit per fold and count: on a sample of 64 runs it takes under a
    // second (3.5 s on 256), and determines the few constants a summary reports as well.
    constexpr size_t kMachineFitRuns = 64;
    bool sampled = false;
    for (const auto& [gpu, runs] : surrogate_->calibration_runs(train_configs_.data(), train_values_.size(),
                                                                train_values_.data(), kMachineFitRuns, &sampled)) {
      MachineFit& m = out[gpu];
      m.trials = runs.size();
      m.sampled = sampled;
      try {
        const perf::CalibrationResult fit = perf::calibrate(runs, perf::CalibrationOptions{});
        m.mape_before = fit.before.mape;
        m.held_out_mape = fit.folds > 0 ? fit.held_out.mape : kNaN;
        for (const perf::ConstantFit& c : fit.fitted) m.constants.push_back({c.name, c.before, c.value, c.low, c.high, c.at_limit});
      } catch (const UserError& e) {
        // too few or too alike to determine a constant: the summary says so
        const std::string prefix = "calibrate: ";
        m.refused = e.what();
        if (m.refused.rfind(prefix, 0) == 0) m.refused.erase(0, prefix.size());
      }
    }
  } catch (const std::exception& e) {
    // Only a report: the study's result stands without it.
    log(COTUNE_LOG_WARN, "study", std::string("no fit of the machine's constants at the end: ") + e.what());
    out.clear();
  }
  return out;
}

}  // namespace cotune::core
