// The cotune_search_context the host gives a searcher during propose(): sampling and validity from
// the space, scores from the surrogate, and "seen" from the study's canonical keys (Space::key) of
// everything measured, in flight, or in the workload's history.
#ifndef COTUNE_CORE_RUN_SEARCH_CONTEXT_HPP_
#define COTUNE_CORE_RUN_SEARCH_CONTEXT_HPP_

#include <cotune/cotune.h>
#include <cotune/core/abi/components.hpp>
#include <cotune/core/store/store_records.hpp>
#include <cotune/core/model/constraint_estimate.hpp>
#include <cotune/core/model/oom_bound.hpp>
#include <cotune/core/model/surrogate.hpp>

#include <string>
#include <unordered_set>

namespace cotune::core {

// The searcher's scale of a predicted metric: higher is better whatever the direction, and in log
// space (the metric is positive), so a score difference is a ratio. -inf for a value that is not a
// positive finite number.
double normalised_score(double predicted_value, Direction direction);

class SearchContext {
 public:
  // All references are borrowed and must outlive the context; `seen` may change between proposals.
  // `constraints`, when given, marks the configurations expected to break the study's constraints;
  // `oom`, those expected to run out of memory as measured trials did.
  SearchContext(const Space& space, const Surrogate& surrogate, Direction direction,
                const std::unordered_set<std::string>& seen, const ConstraintEstimate* constraints = nullptr,
                const OomBound* oom = nullptr);
  SearchContext(const SearchContext&) = delete;
  SearchContext& operator=(const SearchContext&) = delete;

  const cotune_search_context& get() const { return context_; }

  // What the callbacks do, callable directly (they throw; the C callbacks turn that into errors).
  // Scores: -inf for invalid configurations and for those expected to break a constraint or to run
  // out of memory (they are not worth a trial); 0 for every other valid one while the surrogate
  // knows nothing (no data, no prior); otherwise normalised_score() of the prediction, with its
  // log uncertainty.
  void score(const double* configs, size_t n, double* out_score, double* out_std) const;
  void seen(const double* configs, size_t n, int32_t* out_seen) const;

 private:
  const Space& space_;
  const Surrogate& surrogate_;
  Direction direction_;
  const std::unordered_set<std::string>& seen_;
  const ConstraintEstimate* constraints_;
  const OomBound* oom_;
  cotune_search_context context_{};
};

}  // namespace cotune::core

#endif  // COTUNE_CORE_RUN_SEARCH_CONTEXT_HPP_
