// Lowers one configuration into the step trace of the busiest GPU: the last pipeline stage (it
// runs the output layer and the loss), one micro-batch's forward and backward of all its virtual
// chunks, and the once-per-step gradient synchronisation and optimizer.
#ifndef COTUNE_PLUGINS_SPACES_LLM_LOWERING_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_LOWERING_HPP_

#include <cotune/cotune.h>

#include <vector>

#include "config.hpp"
#include "workload.hpp"

namespace cotune_llm {

// The most ops a trace can hold; lower() never allocates beyond it.
constexpr size_t kMaxOps = 160;

// Fills `ops` (whose capacity must be kMaxOps; it is cleared, never reallocated) and `trace`.
void lower_config(const Workload& w, const Config& c, const cotune_hardware& hw, std::vector<cotune_op>& ops,
                  cotune_trace& trace);

// The network level and ranks-per-node of a group of `size` ranks placed `stride` ranks apart
// (Megatron-LM order: tensor, context, data, pipeline; ranks fill nodes in order).
struct GroupPlacement {
  int32_t level;         // the slowest level the group spans
  double ranks_per_node; // ranks of the group inside one node
};
GroupPlacement place_group(double stride, double size, const cotune_hardware& hw);

}  // namespace cotune_llm

#endif
