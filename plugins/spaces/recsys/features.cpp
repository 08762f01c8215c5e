// Derived features (see features.hpp).
#include "features.hpp"

#include "lowering.hpp"
#include "memory.hpp"

namespace cotune_recsys {

const char* const kDerivedFeatures[] = {
    "micro_batches",        "max_gpu_lookup_mib", "mean_gpu_lookup_mib", "imbalance",
    "a2a_mib_node",         "a2a_mib_cluster",    "a2a_mib_island",      "memory_headroom_gib",
    "peak_memory_gib",      "embedding_gib",      "dense_gflops_per_gpu", "sharded_tables",
    "replicated_tables"};
const size_t kNumDerived = sizeof(kDerivedFeatures) / sizeof(kDerivedFeatures[0]);

void derived_features(const Workload& w, const Config& c, const Plan& plan, const cotune_trace& t, double* f) {
  constexpr double MiB = 1048576.0, GiB = 1073741824.0;
  const double m = t.micro_batches;
  double a2a[COTUNE_NET_LEVELS] = {0, 0, 0};
  for (size_t i = 0; i < t.num_ops; ++i) {
    const cotune_op& op = t.ops[i];
    if (op.kind == COTUNE_OP_COLLECTIVE && op.group == COTUNE_GROUP_EMB)
      a2a[op.net_level] += op.count * op.bytes * (op.phase == COTUNE_PHASE_STEP ? 1 : m);
  }
  double emb = 0;
  for (const Table& x : w.tables) emb += x.rows * x.dim * c.emb_bytes();
  const double peak = total(t.memory);
  f[0] = m;
  f[1] = plan.max_time_bytes / MiB;
  f[2] = plan.mean_time_bytes / MiB;
  f[3] = plan.imbalance();
  f[4] = a2a[COTUNE_NET_NODE] / MiB;
  f[5] = a2a[COTUNE_NET_CLUSTER] / MiB;
  f[6] = a2a[COTUNE_NET_ISLAND] / MiB;
  f[7] = (t.hardware.hbm_bytes - peak) / GiB;
  f[8] = peak / GiB;
  f[9] = emb / GiB;
  f[10] = t.model_flops_per_gpu / 1e9;
  f[11] = static_cast<double>(plan.sharded_tables);
  f[12] = static_cast<double>(plan.replicated_tables);
}

}  // namespace cotune_recsys
