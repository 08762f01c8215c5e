// Random search's expected best-so-far: what a searcher that draws configurations uniformly without
// replacement would have found after k trials, computed exactly over a space enumerated with the
// performance model (no sampling noise).
#ifndef COTUNE_CORE_REPORT_RANDOM_BASELINE_HPP_
#define COTUNE_CORE_REPORT_RANDOM_BASELINE_HPP_

#include <cotune/core/store/store_records.hpp>

#include <cstddef>
#include <optional>
#include <vector>

namespace cotune::core::report {

// `values`: the objective of every configuration of the space, nullopt for the infeasible ones (they
// never become "best"). For each k in `ks` (1..values.size()), the expected best value among k draws
// without replacement, given that at least one draw was feasible; NaN when no configuration is
// feasible or k is out of range.
std::vector<double> expected_best_of_random(const std::vector<std::optional<double>>& values, Direction direction,
                                            const std::vector<size_t>& ks);

}  // namespace cotune::core::report

#endif  // COTUNE_CORE_REPORT_RANDOM_BASELINE_HPP_
