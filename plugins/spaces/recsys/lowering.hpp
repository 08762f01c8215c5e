// Lowers one planned configuration into the step trace of the GPU the step waits for: the one with
// the most embedding work. One micro-batch forward (sparse input all-to-all, lookups, the reduce of
// row-wise partial sums, the pooled-embedding all-to-all, bottom MLP, interaction, top MLP) and
// backward (the reverse, the embedding gradients and the fused row-wise optimizer), then once per
// step the dense gradient all-reduce (DDP) and the dense optimizer.
#ifndef COTUNE_PLUGINS_SPACES_RECSYS_LOWERING_HPP_
#define COTUNE_PLUGINS_SPACES_RECSYS_LOWERING_HPP_

#include <cotune/cotune.h>

#include <vector>

#include "config.hpp"
#include "planner.hpp"
#include "workload.hpp"

namespace cotune_recsys {

// Fills `ops` (cleared first) and `trace` (which points into ops). `plan` must be ok.
void lower_config(const Workload& w, const Config& c, const cotune_hardware& hw, const Plan& plan,
                  std::vector<cotune_op>& ops, cotune_trace& trace);

// Useful dense FLOPs of one sample, forward and backward (3 x forward), for MFU.
double dense_flops_per_sample(const Workload& w);

// Micro-batches per step: global_batch / (batch_per_gpu * gpus).
double micro_batches(const Workload& w, const Config& c);

}  // namespace cotune_recsys

#endif
