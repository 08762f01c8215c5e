// Closed-form estimates of one configuration: the shape of its step, parameters and memory per
// GPU (Korthikanti et al. activation memory, mixed-precision Adam state) and model FLOPs.
#ifndef COTUNE_PLUGINS_SPACES_LLM_ESTIMATE_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_ESTIMATE_HPP_

#include <cotune/cotune.h>

#include "config.hpp"
#include "workload.hpp"

namespace cotune_llm {

// Bytes per parameter of mixed-precision Adam: bf16 weights, fp32 main gradients, fp32 master
// weights plus the two moments.
constexpr double kWeightBytes = 2, kGradBytes = 4, kOptimizerBytes = 12;
// Workspace that every GPU holds: cuBLAS and NCCL buffers, the CUDA context, allocator slack.
constexpr double kWorkspaceBytes = 1.5 * 1073741824.0;

// The step's shape for one configuration.
struct Shape {
  double micro_batches = 0;     // per step, per pipeline
  double tokens = 0;            // tokens of one micro-batch on one GPU before tensor parallelism
  double layers_per_device = 0;
  double dense_params_per_gpu_layer = 0;   // one layer's non-expert parameters on one GPU
  double expert_params_per_gpu_layer = 0;  // one layer's expert parameters on one GPU
  double embedding_params_per_gpu = 0;     // the input embedding (or the output layer) on one GPU
};

Shape shape_of(const Workload& w, const Config& c);

// Peak memory per GPU with its parts: the larger of the first pipeline stage (embedding, the most
// micro-batches in flight) and the last (output layer and logits).
cotune_memory memory_estimate(const Workload& w, const Config& c);

// Activation bytes one layer keeps for one micro-batch on one GPU (what backward needs).
double layer_activation_bytes(const Workload& w, const Config& c, bool with_scores);

// Useful model FLOPs per GPU per step (forward + backward, no recomputation).
double model_flops_per_gpu(const Workload& w, const Config& c);

}  // namespace cotune_llm

#endif
