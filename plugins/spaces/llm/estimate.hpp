// Closed-form estimates of one configuration: the shape of its step, parameters and memory per
// GPU (Korthikanti et al. activation memory, mixed-precision Adam state, ZeRO stages as Megatron-LM
// and DeepSpeed shard them) and model FLOPs.
#ifndef COTUNE_PLUGINS_SPACES_LLM_ESTIMATE_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_ESTIMATE_HPP_

#include <cotune/cotune.h>

#include <string>
#include <vector>

#include "config.hpp"
#include "pipeline.hpp"
#include "workload.hpp"

namespace cotune_llm {

// Bytes per parameter of mixed-precision Adam: bf16 weights, fp32 main gradients (bf16 with
// training.grad_reduce bf16: grad_bytes), fp32 master weights plus the two moments.
constexpr double kWeightBytes = 2, kGradBytes = 4, kOptimizerBytes = 12;
inline double grad_bytes(const Training& t) { return t.grad_reduce == GradReduce::kBf16 ? 2 : kGradBytes; }
// Workspace that every GPU holds: cuBLAS and NCCL buffers, the CUDA context, allocator slack.
constexpr double kWorkspaceBytes = 1.5 * 1073741824.0;

// The step's shape for one configuration (whose pipeline split is valid: check_config first).
struct Shape {
  double micro_batches = 0;  // per step, per pipeline
  double tokens = 0;         // tokens of one micro-batch on one GPU before tensor parallelism
  PipelineSplit split;
  // One layer's parameters on one GPU: attention and norms, a dense MLP, the tensor-parallel part
  // of a MoE layer (router and shared experts), and the routed experts this GPU holds.
  double attention_params = 0;
  double dense_mlp_params = 0;
  double moe_dense_params = 0;
  double expert_params = 0;
  double embedding_params = 0;  // the input embedding (or the output layer) on one GPU
  double mtp_extra_params = 0;  // an MTP layer's projection and norms on one GPU
  // Ranks that hold the same weights: dense parameters are replicated over dp*cp, experts over
  // the expert-data-parallel ranks tp*cp*dp / (ep*etp).
  double dense_replicas = 1;
  double expert_replicas = 1;
  std::vector<RankLayers> ranks;  // what each pipeline rank holds
};

// Fills `out`; returns the reason when the layers do not split over the pipeline.
std::string shape_of(const Workload& w, const Config& c, Shape* out);

// Parameters of one pipeline rank on one GPU, dense and expert.
struct RankParams {
  double dense = 0, expert = 0;
};
RankParams rank_params(const Workload& w, const Shape& s, const RankLayers& r);

// The pipeline rank that takes longest per micro-batch (its layers' FLOPs, the output layer and
// MTP on the last): the one lower() times.
double busiest_rank(const Workload& w, const Config& c, const Shape& s);

// Peak memory per GPU with its parts: the largest over the pipeline ranks (parameters, the
// micro-batches each holds in flight under 1F1B or interleaving, the logits on the last).
cotune_memory memory_estimate(const Workload& w, const Config& c, const Shape& s);

// Activation bytes that one attention block, one dense MLP and one MoE MLP keep for one
// micro-batch on one GPU (what backward needs), under the configuration's recomputation.
struct LayerActivations {
  double attention = 0, dense_mlp = 0, moe_mlp = 0;
};
LayerActivations layer_activations(const Workload& w, const Config& c);

// Tokens of one micro-batch that a MoE layer routes on one GPU (each to top_k experts), and the
// tokens each of this GPU's experts computes (the expert-tensor-parallel group's, padded to the
// capacity when there is one).
double moe_tokens_in(const Workload& w, const Config& c);
double tokens_per_local_expert(const Workload& w, const Config& c);

// Useful model FLOPs per GPU per step (forward + backward, no recomputation, causal attention).
double model_flops_per_gpu(const Workload& w, const Config& c);

}  // namespace cotune_llm

#endif
