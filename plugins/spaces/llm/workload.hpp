// The LLM workload: model, training setup and cluster, parsed from the study's workload JSON
// (schema in docs/workloads.md).
#ifndef COTUNE_PLUGINS_SPACES_LLM_WORKLOAD_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_WORKLOAD_HPP_

#include <cotune/cotune.h>

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "model.hpp"

namespace cotune_llm {

enum class Attention { kFlash, kUnfused };

// How the framework runs a layer's elementwise work and attention:
//  - kFused: Megatron-LM / NeMo with Transformer Engine: norms, rotary embedding, activations and
//    casts fused into one kernel each, cuDNN fused attention;
//  - kCompiled: a PyTorch-native trainer under torch.compile (TorchTitan with compile): the same
//    elementwise fusion, attention through PyTorch's SDPA (FlashAttention-2 kernels);
//  - kEager: a PyTorch-native trainer without compile (TorchTitan, llm-foundry, plain FSDP): every
//    elementwise op its own kernel (an fp32 RMSNorm is six, rotary embedding four or five, SwiGLU two;
//    about three kernels and three times the HBM traffic per fused one), attention through SDPA.
enum class Kernels { kFused, kCompiled, kEager };

// How a MoE layer's tokens reach their experts on other GPUs:
//  - kAllToAll: one copy per routed expert, in an NCCL all-to-all (Megatron-LM's alltoall dispatcher,
//    TorchTitan's standard backend): a token routed to three experts of one GPU is sent three times;
//  - kFlex: one copy per destination GPU, and across nodes one per destination node, forwarded
//    over NVLink there (Megatron-LM's flex dispatcher with DeepEP or HybridEP, TorchTitan's deepep).
enum class MoeDispatcher { kAllToAll, kFlex };

// The dtype of the gradient buffer that backward accumulates into and the data-parallel reduction
// sends: fp32 (Megatron-LM's default with bf16, --accumulate-allreduce-grads-in-fp32; DeepSpeed's;
// TorchTitan's mixed_precision_reduce) or bf16 (--grad-reduce-in-bf16; Megatron-Bridge's perf
// recipes, grad_reduce_in_fp32 = False): half the buffer and half the bytes reduced.
enum class GradReduce { kFp32, kBf16 };
// How FP8 GEMM operands are scaled (Megatron-LM's --fp8-recipe). "tensorwise": one scale per tensor
// (current scaling), the fastest FP8 GEMMs; "mxfp8": a scale per 32 elements, on the block-scaled
// tensor cores of Blackwell; "blockwise": DeepSeek-V3's 128 x 128 weight and 1 x 128 activation
// blocks. kAuto: MXFP8 where the tensor cores scale blocks, per-tensor before (fp8_recipe_on).
enum class Fp8Recipe { kAuto, kTensorwise, kMxfp8, kBlockwise };

struct Training {
  double global_batch = 0;        // sequences per step
  int32_t dtype = COTUNE_DTYPE_BF16;  // of the GEMMs (bf16, fp16, fp8 or fp4)
  Fp8Recipe fp8_recipe = Fp8Recipe::kAuto;  // with dtype fp8
  Attention attention = Attention::kFlash;
  Kernels kernels = Kernels::kFused;
  bool dropout = false;             // dropout layers (extra elementwise work and masks)
  bool overlap_grad_reduce = true;  // data-parallel gradient reduction overlaps the last backward
  // Expert-parallel all-to-alls run beside another micro-batch's compute (Megatron-LM's
  // --overlap-moe-expert-parallel-comm: one micro-batch's forward merged with another's backward).
  bool overlap_moe_comm = false;
  // Tensor-parallel collectives overlap the GEMMs they feed or follow (Megatron-LM's
  // --tp-comm-overlap: Transformer Engine's userbuffers; TorchTitan's async tensor parallelism).
  // Needs sequence parallelism: without it, it does nothing (as in Megatron-Bridge).
  bool tp_comm_overlap = false;
  // The loss as one fused kernel (Megatron-LM's --cross-entropy-loss-fusion) instead of Megatron-Core's
  // fp32 passes over the logits; torch.compile fuses it too (kernels compiled).
  bool cross_entropy_fusion = false;
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  GradReduce grad_reduce = GradReduce::kFp32;
  bool lora = false;  // parameter-efficient fine-tuning: the base weights are frozen (no weight
                      // gradients, gradient buffers, optimizer state or gradient sync for them)
};

// Its implicit move constructor cannot throw (nlohmann::json's is noexcept); clang-tidy 14 follows
// calls into noexcept functions and reports an exception escaping it all the same.
struct Workload {  // NOLINT(bugprone-exception-escape): see above
  Model model;
  Training training;
  nlohmann::json cluster;  // the "cluster" object, resolved by the host
};

// Throws std::invalid_argument naming the field (a JSON pointer) and what was expected.
Workload parse_workload(const nlohmann::json& j);

const char* dtype_name(int32_t dtype);

// The hardware's dense peak FLOP/s for a GEMM dtype (fp4 from the ABI 1.2 field; 0 when the GPU, or
// a host older than 1.2, has none).
double dtype_peak(const cotune_hardware& hw, int32_t dtype);

// Blackwell and later (an FP4 peak): tensor cores that scale blocks of MXFP8 and NVFP4 themselves.
bool block_scaled_tensor_cores(const cotune_hardware& hw);
// The FP8 recipe that runs on `hw`: the workload's, or kAuto's choice there.
Fp8Recipe fp8_recipe_on(const Training& t, const cotune_hardware& hw);
const char* fp8_recipe_name(Fp8Recipe r);  // "tensorwise", "mxfp8", "blockwise" ("auto")

// `s` in lower case (ASCII): keywords in launch targets and table cells are read in any case.
std::string lower(std::string_view s);

}  // namespace cotune_llm

#endif
