// Rendering of configurations (see render.hpp).
#include "render.hpp"

#include <nlohmann/json.hpp>

#include <vector>

namespace cotune_recsys {

using nlohmann::json;

std::string render_json(const double* v) {
  const Config c = Config::decode(v);
  json j;
  j["large_table_sharding"] = kShardingNames[static_cast<int>(c.large_sharding)];
  j["large_table_rows"] = v[kLargeRows];
  j["column_split"] = v[kColumnSplit];
  j["replicate_below_mib"] = v[kReplicateMib];
  j["balance"] = kBalanceNames[static_cast<int>(c.balance)];
  j["emb_precision"] = kEmbPrecisionNames[c.emb_precision];
  j["a2a_precision"] = kA2aPrecisionNames[c.a2a_precision];
  j["offload"] = c.offload;
  j["cache_percent"] = v[kCachePercent];
  j["batch_per_gpu"] = v[kBatchPerGpu];
  j["pipeline"] = kPipelineNames[static_cast<int>(c.pipeline)];
  j["dense_parallel"] = kDenseParallelNames[static_cast<int>(c.dense_parallel)];
  j["gpus"] = v[kGpus];
  return j.dump();
}

std::string render_torchrec(const Workload& w, const Config& c, const Plan& plan, double gpus_per_node) {
  static const char* const kDataType[3] = {"FP32", "FP16", "INT8"};
  const size_t G = static_cast<size_t>(c.gpus);
  // Shards of each table, in the planner's order.
  std::vector<std::vector<const Shard*>> by_table(w.tables.size());
  for (const Shard& s : plan.shards) by_table[s.table].push_back(&s);
  json tables = json::object();
  for (size_t i = 0; i < w.tables.size(); ++i) {
    const Table& t = w.tables[i];
    const std::vector<const Shard*>& shards = by_table[i];
    json entry;
    const Sharding type = shards.front()->type;
    entry["sharding_type"] = sharding_name(type);
    const bool dp = type == Sharding::kDataParallel;
    entry["compute_kernel"] = dp ? "dense" : c.offload ? "fused_uvm_caching" : "fused";
    json ranks = json::array(), spec = json::array();
    if (dp) {
      for (size_t g = 0; g < G; ++g) ranks.push_back(g);
    } else {
      for (const Shard* s : shards) {
        ranks.push_back(s->rank);
        spec.push_back({{"shard_offsets", {s->row_offset, s->col_offset}},
                        {"shard_sizes", {s->rows, s->cols}},
                        {"placement", "rank:" + std::to_string(s->rank) + "/cuda:" +
                                          std::to_string(s->rank % static_cast<int32_t>(gpus_per_node))}});
      }
    }
    entry["ranks"] = ranks;
    entry["sharding_spec"] = dp ? json(nullptr) : spec;
    entry["data_type"] = kDataType[c.emb_precision];
    entry["num_embeddings"] = t.rows;
    entry["embedding_dim"] = t.dim;
    if (c.offload) entry["cache_load_factor"] = c.cache_ratio;
    tables[t.name] = entry;
  }
  const char* a2a = c.a2a_precision == 0 ? "FP32" : "FP16";
  json out = {{"world_size", G},
              {"batch_per_gpu", c.batch_per_gpu},
              {"pipeline", c.pipeline == Pipeline::kPrefetch ? "TrainPipelineSparseDist" : "TrainPipelineBase"},
              {"dense_parallel", c.dense_parallel == DenseParallel::kFsdp ? "FullyShardedDataParallel"
                                                                          : "DistributedDataParallel"},
              {"qcomms", {{"forward_precision", a2a}, {"backward_precision", a2a}}},
              {"plan", {{"model.sparse_arch.embedding_bag_collection", tables}}}};
  return out.dump();
}

}  // namespace cotune_recsys
