// The step trace of a planned configuration (see lowering.hpp).
#include "lowering.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "memory.hpp"

namespace cotune_recsys {
namespace {

class Builder {
 public:
  Builder(std::vector<cotune_op>& ops, const cotune_hardware& hw, double gpus, int32_t dtype)
      : ops_(ops), gpus_(gpus), dtype_(dtype) {
    ops_.clear();
    gpn_ = std::min<double>(gpus, hw.gpus_per_node);
    const double nodes = std::ceil(gpus / gpn_);
    cross_ = hw.nodes_per_island > 0 && nodes > hw.nodes_per_island ? COTUNE_NET_ISLAND : COTUNE_NET_CLUSTER;
  }

  int32_t gemm(int32_t phase, const char* label, double m, double n, double k) {
    cotune_op& o = next(phase, COTUNE_OP_GEMM, label, COTUNE_STREAM_COMPUTE, 0);
    o.m = m, o.n = n, o.k = k;
    o.dtype = dtype_;
    return last();
  }
  int32_t memory(int32_t phase, const char* label, double bytes, uint32_t flags = 0, int32_t depends_on = -1) {
    if (bytes <= 0) return depends_on;
    cotune_op& o = next(phase, COTUNE_OP_MEMORY, label, COTUNE_STREAM_COMPUTE, flags);
    o.bytes = bytes;
    o.dtype = dtype_;
    o.depends_on = depends_on;
    return last();
  }
  // A collective over every GPU of the job. Across nodes it runs in two steps: all-to-all sends
  // the part for the node's own GPUs over NVLink and the rest over the network; reductions and
  // gathers are hierarchical (inside the node, then 1/gpn of the data across nodes).
  int32_t global(int32_t phase, int32_t stream, const char* label, int32_t coll, int32_t group, double bytes,
                 int32_t depends_on = -1) {
    if (gpus_ <= 1 || bytes <= 0) return depends_on;
    if (gpus_ <= gpn_) return one(phase, stream, label, coll, group, bytes, gpus_, COTUNE_NET_NODE, depends_on);
    const double nodes = gpus_ / gpn_;
    int32_t dep = depends_on;
    if (coll == COTUNE_COLL_ALL_TO_ALL) {
      if (gpn_ > 1) dep = one(phase, stream, label, coll, group, bytes * gpn_ / gpus_, gpn_, COTUNE_NET_NODE, dep);
      return one(phase, stream, label, coll, group, bytes, nodes, cross_, dep);
    }
    if (gpn_ > 1) dep = one(phase, stream, label, coll, group, bytes, gpn_, COTUNE_NET_NODE, dep);
    return one(phase, stream, label, coll, group, bytes / gpn_, nodes, cross_, dep);
  }
  // A collective among the GPUs of one node.
  int32_t node(int32_t phase, const char* label, int32_t coll, double bytes) {
    if (gpn_ <= 1 || bytes <= 0) return -1;
    return one(phase, COTUNE_STREAM_COMPUTE, label, coll, COTUNE_GROUP_EMB, bytes, gpn_, COTUNE_NET_NODE, -1);
  }

 private:
  int32_t last() const { return static_cast<int32_t>(ops_.size()) - 1; }
  cotune_op& next(int32_t phase, int32_t kind, const char* label, int32_t stream, uint32_t flags) {
    ops_.emplace_back();
    cotune_op& o = ops_.back();
    o.struct_size = COTUNE_STRUCT_SIZE(cotune_op, label);
    o.kind = kind;
    o.phase = phase;
    o.stream = stream;
    o.depends_on = -1;
    o.flags = flags;
    o.count = 1;
    o.label = cotune_str{label, std::strlen(label)};
    return o;
  }
  int32_t one(int32_t phase, int32_t stream, const char* label, int32_t coll, int32_t group, double bytes, double size,
              int32_t level, int32_t dep) {
    cotune_op& o = next(phase, COTUNE_OP_COLLECTIVE, label, stream, 0);
    o.collective = coll;
    o.group = group;
    o.bytes = bytes;
    o.group_size = size;
    o.net_level = level;
    o.depends_on = dep;
    o.dtype = dtype_;
    return last();
  }

  std::vector<cotune_op>& ops_;
  double gpus_, gpn_ = 1;
  int32_t cross_ = COTUNE_NET_CLUSTER;
  int32_t dtype_;
};

// The MLP layers as (in, out) pairs.
std::vector<std::pair<double, double>> layers(double in, const std::vector<double>& widths) {
  std::vector<std::pair<double, double>> l;
  for (double out : widths) l.emplace_back(in, out), in = out;
  return l;
}

}  // namespace

double micro_batches(const Workload& w, const Config& c) { return w.training.global_batch / (c.batch_per_gpu * c.gpus); }

double dense_flops_per_sample(const Workload& w) {
  double f = 0;
  for (const auto& l : layers(w.dense.features, w.dense.bottom_mlp)) f += 2 * l.first * l.second;
  for (const auto& l : layers(interaction_width(w), w.dense.top_mlp)) f += 2 * l.first * l.second;
  if (w.dense.interaction == Interaction::kDot) {
    const double F = static_cast<double>(w.tables.size()) + 1;
    f += 2 * F * F * bottom_output(w);
  }
  return 3 * f;
}

void lower_config(const Workload& w, const Config& c, const cotune_hardware& hw, const Plan& plan,
                  std::vector<cotune_op>& ops, cotune_trace& trace) {
  const int32_t F = COTUNE_PHASE_FORWARD, B = COTUNE_PHASE_BACKWARD, S = COTUNE_PHASE_STEP;
  const double b = c.batch_per_gpu;
  const double wb = dense_weight_bytes(w);
  const double P = dense_params(w);
  const double host_factor = hw.hbm_bytes_per_s / w.host_link_bytes_per_s;
  const GpuLoad& g = plan.gpu[plan.critical];
  double max_send = 0, max_ids = 0, max_twrw = 0;
  for (const GpuLoad& x : plan.gpu)
    max_send = std::max(max_send, x.out_send), max_ids = std::max(max_ids, x.id_recv),
    max_twrw = std::max(max_twrw, x.twrw_reduce);
  const double input_bytes = std::max(plan.id_send, max_ids);
  const double output_bytes = std::max(plan.out_recv, max_send);
  const bool fsdp = c.dense_parallel == DenseParallel::kFsdp;
  const bool prefetch = c.pipeline == Pipeline::kPrefetch;
  const auto bottom = layers(w.dense.features, w.dense.bottom_mlp);
  const auto top = layers(interaction_width(w), w.dense.top_mlp);
  const double Fn = static_cast<double>(w.tables.size()) + 1;

  Builder t(ops, hw, c.gpus, w.training.dtype);
  // Forward. With prefetch_sparse the ids of the next batch travel on a communication stream while
  // this batch computes (TorchRec TrainPipelineSparseDist); plain waits for them.
  t.global(F, prefetch ? COTUNE_STREAM_COMM : COTUNE_STREAM_COMPUTE, "sparse_input_a2a", COTUNE_COLL_ALL_TO_ALL,
           COTUNE_GROUP_EMB, input_bytes);
  if (fsdp) t.global(F, COTUNE_STREAM_COMM + 1, "fsdp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP, P * wb);
  t.memory(F, "emb_lookup", g.lookup_bytes + plan.dp_lookup_bytes);
  t.memory(F, "emb_host_fetch", g.host_bytes * host_factor);
  t.node(F, "twrw_reduce_scatter", COTUNE_COLL_REDUCE_SCATTER, max_twrw);
  t.global(F, COTUNE_STREAM_COMPUTE, "rw_reduce_scatter", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_EMB, plan.rw_reduce);
  t.global(F, COTUNE_STREAM_COMPUTE, "pooled_output_a2a", COTUNE_COLL_ALL_TO_ALL, COTUNE_GROUP_EMB, output_bytes);
  for (const auto& l : bottom) {
    t.gemm(F, "bottom_mlp", b, l.second, l.first);
    t.memory(F, "bottom_relu", b * l.second * wb * 2);
  }
  if (w.dense.interaction == Interaction::kDot) {
    t.memory(F, "interaction_gather", b * Fn * bottom_output(w) * wb * 2);
    t.gemm(F, "interaction_dot", b * Fn, Fn, bottom_output(w));
  }
  t.memory(F, "interaction_concat", b * interaction_width(w) * wb * 2);
  for (const auto& l : top) {
    t.gemm(F, "top_mlp", b, l.second, l.first);
    t.memory(F, "top_relu", b * l.second * wb * 2);
  }

  // Backward: top MLP, interaction, bottom MLP, then the embedding gradients back to their shards.
  for (auto it = top.rbegin(); it != top.rend(); ++it) {
    t.memory(B, "top_relu_grad", b * it->second * wb * 3);
    t.gemm(B, "top_mlp_dgrad", b, it->first, it->second);
    t.gemm(B, "top_mlp_wgrad", it->first, it->second, b);
  }
  if (w.dense.interaction == Interaction::kDot) {
    t.gemm(B, "interaction_dot_grad", b * Fn, bottom_output(w), Fn);
    t.gemm(B, "interaction_dot_grad", b * Fn, bottom_output(w), Fn);
  }
  t.memory(B, "interaction_grad", b * interaction_width(w) * wb * 2);
  for (auto it = bottom.rbegin(); it != bottom.rend(); ++it) {
    t.memory(B, "bottom_relu_grad", b * it->second * wb * 3);
    t.gemm(B, "bottom_mlp_dgrad", b, it->first, it->second);
    t.gemm(B, "bottom_mlp_wgrad", it->first, it->second, b);
  }
  if (fsdp) {
    const int32_t gather =
        t.global(B, COTUNE_STREAM_COMM + 1, "fsdp_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_DP, P * wb);
    t.global(B, COTUNE_STREAM_COMM + 1, "fsdp_reduce_scatter", COTUNE_COLL_REDUCE_SCATTER, COTUNE_GROUP_DP, P * wb,
             gather);
  }
  t.global(B, COTUNE_STREAM_COMPUTE, "pooled_grad_a2a", COTUNE_COLL_ALL_TO_ALL, COTUNE_GROUP_EMB, output_bytes);
  t.global(B, COTUNE_STREAM_COMPUTE, "rw_grad_allgather", COTUNE_COLL_ALL_GATHER, COTUNE_GROUP_EMB, plan.rw_reduce);
  t.node(B, "twrw_grad_allgather", COTUNE_COLL_ALL_GATHER, max_twrw);
  t.memory(B, "emb_backward", g.backward_bytes + plan.dp_backward_bytes);
  t.memory(B, "emb_fused_update", g.update_bytes, COTUNE_OP_OPTIMIZER);
  t.memory(B, "emb_host_update", g.update_host_bytes * host_factor, COTUNE_OP_OPTIMIZER);

  // Once per step: gradients of the dense part and of the replicated tables, then their optimizers.
  const double dense_grads = fsdp ? 0 : P * wb;
  const int32_t reduced = t.global(S, COTUNE_STREAM_COMM, "dense_grad_allreduce", COTUNE_COLL_ALL_REDUCE,
                                   COTUNE_GROUP_DP, dense_grads + plan.dp_grad_bytes);
  const double local = fsdp ? P / c.gpus : P;
  const double per_param = w.training.dense_optimizer == DenseOptimizer::kAdam ? 3 * wb + 16 : 3 * wb;
  const int32_t opt = t.memory(S, "dense_optimizer", local * (per_param + (wb == 2 ? 8 : 0)), COTUNE_OP_OPTIMIZER,
                               reduced);
  t.memory(S, "replicated_table_update", plan.dp_update_bytes, COTUNE_OP_OPTIMIZER, std::max(opt, reduced));

  trace = cotune_trace{};
  trace.struct_size = COTUNE_STRUCT_SIZE(cotune_trace, hardware);
  trace.ops = ops.data();
  trace.num_ops = ops.size();
  trace.op_stride = sizeof(cotune_op);
  trace.schedule = COTUNE_SCHEDULE_1F1B;
  trace.pipeline_stages = 1;
  trace.virtual_stages = 1;
  trace.micro_batches = static_cast<int32_t>(micro_batches(w, c));
  trace.tokens_per_step = w.training.global_batch;  // samples: tokens_per_s reads as samples/s
  trace.model_flops_per_gpu = dense_flops_per_sample(w) * b * micro_batches(w, c);
  trace.gpus = c.gpus;
  trace.memory = dense_memory(w, c);
  trace.memory.weights += plan.max_hbm - plan.dp_grad_hbm;
  trace.memory.gradients += plan.dp_grad_hbm;
  trace.hardware = hw;
}

}  // namespace cotune_recsys
