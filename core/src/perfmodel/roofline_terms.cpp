// The roofline terms of a step trace (rules in perfmodel.hpp), for the learned cost model.
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>

#include <algorithm>
#include <string>

namespace cotune::core::perf {

const char* const kRooflineTermNames[kRooflineTerms] = {
    "compute_s", "memory_s", "kernels", "comm_node_s", "comm_cluster_s", "comm_island_s", "comm_hops", "step_s", "fixed"};

namespace {

enum Term { kCompute, kMemory, kKernels, kCommNode, kCommCluster, kCommIsland, kHops, kStep, kFixed };

inline const cotune_op& op_at(const cotune_trace& t, size_t i) {
  return *reinterpret_cast<const cotune_op*>(reinterpret_cast<const char*>(t.ops) + i * t.op_stride);
}

}  // namespace

void roofline_terms(const cotune_trace& t, double out[kRooflineTerms]) {
  std::fill(out, out + kRooflineTerms, 0.0);
  validate_trace(t);
  const cotune_hardware hw = effective_hardware(t.hardware);
  const double p = t.pipeline_stages;
  double bubble = 0;
  if (p > 1) bubble = t.schedule == COTUNE_SCHEDULE_GPIPE ? p - 1 : (p - 1) / t.virtual_stages;
  const double stretch = t.micro_batches + bubble;

  for (size_t i = 0; i < t.num_ops; ++i) {
    const cotune_op& op = op_at(t, i);
    const bool step = op.phase == COTUNE_PHASE_STEP;
    const double runs = op.count * (step ? 1.0 : stretch);
    if (op.kind == COTUNE_OP_COLLECTIVE) {
      const RingShape ring = ring_shape(op);
      if (ring.wire <= 0) continue;
      const double bw = hw.net_bytes_per_s[op.net_level];
      if (bw <= 0) throw UserError("step trace: the hardware has no bandwidth at network level " + std::to_string(op.net_level));
      const double wire_s = runs * ring.wire * op.bytes / bw;
      if (step) out[kStep] += wire_s;
      else out[kCommNode + op.net_level] += wire_s;
      out[kHops] += runs * ring.hops;
      continue;
    }
    if (op.kind != COTUNE_OP_GEMM && op.kind != COTUNE_OP_ATTENTION && op.kind != COTUNE_OP_MEMORY)
      throw UserError("step trace: unknown op kind " + std::to_string(op.kind));
    double seconds = op.measured_s;
    if (seconds <= 0) {
      const OpWork w = op_work(op);
      seconds = w.bytes / hw.hbm_bytes_per_s;
      if (w.flops > 0) seconds = std::max(seconds, w.flops / peak_flops(hw, op.dtype));
    }
    if (step) out[kStep] += runs * seconds;
    else out[op.kind == COTUNE_OP_MEMORY ? kMemory : kCompute] += runs * seconds;
    out[kKernels] += runs * op_kernels(op);
  }
  out[kFixed] = 1;
}

}  // namespace cotune::core::perf
