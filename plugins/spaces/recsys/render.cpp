// Rendering of configurations (see render.hpp).
#include "render.hpp"

#include "lowering.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace cotune_recsys {

using nlohmann::json;

namespace {

// A whole value as a JSON integer (4096, not 4096.0), any other as a number.
json number(double v) {
  if (std::fabs(v) < 9e15 && v == std::floor(v)) return static_cast<int64_t>(v);
  return v;
}

}  // namespace

std::string render_json(const double* v) {
  const Config c = Config::decode(v);
  json j;
  j["large_table_sharding"] = kShardingNames[static_cast<int>(c.large_sharding)];
  j["large_table_rows"] = number(v[kLargeRows]);
  j["column_split"] = number(v[kColumnSplit]);
  j["replicate_below_mib"] = number(v[kReplicateMib]);
  j["balance"] = kBalanceNames[static_cast<int>(c.balance)];
  j["emb_precision"] = kEmbPrecisionNames[c.emb_precision];
  j["a2a_precision"] = kA2aPrecisionNames[c.a2a_precision];
  j["offload"] = c.offload;
  j["cache_percent"] = number(v[kCachePercent]);
  j["batch_per_gpu"] = number(v[kBatchPerGpu]);
  j["pipeline"] = kPipelineNames[static_cast<int>(c.pipeline)];
  j["dense_parallel"] = kDenseParallelNames[static_cast<int>(c.dense_parallel)];
  j["gpus"] = number(v[kGpus]);
  return j.dump();
}

namespace {

// One shard of a table in the exported plan: integer geometry, the rank that holds it.
struct Block {
  int64_t row_offset = 0, rows = 0, col_offset = 0, cols = 0;
  int64_t rank = 0;
};

int64_t integer(double x) { return static_cast<int64_t>(std::llround(x)); }

// The shards of one table as the plan lists them: the planner's, which follow TorchRec's geometry
// (planner.hpp: ceil row blocks, column blocks of TorchRec's width), in TorchRec's order (by offset).
std::vector<Block> export_blocks(const std::vector<const Shard*>& shards) {
  std::vector<Block> out;
  for (const Shard* s : shards)
    out.push_back({integer(s->row_offset), integer(s->rows), integer(s->col_offset), integer(s->cols), s->rank});
  std::sort(out.begin(), out.end(), [](const Block& a, const Block& b) {
    return a.row_offset != b.row_offset ? a.row_offset < b.row_offset : a.col_offset < b.col_offset;
  });
  return out;
}

}  // namespace

std::string render_torchrec(const Workload& w, const Config& c, const Plan& plan, double gpus_per_node) {
  static const char* const kDataType[3] = {"FP32", "FP16", "INT8"};
  const int64_t world = integer(c.gpus);
  // Ranks per host as torchrun starts them: a job smaller than a node runs all its ranks on one host.
  const int64_t local = std::max<int64_t>(1, std::min(world, integer(gpus_per_node)));
  // Shards of each table, in the planner's order.
  std::vector<std::vector<const Shard*>> by_table(w.tables.size());
  for (const Shard& s : plan.shards) by_table[s.table].push_back(&s);
  json tables = json::object(), configs = json::object();
  bool uvm_caching = false;
  for (size_t i = 0; i < w.tables.size(); ++i) {
    const Table& t = w.tables[i];
    const std::vector<const Shard*>& shards = by_table[i];
    const Sharding type = shards.front()->type;
    const bool dp = type == Sharding::kDataParallel;
    // Allowed combinations (torchrec_plan.md section 4): data_parallel only with dense; the other types
    // fused in HBM, or fused_uvm_caching (host memory with an HBM cache) when offloaded.
    const char* kernel = dp ? "dense" : c.offload ? "fused_uvm_caching" : "fused";
    uvm_caching = uvm_caching || (!dp && c.offload);
    // ParameterSharding as ShardingPlan._serialize writes it: these four keys and no others.
    json entry = json::object();
    entry["sharding_type"] = sharding_name(type);
    entry["compute_kernel"] = kernel;
    json ranks = json::array();
    if (dp) {
      for (int64_t r = 0; r < world; ++r) ranks.push_back(r);
      entry["ranks"] = ranks;
    } else {
      json list = json::array();
      for (const Block& b : export_blocks(shards)) {
        ranks.push_back(b.rank);
        list.push_back({{"shard_offsets", {b.row_offset, b.col_offset}},
                        {"shard_sizes", {b.rows, b.cols}},
                        {"placement", "rank:" + std::to_string(b.rank) + "/cuda:" + std::to_string(b.rank % local)}});
      }
      entry["ranks"] = ranks;
      entry["shards"] = list;
    }
    tables[t.name] = entry;
    // The table as the plan assumes it (TorchRec's EmbeddingBagConfig fields), for checking the model.
    configs[t.name] = {{"num_embeddings", integer(t.rows)}, {"embedding_dim", integer(t.dim)},
                       {"data_type", kDataType[c.emb_precision]}};
  }
  // The sharder's fused parameters: the cache size only matters for fused_uvm_caching tables.
  json fused = json::object();
  if (uvm_caching) fused["cache_load_factor"] = c.cache_ratio;
  const char* a2a = c.a2a_precision == 0 ? "FP32" : "FP16";
  json out = json::object();
  out["plan"] = {{"model.sparse_arch.embedding_bag_collection", tables}};
  out["fused_params"] = fused;
  out["world_size"] = world;
  out["local_world_size"] = local;
  // Run settings of ours that are not part of TorchRec's plan.
  // The step the model timed: micro_batches_per_step batches of batch_per_gpu on every GPU, their
  // gradients accumulated before one optimizer step (global_batch samples in all).
  out["cotune"] = {
      {"batch_per_gpu", integer(c.batch_per_gpu)},
      {"micro_batches_per_step", integer(micro_batches(w, c))},
      {"global_batch", integer(w.training.global_batch)},
      {"pipeline", c.pipeline == Pipeline::kPrefetch ? "TrainPipelineSparseDist" : "TrainPipelineBase"},
      {"dense_parallel",
       c.dense_parallel == DenseParallel::kFsdp ? "FullyShardedDataParallel" : "DistributedDataParallel"},
      {"qcomms", {{"forward_precision", a2a}, {"backward_precision", a2a}}},
      {"tables", configs}};
  return out.dump();
}

}  // namespace cotune_recsys
