// Timing of one operation of a step trace: roofline with a size-dependent GEMM efficiency per dtype,
// fused attention, memory-bound work and alpha-beta collectives (rules in perfmodel.hpp).
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace cotune::core::perf {
namespace {

// Backward of fused attention: five matrix products against the forward's two.
constexpr double kAttentionBackwardFactor = 2.5;
// The backward kernel reaches less of the peak than the forward (dQ is accumulated across key
// blocks, and the softmax is rebuilt): FlashAttention-2 and cuDNN run it at about 0.8 of the
// forward's FLOP rate on A100 and H100.
constexpr double kAttentionBackwardEfficiency = 0.8;
// The old rule for attention_efficiency (ABI 1.1 hardware): 0.8 of the GEMM curve's maximum.
constexpr double kAttentionShareOfGemm = 0.8;
// The head dimension attention_efficiency describes (Llama, Qwen, GPT-3 and most models since).
constexpr double kAttentionReferenceHeadDim = 128;
// PyTorch's SDPA attention (COTUNE_OP_SDPA) is FlashAttention-2, which does not use the asynchronous
// tensor-core instructions of Hopper and Blackwell (bf16 peaks from about 1 PFLOP/s): it reaches
// about 60 % of the forward throughput of the fused kernels attention_efficiency describes
// (FlashAttention-3 paper, Dao et al. 2024: FA2 at 330-350 TFLOP/s, FA3 and cuDNN at 550-650 on
// H100, causal head dim 128). On Ampere FlashAttention-2 is what every framework runs.
constexpr double kAsyncTensorCorePeak = 900e12;
constexpr double kSdpaAttentionShare = 0.6;
// No kernel reaches its dtype's peak: what a grouped_gemm_efficiency above 1 lifts stops here.
constexpr double kMostOfPeak = 0.95;

// Fused attention does, per score of Q K^T, 4 d tensor-core FLOPs forward (10 d backward) and one
// exponential on the special-function units (the backward rebuilds the softmax: one more). At the
// reference head dim the exponential takes the share s = rate / (flops per score x exp_per_s) of
// each score's time; a head dim d changes the tensor-core part by d / 128 and leaves the
// exponential, so the rate scales by 1 / ((1 - s) + s x 128 / d): head dim 64 runs at 0.8 of the
// rate on H100 (FlashAttention-3 measures 0.7-0.75) and 0.7 on B200, whose exponential throughput
// Blackwell Ultra doubles. Without exp_per_s the rate does not depend on d.
double head_dim_factor(const cotune_hardware& hw, double flop_rate, double flops_per_score, double head_dim) {
  if (hw.exp_per_s <= 0 || head_dim <= 0) return 1;
  const double s = std::min(1.0, flop_rate / (flops_per_score * hw.exp_per_s));
  return 1 / ((1 - s) + s * kAttentionReferenceHeadDim / head_dim);
}

double bf16_peak(const cotune_hardware& hw) {
  const double p = hw.peak_flops[COTUNE_DTYPE_BF16];
  return p > 0 ? p : hw.peak_flops[COTUNE_DTYPE_FP16];
}

// A kernel of F FLOPs reaches max x F / (F + half) of its dtype's peak. `half` is the catalogue's
// gemm_half_efficiency_flops scaled by the dtype's peak over bf16's: the fixed part of a kernel
// (launch ramp, the last partial wave of tiles) costs the same time whatever the precision.
double size_efficiency(const cotune_hardware& hw, double flops, double peak, double max_eff) {
  const double ref = bf16_peak(hw);
  const double half = hw.gemm_half_efficiency_flops * (ref > 0 ? peak / ref : 1.0);
  return max_eff * flops / (flops + half);
}

double collective_time(const cotune_op& op, const cotune_hardware& hw) {
  const RingShape ring = ring_shape(op);
  if (ring.wire <= 0) return 0;
  const double bw = hw.net_bytes_per_s[op.net_level] * hw.net_efficiency[op.net_level];
  const double a = hw.net_latency_s[op.net_level];
  const double b = op.bytes;
  double t = ring.wire * b / bw + ring.hops * a;
  if (op.collective == COTUNE_COLL_ALL_REDUCE) {
    const double tree = 2 * b / bw + 2 * std::log2(op.group_size) * a;
    t = std::min(t, tree);
  }
  return t;
}

}  // namespace

const char* dtype_name(int32_t dtype) {
  static const char* const names[] = {"fp32", "tf32", "bf16", "fp16", "fp8", "fp4"};
  return dtype >= 0 && dtype <= COTUNE_DTYPE_FP4 ? names[dtype] : "unknown";
}

cotune_hardware effective_hardware(const cotune_hardware& in) {
  cotune_hardware hw{};
  const size_t known = std::min(in.struct_size, sizeof hw);
  std::memcpy(&hw, &in, known);
  hw.struct_size = sizeof hw;
  if (hw.nvlink_domain <= 0) hw.nvlink_domain = hw.gpus_per_node;
  if (hw.gemm_efficiency_fp8 <= 0) hw.gemm_efficiency_fp8 = hw.gemm_efficiency_max;
  if (hw.gemm_efficiency_fp4 <= 0) hw.gemm_efficiency_fp4 = hw.gemm_efficiency_fp8;
  if (hw.attention_efficiency <= 0) hw.attention_efficiency = kAttentionShareOfGemm * hw.gemm_efficiency_max;
  if (hw.host_launch_s < 0) hw.host_launch_s = 0;
  if (hw.grouped_gemm_efficiency <= 0) hw.grouped_gemm_efficiency = 1;
  if (hw.block_scaled_gemm_efficiency <= 0) hw.block_scaled_gemm_efficiency = 1;
  for (double& e : hw.net_efficiency)
    if (e <= 0) e = hw.network_efficiency;
  return hw;
}

double op_kernels(const cotune_op& op) {
  return op.struct_size >= COTUNE_STRUCT_SIZE(cotune_op, kernels) && op.kernels > 0 ? op.kernels : 1.0;
}

double dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case COTUNE_DTYPE_FP32:
    case COTUNE_DTYPE_TF32: return 4;
    case COTUNE_DTYPE_BF16:
    case COTUNE_DTYPE_FP16: return 2;
    case COTUNE_DTYPE_FP8: return 1;
    case COTUNE_DTYPE_FP4: return 0.5 + 1.0 / 16;  // 4 bits and an 8-bit scale per block of 16 (NVFP4)
    default: throw UserError("step trace: unknown dtype " + std::to_string(dtype));
  }
}

double peak_flops(const cotune_hardware& hw, int32_t dtype) {
  if (dtype < 0 || dtype > COTUNE_DTYPE_FP4) throw UserError("step trace: unknown dtype " + std::to_string(dtype));
  const double p = dtype == COTUNE_DTYPE_FP4 ? (hw.struct_size >= COTUNE_STRUCT_SIZE(cotune_hardware, peak_flops_fp4) ? hw.peak_flops_fp4 : 0)
                                              : hw.peak_flops[dtype];
  if (p <= 0)
    throw UserError("the GPU " + std::string(hw.gpu_name.data, hw.gpu_name.len) + " has no " + dtype_name(dtype) +
                    " peak: it cannot run this trace's " + dtype_name(dtype) + " ops");
  return p;
}

double gemm_efficiency_max(const cotune_hardware& hw, int32_t dtype) {
  if (dtype == COTUNE_DTYPE_FP8) return hw.gemm_efficiency_fp8;
  if (dtype == COTUNE_DTYPE_FP4) return hw.gemm_efficiency_fp4;
  return hw.gemm_efficiency_max;
}

RingShape ring_shape(const cotune_op& op) {
  const double n = op.group_size;
  if (op.kind != COTUNE_OP_COLLECTIVE || n <= 1 || op.bytes <= 0) return {};
  if (op.net_level < 0 || op.net_level >= COTUNE_NET_LEVELS)
    throw UserError("step trace: collective '" + std::string(op.label.data ? op.label.data : "", op.label.len) +
                    "' has an unknown network level " + std::to_string(op.net_level));
  switch (op.collective) {
    case COTUNE_COLL_ALL_REDUCE: return {2 * (n - 1) / n, 2 * (n - 1)};
    case COTUNE_COLL_ALL_GATHER:
    case COTUNE_COLL_REDUCE_SCATTER:
    case COTUNE_COLL_ALL_TO_ALL: return {(n - 1) / n, n - 1};
    case COTUNE_COLL_SEND_RECV: return {1, 1};
    default: throw UserError("step trace: unknown collective " + std::to_string(op.collective));
  }
}

OpWork op_work(const cotune_op& op) {
  OpWork w;
  if (op.kind == COTUNE_OP_GEMM) {
    if (op.m <= 0 || op.n <= 0 || op.k <= 0) return w;
    w.flops = 2 * op.m * op.n * op.k;
    w.bytes = (op.m * op.k + op.k * op.n + op.m * op.n) * dtype_bytes(op.dtype);
  } else if (op.kind == COTUNE_OP_ATTENTION) {
    if (op.batch <= 0 || op.heads <= 0 || op.seq_q <= 0 || op.seq_kv <= 0 || op.head_dim <= 0) return w;
    w.flops = 4 * op.batch * op.heads * op.seq_q * op.seq_kv * op.head_dim;
    if (op.flags & COTUNE_OP_CAUSAL) w.flops *= 0.5;
    w.bytes = op.batch * op.heads * (2 * op.seq_q + 2 * op.seq_kv) * op.head_dim * dtype_bytes(op.dtype);
    if (op.phase == COTUNE_PHASE_BACKWARD && !(op.flags & COTUNE_OP_RECOMPUTE)) {
      w.flops *= kAttentionBackwardFactor;
      w.bytes *= 2;
    }
  } else if (op.kind == COTUNE_OP_MEMORY) {
    w.bytes = std::max(0.0, op.bytes);
  }
  return w;
}

double op_time(const cotune_op& op, const cotune_hardware& hardware) {
  return op_time_effective(op, effective_hardware(hardware));
}

double op_time_effective(const cotune_op& op, const cotune_hardware& hw) {
  if (op.measured_s > 0) return op.measured_s;
  const double launch = op_kernels(op) * hw.kernel_launch_s;
  switch (op.kind) {
    case COTUNE_OP_GEMM:
    case COTUNE_OP_ATTENTION: {
      const OpWork w = op_work(op);
      if (w.flops <= 0) return 0;
      const double peak = peak_flops(hw, op.dtype);
      double eff = 0;
      if (op.kind == COTUNE_OP_GEMM) {
        double top = gemm_efficiency_max(hw, op.dtype);
        if ((op.flags & COTUNE_OP_BLOCK_SCALED) && op.dtype == COTUNE_DTYPE_FP8) top *= hw.block_scaled_gemm_efficiency;
        eff = size_efficiency(hw, w.flops, peak, top);
        // A grouped kernel's scale may lift a small group past its own size's efficiency (the
        // kernel fills the GPU with every group's tiles), never past the peak; at 1 it is a dense GEMM.
        if (op.flags & COTUNE_OP_GROUPED) {
          const double f = hw.grouped_gemm_efficiency;
          eff = f <= 1 ? eff * f : std::max(eff, std::min(kMostOfPeak, eff * f));
        }
      } else {
        // The kernel's size is one pass's work: the backward factor is more work, not a bigger tile.
        const bool backward = op.phase == COTUNE_PHASE_BACKWARD && !(op.flags & COTUNE_OP_RECOMPUTE);
        const double pass = backward ? w.flops / kAttentionBackwardFactor : w.flops;
        const double share = (op.flags & COTUNE_OP_SDPA) && bf16_peak(hw) >= kAsyncTensorCorePeak ? kSdpaAttentionShare : 1;
        eff = size_efficiency(hw, pass, peak, share * hw.attention_efficiency) *
              (backward ? kAttentionBackwardEfficiency : 1);
        const double per_score = (backward ? kAttentionBackwardFactor : 1) * 4 * kAttentionReferenceHeadDim;
        eff *= head_dim_factor(hw, peak * eff, per_score, op.head_dim);
      }
      const double t_compute = w.flops / (peak * eff);
      const double t_memory = w.bytes / (hw.hbm_bytes_per_s * hw.memory_efficiency);
      return std::max(t_compute, t_memory) + launch;
    }
    case COTUNE_OP_MEMORY:
      if (op.bytes <= 0) return 0;
      return op.bytes / (hw.hbm_bytes_per_s * hw.memory_efficiency) + launch;
    case COTUNE_OP_COLLECTIVE: {
      const double t = collective_time(op, hw);
      return t > 0 ? t + launch : 0;
    }
    default: throw UserError("step trace: unknown op kind " + std::to_string(op.kind));
  }
}

}  // namespace cotune::core::perf
