// A DeepSpeed ds_config (docs/exports.md, deepspeed_rules.md): batch sizes that satisfy DeepSpeed's
// consistency check, the ZeRO stage, precision, and the one model-parallel dimension a ds_config can
// carry (AutoTP or Ulysses); under "cotune" what the script must do itself (the pipeline stages of
// PipelineModule, activation checkpointing).
#include <nlohmann/json.hpp>

#include <cstdint>

#include "render.hpp"

namespace cotune_llm {

std::string render_deepspeed(const Workload& w, const Config& c, const Target& t, const cotune_hardware& hw) {
  (void)t, (void)hw;
  auto whole = [](double v) { return static_cast<int64_t>(v); };
  nlohmann::ordered_json j;
  // train_batch_size = micro x accumulation x dp, where dp = gpus / (tp pp cp): model-parallel ranks
  // never multiply the batch. With the pipeline engine the accumulation steps are its micro-batches.
  j["train_batch_size"] = whole(w.training.global_batch);
  j["train_micro_batch_size_per_gpu"] = whole(c.micro_batch);
  j["gradient_accumulation_steps"] = whole(w.training.global_batch / (c.micro_batch * c.dp));
  j["gradient_clipping"] = 1.0;
  if (w.training.dtype == COTUNE_DTYPE_FP16) j["fp16"] = {{"enabled", true}};
  else j["bf16"] = {{"enabled", true}};
  if (w.training.grad_reduce == GradReduce::kBf16) {  // reduced and accumulated in bf16, not fp32
    j["communication_data_type"] = "bf16";
    j["data_types"] = {{"grad_accum_dtype", "bf16"}};
  }
  nlohmann::ordered_json zero;
  zero["stage"] = c.zero;
  zero["overlap_comm"] = w.training.overlap_grad_reduce;
  if (c.zero >= 2) zero["reduce_scatter"] = true;
  j["zero_optimization"] = zero;
  if (c.tp > 1) j["tensor_parallel"] = {{"autotp_size", whole(c.tp)}};
  if (c.cp > 1) j["sequence_parallel_size"] = whole(c.cp);
  // What a ds_config cannot carry, for the training script (DeepSpeed ignores unknown top-level keys,
  // deepspeed_rules.md): the pipeline is PipelineModule(num_stages=pp) in code, recomputation is the
  // model's own checkpointing of each block (deepspeed.checkpointing.checkpoint).
  nlohmann::ordered_json ours;
  ours["pipeline_stages"] = whole(c.pp);
  ours["activation_checkpointing"] = c.recompute == kRecomputeFull ? "every transformer block"
                                     : c.recompute == kRecomputeSelective ? "the attention core of every block"
                                                                          : "none";
  ours["data_parallel_size"] = whole(c.dp);
  j["cotune"] = ours;
  return j.dump(2);
}

}  // namespace cotune_llm
