// One configuration of the recsys space: the parameter order of a configuration array and its
// decoded form.
#ifndef COTUNE_PLUGINS_SPACES_RECSYS_CONFIG_HPP_
#define COTUNE_PLUGINS_SPACES_RECSYS_CONFIG_HPP_

#include <cstddef>

namespace cotune_recsys {

enum ParamIndex : size_t {
  kSharding,       // how tables above large_table_rows are sharded
  kLargeRows,      // the row count above which a table is "large"
  kColumnSplit,    // column shard width for column-wise sharding
  kReplicateMib,   // tables under this size are replicated (data parallel)
  kBalance,        // placement objective
  kEmbPrecision,   // embedding storage precision
  kA2aPrecision,   // precision of the pooled-embedding all-to-alls
  kOffload,        // embeddings in host memory with an HBM cache
  kCachePercent,   // HBM cache size, percent of each offloaded table's rows
  kBatchPerGpu,    // samples per GPU per micro-batch
  kPipeline,       // plain, or prefetching the next batch's sparse input all-to-all
  kDenseParallel,  // DDP or FSDP for the dense part
  kGpus,           // GPUs the job uses
  kNumParams
};

enum class Sharding { kTableWise, kRowWise, kColumnWise, kTableRowWise, kDataParallel };
enum class Balance { kLookups, kMemory, kMix };
enum class Pipeline { kPlain, kPrefetch };
enum class DenseParallel { kDdp, kFsdp };

extern const char* const kParamNames[kNumParams];
extern const char* const kShardingNames[4];  // the choices of large_table_sharding
extern const char* const kBalanceNames[3];
extern const char* const kEmbPrecisionNames[3];  // fp32, fp16, int8
extern const char* const kA2aPrecisionNames[2];  // fp32, fp16
extern const char* const kPipelineNames[2];
extern const char* const kDenseParallelNames[2];

// The TorchRec name of a sharding type ("table_wise", ..., "data_parallel").
const char* sharding_name(Sharding s);

struct Config {
  Sharding large_sharding = Sharding::kTableWise;
  double large_rows = 0;
  double column_split = 0;
  double replicate_bytes = 0;
  Balance balance = Balance::kLookups;
  int emb_precision = 0;  // index into kEmbPrecisionNames
  int a2a_precision = 0;  // index into kA2aPrecisionNames
  bool offload = false;
  double cache_ratio = 0;
  double batch_per_gpu = 0;
  Pipeline pipeline = Pipeline::kPlain;
  DenseParallel dense_parallel = DenseParallel::kDdp;
  double gpus = 0;

  double emb_bytes() const { return emb_precision == 0 ? 4 : emb_precision == 1 ? 2 : 1; }
  double a2a_bytes() const { return a2a_precision == 0 ? 4 : 2; }

  static Config decode(const double* v);
};

}  // namespace cotune_recsys

#endif
