// The kernel plan: what the cuda executor runs on the GPU for a step trace. Pure C++ (no CUDA), so
// the translation from trace ops to measurements is tested without a device.
//
// Every compute op (GEMM, attention, memory) becomes a reference to one Measurement: a kernel shape
// and dtype timed once on the device. Identical shapes share a measurement. Collectives are left to
// the performance model. Shapes too large to run at once are measured on a slice and scaled.
#ifndef COTUNE_CUDA_KERNEL_PLAN_HPP_
#define COTUNE_CUDA_KERNEL_PLAN_HPP_

#include <cotune/cotune.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cotune_cuda {

enum class MeasureKind { kGemm, kAttentionForward, kAttentionBackward, kMemory };

const char* measure_kind_name(MeasureKind kind);
const char* dtype_name(int32_t dtype);  // "fp32", "tf32", "bf16", "fp16", "fp8"
double dtype_bytes(int32_t dtype);

// One kernel shape to time on the device.
struct Measurement {
  MeasureKind kind = MeasureKind::kGemm;
  int32_t dtype = COTUNE_DTYPE_BF16;
  int64_t m = 0, n = 0, k = 0;                      // gemm: m x k times k x n
  int64_t heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;  // attention: heads = batch x heads
  int64_t bytes = 0;                                // memory: bytes moved (read + written)

  // Bytes of device memory the measurement needs (operands, outputs, scores).
  double device_bytes() const;
  // A stable text key: identical shapes have identical keys ("gemm/bf16/4096x4096x4096").
  std::string key() const;
};

// A trace op that is timed from a measurement: measured_s = seconds(measurement) x scale.
struct PlannedOp {
  size_t op_index = 0;     // index into the trace's ops
  size_t measurement = 0;  // index into KernelPlan::measurements
  double scale = 1;        // slices measured per op run x causal fraction
  double runs_per_step = 0;  // op.count x micro-batches (forward/backward) or op.count (step phase)
};

// An op the GPU does not run: collectives, and ops that run zero times.
struct ModelledOp {
  size_t op_index = 0;
  std::string reason;
};

struct KernelPlan {
  std::vector<Measurement> measurements;  // distinct, in order of first use
  std::vector<PlannedOp> ops;
  std::vector<ModelledOp> modelled;
};

struct PlanLimits {
  // Largest device allocation one measurement may use; bigger shapes are measured on a slice.
  double max_measurement_bytes = 4.0 * (1ull << 30);
};

// Builds the plan. Throws std::invalid_argument naming the op (index and label) on a malformed op:
// non-finite or non-positive dimensions, an unknown dtype or kind.
KernelPlan make_kernel_plan(const cotune_trace& trace, const PlanLimits& limits = {});

// Fraction of the seq_q x seq_kv score matrix a causal kernel computes (mask aligned to the
// bottom-right corner, as for queries that are the last seq_q of seq_kv positions).
double causal_fraction(int64_t seq_q, int64_t seq_kv);

// The op at `index` of a trace (ops are op_stride bytes apart).
const cotune_op& trace_op(const cotune_trace& trace, size_t index);

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_KERNEL_PLAN_HPP_
