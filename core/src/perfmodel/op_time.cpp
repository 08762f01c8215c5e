// Timing of one operation of a step trace: roofline with a size-dependent GEMM efficiency, fused
// attention, memory-bound work and alpha-beta collectives (rules in perfmodel.hpp).
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace cotune::core::perf {
namespace {

// Fraction of the GEMM efficiency curve that fused attention kernels reach (softmax, masking and
// the online rescaling run between the two matrix products).
constexpr double kAttentionEfficiency = 0.8;
// Backward of fused attention: five matrix products against the forward's two.
constexpr double kAttentionBackwardFactor = 2.5;

double gemm_efficiency(const cotune_hardware& hw, double flops) {
  return hw.gemm_efficiency_max * flops / (flops + hw.gemm_half_efficiency_flops);
}

double compute_time(const cotune_hardware& hw, double flops, double bytes, int32_t dtype, double scale) {
  const double eff = gemm_efficiency(hw, flops) * scale;
  const double t_compute = flops / (peak_flops(hw, dtype) * eff);
  const double t_memory = bytes / (hw.hbm_bytes_per_s * hw.memory_efficiency);
  return std::max(t_compute, t_memory) + hw.kernel_launch_s;
}

double collective_time(const cotune_op& op, const cotune_hardware& hw) {
  const RingShape ring = ring_shape(op);
  if (ring.wire <= 0) return 0;
  const double bw = hw.net_bytes_per_s[op.net_level] * hw.network_efficiency;
  const double a = hw.net_latency_s[op.net_level];
  const double b = op.bytes;
  double t = ring.wire * b / bw + ring.hops * a;
  if (op.collective == COTUNE_COLL_ALL_REDUCE) {
    const double tree = 2 * b / bw + 2 * std::log2(op.group_size) * a;
    t = std::min(t, tree);
  }
  return t + hw.kernel_launch_s;
}

}  // namespace

double dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case COTUNE_DTYPE_FP32:
    case COTUNE_DTYPE_TF32: return 4;
    case COTUNE_DTYPE_BF16:
    case COTUNE_DTYPE_FP16: return 2;
    case COTUNE_DTYPE_FP8: return 1;
    default: throw UserError("step trace: unknown dtype " + std::to_string(dtype));
  }
}

double peak_flops(const cotune_hardware& hw, int32_t dtype) {
  if (dtype < 0 || dtype >= COTUNE_DTYPE_COUNT) throw UserError("step trace: unknown dtype " + std::to_string(dtype));
  double p = hw.peak_flops[dtype];
  if (p <= 0) {
    static const char* const names[] = {"fp32", "tf32", "bf16", "fp16", "fp8"};
    throw UserError("the GPU " + std::string(hw.gpu_name.data, hw.gpu_name.len) + " has no " + names[dtype] +
                    " peak: it cannot run this trace's " + names[dtype] + " ops");
  }
  return p;
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

double op_time(const cotune_op& op, const cotune_hardware& hw) {
  if (op.measured_s > 0) return op.measured_s;
  switch (op.kind) {
    case COTUNE_OP_GEMM:
    case COTUNE_OP_ATTENTION: {
      const OpWork w = op_work(op);
      if (w.flops <= 0) return 0;
      return compute_time(hw, w.flops, w.bytes, op.dtype, op.kind == COTUNE_OP_ATTENTION ? kAttentionEfficiency : 1.0);
    }
    case COTUNE_OP_MEMORY:
      if (op.bytes <= 0) return 0;
      return op.bytes / (hw.hbm_bytes_per_s * hw.memory_efficiency) + hw.kernel_launch_s;
    case COTUNE_OP_COLLECTIVE: return collective_time(op, hw);
    default: throw UserError("step trace: unknown op kind " + std::to_string(op.kind));
  }
}

}  // namespace cotune::core::perf
