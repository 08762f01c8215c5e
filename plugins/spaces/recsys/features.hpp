// Derived features of a planned configuration for the predictor: per-GPU load statistics,
// all-to-all volume per network level, memory headroom and imbalance.
#ifndef COTUNE_PLUGINS_SPACES_RECSYS_FEATURES_HPP_
#define COTUNE_PLUGINS_SPACES_RECSYS_FEATURES_HPP_

#include <cotune/cotune.h>

#include <cstddef>

#include "config.hpp"
#include "planner.hpp"
#include "workload.hpp"

namespace cotune_recsys {

extern const char* const kDerivedFeatures[];
extern const size_t kNumDerived;

// Writes kNumDerived values into f from a valid plan and its trace.
void derived_features(const Workload& w, const Config& c, const Plan& plan, const cotune_trace& trace, double* f);

}  // namespace cotune_recsys

#endif
