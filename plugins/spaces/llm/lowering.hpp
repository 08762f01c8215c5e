// Lowers one configuration into the step trace of the busiest GPU: the pipeline rank with the most
// work (estimate.hpp's busiest_rank: usually the last, which runs the output layer and the loss),
// one micro-batch's forward and backward of all its virtual chunks, and the once-per-step gradient
// synchronisation and optimizer.
#ifndef COTUNE_PLUGINS_SPACES_LLM_LOWERING_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_LOWERING_HPP_

#include <cotune/cotune.h>

#include <vector>

#include "config.hpp"
#include "trace_builder.hpp"
#include "workload.hpp"

namespace cotune_llm {

// Fills `ops` (whose capacity must be kMaxOps; it is cleared, never reallocated) and `trace`.
// The configuration must be valid (check_config): its layers must split over the pipeline.
void lower_config(const Workload& w, const Config& c, const cotune_hardware& hw, std::vector<cotune_op>& ops,
                  cotune_trace& trace);

}  // namespace cotune_llm

#endif
