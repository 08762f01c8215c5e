// What trials that ran out of memory say of the configurations not yet tried.
//
// A space that lowers configurations estimates each one's peak memory per GPU, and refuses those
// whose estimate exceeds the GPU's. A machine can have less room than that estimate assumes (an
// allocator that fragments, a framework's own buffers, a newer library's workspace): a
// configuration the space accepts then runs out of memory, and every configuration that needs as
// much is as likely to. OomBound keeps, from the measured trials, the estimated share of the GPU's
// memory (estimate / capacity) of each trial that ran out of memory and the largest share among
// those that ran. Its bound is the smallest share that ran out of memory above every share that
// ran: a configuration estimated at that share or more is expected to run out too, and the search
// scores it as it scores an invalid one. An out-of-memory trial at or below a share that ran
// contradicts the estimate's order and bounds nothing. Without such a trial (or for a space that
// does not lower) it bounds nothing.
#ifndef COTUNE_CORE_MODEL_OOM_BOUND_HPP_
#define COTUNE_CORE_MODEL_OOM_BOUND_HPP_

#include <cotune/core/abi/components.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace cotune::core {

class OomBound {
 public:
  // `space` is borrowed; a space that does not lower configurations gives a bound that never binds.
  explicit OomBound(const Space& space);

  // A measured configuration: it ran, or ran out of memory. Each is lowered once. A study need not
  // tell it of the runs before the first out-of-memory trial until that trial: nothing binds before.
  void learn(const double* config, bool out_of_memory);
  // Whether any trial that ran out of memory was learned (with a share, or not).
  bool learned_oom() const { return learned_oom_; }
  // Takes what learn() gathered into the bound; true when the bound changed. The study calls it
  // when it refits the surrogate, so that what a searcher sees changes only with the score version.
  bool update();

  // The share of a GPU's memory (estimate / capacity) from which configurations are expected to
  // run out of memory, as of the last update(); nullopt while nothing bounds.
  std::optional<double> bound() const { return bound_; }
  // out[i] = 1 where the i-th configuration (valid in the space) is expected to run out of memory.
  void breaks(const double* configs, size_t n, int32_t* out) const;

  // The estimated share of its GPU's memory of one configuration; nullopt when the space does not
  // lower it or gives no memory or capacity.
  std::optional<double> share(const double* config) const;

 private:
  const Space& space_;
  bool lowers_ = false;
  bool learned_oom_ = false;
  double largest_ran_ = 0;           // the largest share among the trials that ran
  std::vector<double> oom_shares_;   // the shares of the trials that ran out of memory
  std::optional<double> bound_;      // as of the last update()
};

}  // namespace cotune::core

#endif  // COTUNE_CORE_MODEL_OOM_BOUND_HPP_
