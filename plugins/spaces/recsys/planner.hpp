// The deterministic sharding planner: turns a configuration into a placement of every embedding
// table shard on a GPU, greedy by estimated cost (largest first, onto the least loaded GPU that has
// room), and the per-GPU loads and communication volumes that the lowering and the features use.
// All volumes are per micro-batch (batch_per_gpu samples on each GPU).
#ifndef COTUNE_PLUGINS_SPACES_RECSYS_PLANNER_HPP_
#define COTUNE_PLUGINS_SPACES_RECSYS_PLANNER_HPP_

#include <cotune/cotune.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config.hpp"
#include "workload.hpp"

namespace cotune_recsys {

// What the planner needs of the cluster.
struct PlanTarget {
  double gpus = 0;               // GPUs the job uses
  double gpus_per_node = 0;
  double hbm_budget = 0;         // HBM per GPU left for embeddings after the dense part (bytes)
  double host_bytes_per_node = 0;
  double host_cost_factor = 0;   // HBM bandwidth / host link bandwidth: a host byte costs this many HBM bytes
};

struct Shard {
  uint32_t table = 0;
  Sharding type = Sharding::kTableWise;
  double row_offset = 0, rows = 0, col_offset = 0, cols = 0;
  int32_t rank = -1;  // -1: every rank (data parallel)
};

// Per GPU, per micro-batch.
struct GpuLoad {
  double lookup_bytes = 0;   // forward: HBM bytes read and written by the lookups
  double host_bytes = 0;     // forward: bytes fetched from host memory (cache misses)
  double backward_bytes = 0; // backward: gradient expansion (HBM)
  double update_bytes = 0;   // fused optimizer: rows touched, HBM
  double update_host_bytes = 0;
  double hbm = 0;            // embedding storage and optimizer state on the GPU
  double host = 0;           // embedding storage in host memory (offload)
  double id_recv = 0;        // sparse ids received by the input all-to-all
  double out_send = 0;       // pooled embeddings sent by the output all-to-all
  double twrw_reduce = 0;    // partial sums reduce-scattered inside the node (table-row-wise)
  double cost = 0;           // the balance objective's value
  double time_bytes() const;  // forward + backward + update, host bytes weighted by the host cost factor
  double host_factor = 0;
};

struct Plan {
  bool ok = false;
  std::string why;  // the reason when !ok
  std::vector<Shard> shards;
  std::vector<GpuLoad> gpu;
  // Replicated (data-parallel) tables: the same on every GPU.
  double dp_hbm = 0, dp_lookup_bytes = 0, dp_backward_bytes = 0, dp_update_bytes = 0, dp_grad_bytes = 0;
  // Their dense gradients (DDP keeps one as large as the table, in its precision: the bytes
  // dp_grad_bytes all-reduces): HBM on every GPU beside dp_hbm, counted as gradients.
  double dp_grad_hbm = 0;
  double id_send = 0;      // per GPU: the ids of its samples for every sharded table
  double out_recv = 0;     // per GPU: pooled embeddings of its samples from table/column/table-row-wise shards
  double rw_reduce = 0;    // per GPU: partial sums of row-wise tables (reduce-scatter over all GPUs)
  size_t sharded_tables = 0, replicated_tables = 0;
  size_t critical = 0;     // the GPU whose lookups take longest (the step waits for it)
  double max_time_bytes = 0, mean_time_bytes = 0;
  double max_hbm = 0;      // largest per-GPU embedding HBM (replicated tables and their gradients included)
  double max_host_per_node = 0;
  double imbalance() const { return mean_time_bytes > 0 ? max_time_bytes / mean_time_bytes : 1; }
};

// How a table is sharded under a configuration (data parallel, the large-table type, or table-wise).
Sharding classify(const Table& t, const Config& c);

// Bytes per row of a table's optimizer state (row-wise Adagrad keeps one fp32 per row).
double optimizer_bytes_per_row(const Workload& w);

// Plans into `plan` (reusing its storage). Never throws for a placement that does not fit: it sets
// plan.ok = false and plan.why.
void make_plan(const Workload& w, const Config& c, const PlanTarget& target, Plan& plan);

// TorchRec's shard geometry (../shared/data/frameworks/torchrec_plan.md section 3), which the planner
// follows so that the exported plan is the one modelled:
// - a row split of `rows` over n ranks: blocks of ceil(rows / n), the first ranks a full block, one
//   rank the remainder, any later ranks 0 rows. Rows of shard k (0 <= k < n) and its first row.
double row_block_rows(double rows, double n, double k);
double row_block_offset(double rows, double n, double k);
// - a column block: the smallest width >= min_partition that divides dim and is a multiple of 4,
//   else dim (one block).
double column_block_width(double dim, double min_partition);

}  // namespace cotune_recsys

#endif
