// Translation of a step trace into kernel measurements (see kernel_plan.hpp).
#include "kernel_plan.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

namespace cotune_cuda {
namespace {

std::string op_name(const cotune_op& op, size_t index) {
  std::string name = "op " + std::to_string(index);
  if (op.struct_size >= COTUNE_STRUCT_SIZE(cotune_op, label) && op.label.data != nullptr && op.label.len > 0)
    name += " ('" + std::string(op.label.data, op.label.len) + "')";
  return name;
}

// A dimension as a positive integer; the trace stores doubles.
int64_t dimension(double value, const char* field, const cotune_op& op, size_t index) {
  if (!std::isfinite(value) || value < 0.5 || value > 9.0e15)
    throw std::invalid_argument("step trace: " + op_name(op, index) + " has " + field + " = " +
                                std::to_string(value) + "; expected a positive integer");
  return static_cast<int64_t>(std::llround(value));
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Shrinks `dim` into equal slices until `fits` holds; returns how many slices one run has (as the
// ratio of the full to the sliced size, exact for the time of linear work).
template <class Fits>
double slice(int64_t& dim, Fits fits) {
  const int64_t full = dim;
  int64_t slices = 1;
  while (!fits() && dim > 1) {
    slices *= 2;
    dim = ceil_div(full, slices);
  }
  return static_cast<double>(full) / static_cast<double>(dim);
}

Measurement gemm_measurement(const cotune_op& op, size_t index, const PlanLimits& limits, double* scale) {
  Measurement m;
  m.kind = MeasureKind::kGemm;
  m.dtype = op.dtype;
  m.m = dimension(op.m, "m", op, index);
  m.n = dimension(op.n, "n", op, index);
  m.k = dimension(op.k, "k", op, index);
  // Halve the larger of m and n until it fits, so the slice keeps a GEMM-like aspect (slicing m
  // alone to one row would time a memory-bound GEMV). k is never sliced: it sets the arithmetic
  // intensity.
  const int64_t full_m = m.m, full_n = m.n;
  int64_t slices_m = 1, slices_n = 1;
  while (m.device_bytes() > limits.max_measurement_bytes && (m.m > 1 || m.n > 1)) {
    if (m.m >= m.n)
      m.m = ceil_div(full_m, slices_m *= 2);
    else
      m.n = ceil_div(full_n, slices_n *= 2);
  }
  *scale = (double(full_m) / double(m.m)) * (double(full_n) / double(m.n));
  return m;
}

Measurement attention_measurement(const cotune_op& op, size_t index, const PlanLimits& limits, double* scale) {
  Measurement m;
  const bool backward = op.phase == COTUNE_PHASE_BACKWARD && (op.flags & COTUNE_OP_RECOMPUTE) == 0;
  m.kind = backward ? MeasureKind::kAttentionBackward : MeasureKind::kAttentionForward;
  m.dtype = op.dtype;
  if (op.dtype == COTUNE_DTYPE_FP8)
    throw std::invalid_argument("step trace: " + op_name(op, index) +
                                " is fp8 attention; the cuda executor times attention in fp32, tf32, bf16 or fp16");
  const int64_t batch = dimension(op.batch, "batch", op, index);
  const int64_t heads = dimension(op.heads, "heads", op, index);
  m.heads = batch * heads;
  m.seq_q = dimension(op.seq_q, "seq_q", op, index);
  m.seq_kv = dimension(op.seq_kv, "seq_kv", op, index);
  m.head_dim = dimension(op.head_dim, "head_dim", op, index);
  const double causal = (op.flags & COTUNE_OP_CAUSAL) ? causal_fraction(m.seq_q, m.seq_kv) : 1.0;
  auto fits = [&] { return m.device_bytes() <= limits.max_measurement_bytes; };
  *scale = slice(m.heads, fits);
  *scale *= slice(m.seq_q, fits);
  // The GEMM-softmax-GEMM sequence computes the whole score matrix; a causal kernel skips the
  // masked part, so the measured time is scaled by the fraction it does compute.
  *scale *= causal;
  return m;
}

Measurement memory_measurement(const cotune_op& op, size_t index, const PlanLimits& limits, double* scale) {
  Measurement m;
  m.kind = MeasureKind::kMemory;
  m.dtype = COTUNE_DTYPE_BF16;  // unused: a copy kernel moves bytes whatever their type
  m.bytes = dimension(op.bytes, "bytes", op, index);
  m.bytes += m.bytes % 2;  // the copy kernel reads half and writes half
  auto fits = [&] { return m.device_bytes() <= limits.max_measurement_bytes; };
  *scale = slice(m.bytes, fits);
  m.bytes += m.bytes % 2;
  return m;
}

}  // namespace

const char* measure_kind_name(MeasureKind kind) {
  switch (kind) {
    case MeasureKind::kGemm: return "gemm";
    case MeasureKind::kAttentionForward: return "attention_fwd";
    case MeasureKind::kAttentionBackward: return "attention_bwd";
    case MeasureKind::kMemory: return "memory";
  }
  return "unknown";
}

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case COTUNE_DTYPE_FP32: return "fp32";
    case COTUNE_DTYPE_TF32: return "tf32";
    case COTUNE_DTYPE_BF16: return "bf16";
    case COTUNE_DTYPE_FP16: return "fp16";
    case COTUNE_DTYPE_FP8: return "fp8";
    default: return "unknown";
  }
}

double dtype_bytes(int32_t dtype) {
  switch (dtype) {
    case COTUNE_DTYPE_FP32:
    case COTUNE_DTYPE_TF32: return 4;
    case COTUNE_DTYPE_BF16:
    case COTUNE_DTYPE_FP16: return 2;
    case COTUNE_DTYPE_FP8: return 1;
    default: throw std::invalid_argument("unknown dtype " + std::to_string(dtype));
  }
}

double Measurement::device_bytes() const {
  switch (kind) {
    case MeasureKind::kGemm: {
      const double in = dtype_bytes(dtype);
      const double out = dtype == COTUNE_DTYPE_FP8 ? 2.0 : in;  // fp8 GEMMs write bf16
      return (double(m) * double(k) + double(k) * double(n)) * in + double(m) * double(n) * out;
    }
    case MeasureKind::kAttentionForward:
    case MeasureKind::kAttentionBackward: {
      const double e = dtype_bytes(dtype);
      const double q = double(heads) * double(seq_q) * double(head_dim);
      const double kv = double(heads) * double(seq_kv) * double(head_dim);
      const double scores = double(heads) * double(seq_q) * double(seq_kv);
      if (kind == MeasureKind::kAttentionForward) return e * (2 * q + 2 * kv + scores);
      return e * (4 * q + 4 * kv + 2 * scores);  // Q O dO dQ, K V dK dV, P dS
    }
    case MeasureKind::kMemory: return double(bytes);
  }
  return 0;
}

std::string Measurement::key() const {
  if (kind == MeasureKind::kMemory) return "memory/" + std::to_string(bytes) + "B";  // no dtype: bytes are bytes
  std::string s = std::string(measure_kind_name(kind)) + "/" + dtype_name(dtype) + "/";
  switch (kind) {
    case MeasureKind::kGemm:
      return s + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    case MeasureKind::kAttentionForward:
    case MeasureKind::kAttentionBackward:
      return s + std::to_string(heads) + "h" + std::to_string(seq_q) + "q" + std::to_string(seq_kv) + "kv" +
             std::to_string(head_dim) + "d";
    case MeasureKind::kMemory: break;
  }
  return s;
}

double causal_fraction(int64_t seq_q, int64_t seq_kv) {
  if (seq_q <= 0 || seq_kv <= 0) return 0;
  const double q = double(seq_q), kv = double(seq_kv);
  // Query i (0-based) sees keys j <= i + (kv - q).
  double computed;
  if (kv >= q)
    computed = q * (kv - q + 1) + q * (q - 1) / 2;
  else
    computed = kv * (kv + 1) / 2;
  return computed / (q * kv);
}

const cotune_op& trace_op(const cotune_trace& trace, size_t index) {
  const char* base = reinterpret_cast<const char*>(trace.ops);
  return *reinterpret_cast<const cotune_op*>(base + index * trace.op_stride);
}

KernelPlan make_kernel_plan(const cotune_trace& trace, const PlanLimits& limits) {
  if (trace.num_ops > 0 && trace.ops == nullptr) throw std::invalid_argument("step trace: ops is NULL");
  if (trace.num_ops > 0 && trace.op_stride < COTUNE_STRUCT_SIZE(cotune_op, measured_s))
    throw std::invalid_argument("step trace: op_stride " + std::to_string(trace.op_stride) +
                                " is smaller than an op");
  const double micro_batches = trace.micro_batches > 0 ? trace.micro_batches : 1;

  KernelPlan plan;
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < trace.num_ops; ++i) {
    const cotune_op& op = trace_op(trace, i);
    if (op.struct_size < COTUNE_STRUCT_SIZE(cotune_op, measured_s))
      throw std::invalid_argument("step trace: " + op_name(op, i) + " was written without the measured_s field");
    if (op.kind == COTUNE_OP_COLLECTIVE) {
      plan.modelled.push_back({i, "communication is timed by the performance model"});
      continue;
    }
    if (!std::isfinite(op.count) || op.count < 0)
      throw std::invalid_argument("step trace: " + op_name(op, i) + " has count " + std::to_string(op.count) +
                                  "; expected a number >= 0");
    if (op.count == 0) {
      plan.modelled.push_back({i, "runs zero times"});
      continue;
    }
    if (op.kind == COTUNE_OP_MEMORY && op.bytes == 0) {
      plan.modelled.push_back({i, "no GPU work (host-side framework operations)"});
      continue;
    }
    if (op.kind != COTUNE_OP_MEMORY && op.dtype == COTUNE_DTYPE_FP4) {
      plan.modelled.push_back({i, "fp4 GEMMs are timed by the performance model (no portable fp4 GEMM to measure)"});
      continue;
    }
    if (op.kind != COTUNE_OP_MEMORY && (op.dtype < 0 || op.dtype >= COTUNE_DTYPE_COUNT))
      throw std::invalid_argument("step trace: " + op_name(op, i) + " has unknown dtype " + std::to_string(op.dtype));

    double scale = 1;
    Measurement m;
    switch (op.kind) {
      case COTUNE_OP_GEMM: m = gemm_measurement(op, i, limits, &scale); break;
      case COTUNE_OP_ATTENTION: m = attention_measurement(op, i, limits, &scale); break;
      case COTUNE_OP_MEMORY: m = memory_measurement(op, i, limits, &scale); break;
      default:
        throw std::invalid_argument("step trace: " + op_name(op, i) + " has unknown kind " + std::to_string(op.kind));
    }
    const std::string key = m.key();
    auto found = index_of.find(key);
    size_t mi;
    if (found == index_of.end()) {
      mi = plan.measurements.size();
      plan.measurements.push_back(m);
      index_of.emplace(key, mi);
    } else {
      mi = found->second;
    }
    const double runs = op.count * (op.phase == COTUNE_PHASE_STEP ? 1.0 : micro_batches);
    plan.ops.push_back({i, mi, scale, runs});
  }
  return plan;
}

}  // namespace cotune_cuda
