// Trace ops (see trace_builder.hpp).
#include "trace_builder.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace cotune_llm {
namespace {

// Bytes a low-precision GEMM's quantisation moves per element of its activation operand: the bf16
// read, the quantised copy and its transpose (Transformer Engine's cast-transpose; Hopper's FP8
// tensor cores want both layouts); NVFP4 adds the random Hadamard transform of weight-gradient
// inputs and block scales.
constexpr double kFp8CastBytes = 4;
constexpr double kFp4CastBytes = 6;

}  // namespace

GroupPlacement place_group(double stride, double size, const cotune_hardware& hw) {
  const double domain = hw.struct_size >= COTUNE_STRUCT_SIZE(cotune_hardware, nvlink_domain) && hw.nvlink_domain > 0
                            ? hw.nvlink_domain
                            : hw.gpus_per_node;
  GroupPlacement p{COTUNE_NET_NODE, size};
  const double span = stride * size;
  if (span <= domain) return p;
  p.ranks_per_domain = stride >= domain ? 1 : std::min(size, std::floor(domain / stride));
  const double nodes = std::ceil(span / hw.gpus_per_node);
  p.level = (hw.nodes_per_island > 0 && nodes > hw.nodes_per_island) ? COTUNE_NET_ISLAND : COTUNE_NET_CLUSTER;
  return p;
}

TraceBuilder::TraceBuilder(std::vector<cotune_op>& ops, const cotune_hardware& hw, int32_t dtype, bool frozen,
                           double unfused, bool sdpa)
    : ops_(ops), hw_(hw), dtype_(dtype), frozen_(frozen), unfused_(unfused), sdpa_(sdpa) {
  ops_.clear();
}

void TraceBuilder::begin_block(int32_t phase, double count, uint32_t flags) {
  block_phase_ = phase;
  block_count_ = count;
  block_flags_ = flags;
  cast_bytes_ = 0;
  cast_kernels_ = 0;
}

void TraceBuilder::end_block() {
  if (cast_bytes_ > 0 && block_count_ > 0)
    memory(block_phase_, dtype_ == COTUNE_DTYPE_FP4 ? "fp4_quantize" : "fp8_cast", cast_bytes_, block_count_,
           block_flags_, cast_kernels_);
  block_phase_ = -1;
  cast_bytes_ = 0;
  cast_kernels_ = 0;
}

int32_t TraceBuilder::gemm(int32_t phase, const char* label, double m, double n, double k, double count, GemmRole role,
                           uint32_t flags, double kernels) {
  if (frozen_ && role == GemmRole::kWgrad) return -1;
  cotune_op& o =
      next(phase, COTUNE_OP_GEMM, label, count,
           flags | (block_scaled_ && dtype_ == COTUNE_DTYPE_FP8 ? COTUNE_OP_BLOCK_SCALED : 0u), kernels);
  o.m = m, o.n = n, o.k = k;
  o.dtype = dtype_;
  const bool low = dtype_ == COTUNE_DTYPE_FP8 || dtype_ == COTUNE_DTYPE_FP4;
  if (low && role != GemmRole::kWgrad && block_phase_ == phase && block_count_ > 0) {
    // The activation operand (m x k) of every run, per run of the block; amax and scale kernels too.
    const double runs = count / block_count_;
    cast_bytes_ += runs * m * k * (dtype_ == COTUNE_DTYPE_FP4 ? kFp4CastBytes : kFp8CastBytes);
    cast_kernels_ += std::min(runs, 1.0) * 2;
  }
  return last();
}

int32_t TraceBuilder::gemm_bf16(int32_t phase, const char* label, double m, double n, double k, double count,
                                uint32_t flags, double kernels, GemmRole role) {
  if (frozen_ && role == GemmRole::kWgrad) return -1;
  cotune_op& o = next(phase, COTUNE_OP_GEMM, label, count, flags, kernels);
  o.m = m, o.n = n, o.k = k;
  o.dtype = COTUNE_DTYPE_BF16;
  return last();
}

int32_t TraceBuilder::attention(int32_t phase, double batch, double heads, double seq_q, double seq_kv, double head_dim,
                                double count, uint32_t flags, double kernels) {
  cotune_op& o = next(phase, COTUNE_OP_ATTENTION,
                      flags & COTUNE_OP_RECOMPUTE ? "attention_recompute" : "attention", count,
                      flags | COTUNE_OP_CAUSAL | (sdpa_ ? COTUNE_OP_SDPA : 0u), kernels);
  o.batch = batch, o.heads = heads, o.seq_q = seq_q, o.seq_kv = seq_kv, o.head_dim = head_dim;
  o.dtype = dtype_ == COTUNE_DTYPE_FP16 ? COTUNE_DTYPE_FP16 : COTUNE_DTYPE_BF16;
  return last();
}

int32_t TraceBuilder::memory(int32_t phase, const char* label, double bytes, double count, uint32_t flags,
                             double kernels) {
  const double unfused = bytes > 0 && !(flags & COTUNE_OP_OPTIMIZER) ? unfused_ : 1;
  return memory_op(phase, label, bytes * unfused, count, flags, kernels * unfused);
}

int32_t TraceBuilder::memory_as_given(int32_t phase, const char* label, double bytes, double count, double kernels) {
  return memory_op(phase, label, bytes, count, 0, kernels);
}

int32_t TraceBuilder::memory_op(int32_t phase, const char* label, double bytes, double count, uint32_t flags,
                                double kernels) {
  cotune_op& o = next(phase, COTUNE_OP_MEMORY, label, count, flags, kernels);
  o.bytes = bytes;
  o.dtype = COTUNE_DTYPE_BF16;
  return last();
}

int32_t TraceBuilder::host(int32_t phase, const char* label, double count, double operations, uint32_t flags) {
  return memory(phase, label, 0, count, flags, operations);
}

int32_t TraceBuilder::collective(int32_t phase, int32_t stream, const char* label, int32_t coll, int32_t group,
                                 double bytes, double stride, double size, double count, int32_t depends_on,
                                 uint32_t flags) {
  if (size <= 1 || bytes <= 0 || count <= 0) return depends_on;
  const GroupPlacement p = place_group(stride, size, hw_);
  const double rpd = p.ranks_per_domain;
  if (p.level != COTUNE_NET_NODE && coll == COTUNE_COLL_ALL_TO_ALL) {
    // Each rank sends bytes/size to every other rank: (rpd - 1)/size of the buffer inside its
    // domain, (size - rpd)/size over its own network link.
    int32_t dep = depends_on;
    if (rpd > 1) dep = one(phase, stream, label, coll, group, bytes * rpd / size, rpd, COTUNE_NET_NODE, count, dep, flags);
    return one(phase, stream, label, coll, group, bytes, size / rpd, p.level, count, dep, flags);
  }
  if (p.level != COTUNE_NET_NODE && rpd > 1 && coll != COTUNE_COLL_SEND_RECV) {
    const int32_t dep = one(phase, stream, label, coll, group, bytes, rpd, COTUNE_NET_NODE, count, depends_on, flags);
    return one(phase, stream, label, coll, group, bytes / rpd, size / rpd, p.level, count, dep, flags);
  }
  return one(phase, stream, label, coll, group, bytes, coll == COTUNE_COLL_SEND_RECV ? 2 : size, p.level, count,
             depends_on, flags);
}

int32_t TraceBuilder::all_to_all(int32_t phase, int32_t stream, const char* label, int32_t group, double wire_intra,
                                 double wire_inter, double stride, double size, double count, uint32_t flags) {
  if (size <= 1 || count <= 0) return -1;
  const GroupPlacement p = place_group(stride, size, hw_);
  const double rpd = p.ranks_per_domain;
  // The timing sends (n - 1)/n of an op's bytes among its n ranks: scale the wire bytes back up.
  int32_t dep = -1;
  if (rpd > 1 && wire_intra > 0)
    dep = one(phase, stream, label, COTUNE_COLL_ALL_TO_ALL, group, wire_intra * rpd / (rpd - 1), rpd, COTUNE_NET_NODE,
              count, dep, flags);
  const double domains = size / rpd;
  if (p.level != COTUNE_NET_NODE && domains > 1 && wire_inter > 0)
    dep = one(phase, stream, label, COTUNE_COLL_ALL_TO_ALL, group, wire_inter * domains / (domains - 1), domains,
              p.level, count, dep, flags);
  return dep;
}

cotune_op& TraceBuilder::next(int32_t phase, int32_t kind, const char* label, double count, uint32_t flags,
                              double kernels) {
  // Capacity is reserved at kMaxOps and the trace never needs more, so this never reallocates.
  if (ops_.size() >= kMaxOps) throw std::logic_error("llm space: step trace exceeds kMaxOps");
  ops_.emplace_back();
  cotune_op& o = ops_.back();
  o.struct_size = COTUNE_STRUCT_SIZE(cotune_op, kernels);
  o.kind = kind;
  o.phase = phase;
  o.stream = COTUNE_STREAM_COMPUTE;
  o.depends_on = -1;
  o.flags = flags;
  o.count = count;
  o.kernels = kernels;
  o.label = cotune_str{label, std::strlen(label)};
  if (waiting_for_ >= 0 && kind != COTUNE_OP_COLLECTIVE) {
    if (ops_[size_t(waiting_for_)].phase == phase) o.depends_on = waiting_for_;
    waiting_for_ = -1;
  }
  return o;
}

int32_t TraceBuilder::one(int32_t phase, int32_t stream, const char* label, int32_t coll, int32_t group, double bytes,
                          double size, int32_t level, double count, int32_t dep, uint32_t flags) {
  cotune_op& o = next(phase, COTUNE_OP_COLLECTIVE, label, count, flags, 1);
  o.stream = stream;
  o.collective = coll;
  o.group = group;
  o.bytes = bytes;
  o.group_size = size;
  o.net_level = level;
  o.depends_on = dep;
  return last();
}

}  // namespace cotune_llm
