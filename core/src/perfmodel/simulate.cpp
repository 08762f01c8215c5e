// Times one training step of a step trace: stream clocks per phase, the pipeline schedule around
// them, and the metrics derived from the step time (rules in perfmodel.hpp).
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace cotune::core::perf {
namespace {

constexpr int kMaxStreams = 8;

struct PhaseTime {
  double time = 0;       // wall time of the phase on the GPU
  double host = 0;       // host time to issue every kernel of the phase
  double compute = 0;    // compute-stream busy time in compute ops (not optimizer)
  double optimizer = 0;  // compute-stream busy time in ops flagged OPTIMIZER
  double exposed[COTUNE_GROUP_COUNT] = {};
};

inline const cotune_op& op_at(const cotune_trace& t, size_t i) {
  return *reinterpret_cast<const cotune_op*>(reinterpret_cast<const char*>(t.ops) + i * t.op_stride);
}

std::string op_name(const cotune_trace& t, size_t i) {
  const cotune_op& op = op_at(t, i);
  std::string label = op.label.data != nullptr ? std::string(op.label.data, op.label.len) : std::string();
  return "step trace op " + std::to_string(i) + (label.empty() ? "" : " ('" + label + "')");
}

// Runs the ops of one phase on stream clocks. Communication streams start at `comm_start` (< 0
// lets STEP-phase communication overlap with the preceding backward).
PhaseTime run_phase(const cotune_trace& t, const cotune_hardware& hw, int32_t phase, double comm_start,
                    std::vector<double>& finish) {
  PhaseTime r;
  double clock[kMaxStreams];
  clock[COTUNE_STREAM_COMPUTE] = 0;
  for (int s = 1; s < kMaxStreams; ++s) clock[s] = comm_start;
  double last_comm_finish = comm_start;
  int32_t last_comm_group = COTUNE_GROUP_NONE;

  for (size_t i = 0; i < t.num_ops; ++i) {
    const cotune_op& op = op_at(t, i);
    if (op.phase != phase) continue;
    const double d = op.count * op_time_effective(op, hw);
    r.host += op.count * op_kernels(op) * hw.host_launch_s;
    double start = clock[op.stream];
    int32_t wait_group = COTUNE_GROUP_NONE;
    if (op.depends_on >= 0 && finish[op.depends_on] > start) {
      start = finish[op.depends_on];
      const cotune_op& dep = op_at(t, op.depends_on);
      wait_group = dep.kind == COTUNE_OP_COLLECTIVE ? dep.group : COTUNE_GROUP_NONE;
    }
    finish[i] = start + d;
    if (op.stream == COTUNE_STREAM_COMPUTE) {
      if (start > clock[0]) r.exposed[wait_group] += start - clock[0];
      if (op.kind == COTUNE_OP_COLLECTIVE) r.exposed[op.group] += d;
      else if (op.flags & COTUNE_OP_OPTIMIZER) r.optimizer += d;
      else r.compute += d;
    } else if (finish[i] >= last_comm_finish) {
      last_comm_finish = finish[i];
      last_comm_group = op.kind == COTUNE_OP_COLLECTIVE ? op.group : COTUNE_GROUP_NONE;
    }
    clock[op.stream] = finish[i];
  }
  double end = std::max(0.0, clock[0]);
  for (int s = 1; s < kMaxStreams; ++s) end = std::max(end, clock[s]);
  if (end > clock[0]) r.exposed[last_comm_group] += end - std::max(0.0, clock[0]);
  r.time = end;
  return r;
}

int32_t main_dtype(const cotune_trace& t) {
  for (size_t i = 0; i < t.num_ops; ++i) {
    const cotune_op& op = op_at(t, i);
    if (op.kind == COTUNE_OP_GEMM || op.kind == COTUNE_OP_ATTENTION) return op.dtype;
  }
  return COTUNE_DTYPE_BF16;
}

}  // namespace

void validate_trace(const cotune_trace& t) {
  if (t.struct_size < COTUNE_STRUCT_SIZE(cotune_trace, hardware))
    throw UserError("step trace: struct_size " + std::to_string(t.struct_size) + " is older than this host reads");
  if (t.hardware.struct_size < COTUNE_STRUCT_SIZE(cotune_hardware, host_bytes_per_node))
    throw UserError("step trace: hardware struct_size is older than this host reads");
  if (t.struct_size < offsetof(cotune_trace, hardware) + t.hardware.struct_size)
    throw UserError("step trace: the hardware's struct_size (" + std::to_string(t.hardware.struct_size) +
                    ") runs past the trace's (" + std::to_string(t.struct_size) + ")");
  if (t.num_ops > 0 && (t.ops == nullptr || t.op_stride < COTUNE_STRUCT_SIZE(cotune_op, measured_s)))
    throw UserError("step trace: ops is NULL or op_stride is smaller than a cotune_op");
  if (t.micro_batches < 1 || t.pipeline_stages < 1 || t.virtual_stages < 1)
    throw UserError("step trace: micro_batches (" + std::to_string(t.micro_batches) + "), pipeline_stages (" +
                    std::to_string(t.pipeline_stages) + ") and virtual_stages (" + std::to_string(t.virtual_stages) +
                    ") must each be >= 1");
  const cotune_hardware& hw = t.hardware;
  if (hw.hbm_bytes_per_s <= 0 || hw.memory_efficiency <= 0 || hw.network_efficiency <= 0 ||
      hw.gemm_efficiency_max <= 0)
    throw UserError("step trace: the hardware has no memory bandwidth or efficiencies (was it resolved?)");
  for (size_t i = 0; i < t.num_ops; ++i) {
    const cotune_op& op = op_at(t, i);
    if (op.struct_size < COTUNE_STRUCT_SIZE(cotune_op, measured_s))
      throw UserError(op_name(t, i) + ": struct_size is older than this host reads");
    if (op.count < 0 || op.bytes < 0 || op.m < 0 || op.n < 0 || op.k < 0 || op.group_size < 0)
      throw UserError(op_name(t, i) + ": negative count or size");
    if (op.stream < 0 || op.stream >= kMaxStreams)
      throw UserError(op_name(t, i) + ": stream " + std::to_string(op.stream) + " is outside 0.." +
                      std::to_string(kMaxStreams - 1));
    if (op.phase < COTUNE_PHASE_FORWARD || op.phase > COTUNE_PHASE_STEP)
      throw UserError(op_name(t, i) + ": unknown phase " + std::to_string(op.phase));
    if (op.depends_on >= static_cast<int32_t>(i) || op.depends_on < -1)
      throw UserError(op_name(t, i) + ": depends_on must name an earlier op or be -1");
    if (op.depends_on >= 0 && op_at(t, op.depends_on).phase != op.phase)
      throw UserError(op_name(t, i) + ": depends_on names an op of another phase");
    if (op.kind == COTUNE_OP_COLLECTIVE && (op.group < 0 || op.group >= COTUNE_GROUP_COUNT))
      throw UserError(op_name(t, i) + ": unknown communication group " + std::to_string(op.group));
  }
}

void simulate(const cotune_trace& trace, cotune_sim_result* out) {
  if (out == nullptr || out->struct_size < COTUNE_STRUCT_SIZE(cotune_sim_result, cost_per_mtokens))
    throw UserError("simulate: the result struct is too small for this host");
  validate_trace(trace);
  const cotune_hardware hw = effective_hardware(trace.hardware);
  thread_local std::vector<double> finish;
  if (finish.size() < trace.num_ops) finish.resize(trace.num_ops);

  const PhaseTime f = run_phase(trace, hw, COTUNE_PHASE_FORWARD, 0, finish);
  const PhaseTime b = run_phase(trace, hw, COTUNE_PHASE_BACKWARD, 0, finish);
  const PhaseTime s = run_phase(trace, hw, COTUNE_PHASE_STEP, -b.time, finish);

  const double m = trace.micro_batches;
  const double p = trace.pipeline_stages;
  const double v = trace.virtual_stages;
  double bubble_factor = 0;
  if (p > 1) bubble_factor = trace.schedule == COTUNE_SCHEDULE_GPIPE ? p - 1 : (p - 1) / v;
  // The host issues a micro-batch's kernels while the GPU runs earlier ones; when issuing takes
  // longer than running (small kernels), the GPU waits for the host.
  const double gpu_per_micro_batch = f.time + b.time;
  const double per_micro_batch = std::max(gpu_per_micro_batch, f.host + b.host);
  const double step_phase = std::max(s.time, s.host);

  cotune_sim_result r{};
  r.struct_size = out->struct_size;
  r.bubble_s = bubble_factor * per_micro_batch;
  r.step_time_s = m * per_micro_batch + r.bubble_s + step_phase;
  r.launch_bound_s = m * (per_micro_batch - gpu_per_micro_batch) + (step_phase - s.time);
  r.compute_s = m * (f.compute + b.compute) + s.compute;
  r.optimizer_s = m * (f.optimizer + b.optimizer) + s.optimizer;
  for (int g = 0; g < COTUNE_GROUP_COUNT; ++g) r.exposed_comm_s[g] = m * (f.exposed[g] + b.exposed[g]) + s.exposed[g];

  const double step = r.step_time_s;
  if (step > 0) {
    r.tokens_per_s = trace.tokens_per_step / step;
    r.tflops_per_gpu = trace.model_flops_per_gpu / step / 1e12;
    const int32_t dtype = main_dtype(trace);
    const double pk = dtype == COTUNE_DTYPE_FP4 ? hw.peak_flops_fp4 : hw.peak_flops[dtype];
    r.mfu = pk > 0 ? trace.model_flops_per_gpu / step / pk : 0;
    if (hw.price_per_gpu_hour > 0 && trace.tokens_per_step > 0)
      r.cost_per_mtokens = hw.price_per_gpu_hour * trace.gpus * step / 3600.0 / (trace.tokens_per_step / 1e6);
  }
  const cotune_memory& mem = trace.memory;
  r.peak_memory_bytes = mem.weights + mem.gradients + mem.optimizer + mem.activations + mem.buffers;
  r.fits = r.peak_memory_bytes <= hw.hbm_bytes ? 1 : 0;
  // Only what the caller's struct holds: a plugin built against an older ABI passes a smaller one.
  std::memcpy(out, &r, std::min(out->struct_size, sizeof r));
}

}  // namespace cotune::core::perf
