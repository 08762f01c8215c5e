// Parameter names and the decoding of a configuration array (see config.hpp).
#include "config.hpp"

namespace cotune_recsys {

const char* const kParamNames[kNumParams] = {
    "large_table_sharding", "large_table_rows", "column_split", "replicate_below_mib", "balance",
    "emb_precision",        "a2a_precision",    "offload",      "cache_percent",       "batch_per_gpu",
    "pipeline",             "dense_parallel",   "gpus"};
const char* const kShardingNames[4] = {"table_wise", "row_wise", "column_wise", "table_row_wise"};
const char* const kBalanceNames[3] = {"lookups", "memory", "mix"};
const char* const kEmbPrecisionNames[3] = {"fp32", "fp16", "int8"};
const char* const kA2aPrecisionNames[2] = {"fp32", "fp16"};
const char* const kPipelineNames[2] = {"plain", "prefetch_sparse"};
const char* const kDenseParallelNames[2] = {"ddp", "fsdp"};

const char* sharding_name(Sharding s) {
  switch (s) {
    case Sharding::kTableWise: return "table_wise";
    case Sharding::kRowWise: return "row_wise";
    case Sharding::kColumnWise: return "column_wise";
    case Sharding::kTableRowWise: return "table_row_wise";
    default: return "data_parallel";
  }
}

Config Config::decode(const double* v) {
  Config c;
  c.large_sharding = static_cast<Sharding>(static_cast<int>(v[kSharding]));
  c.large_rows = v[kLargeRows];
  c.column_split = v[kColumnSplit];
  c.replicate_bytes = v[kReplicateMib] * 1048576.0;
  c.balance = static_cast<Balance>(static_cast<int>(v[kBalance]));
  c.emb_precision = static_cast<int>(v[kEmbPrecision]);
  c.a2a_precision = static_cast<int>(v[kA2aPrecision]);
  c.offload = v[kOffload] != 0;
  c.cache_ratio = v[kCachePercent] / 100.0;
  c.batch_per_gpu = v[kBatchPerGpu];
  c.pipeline = static_cast<Pipeline>(static_cast<int>(v[kPipeline]));
  c.dense_parallel = static_cast<DenseParallel>(static_cast<int>(v[kDenseParallel]));
  c.gpus = v[kGpus];
  return c;
}

}  // namespace cotune_recsys
