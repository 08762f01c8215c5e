/*
 * cotune.h - the stable C ABI between the cotune host and its plugins.
 *
 * This header is the whole contract. A plugin is a shared library that exports exactly one symbol,
 * cotune_plugin_entry_v1, and describes the components it offers (search spaces, predictors,
 * searchers, executors) through the tables below. It is C99 and depends on nothing but the C library.
 *
 * A field or function added after 1.0 says so where it is declared ("1.2: ..."); sdk/CHANGELOG.md lists
 * them by minor version.
 *
 * Rules (docs/ABI.md explains each):
 *  1. Every struct that crosses the boundary starts with `size_t struct_size`, set by whoever fills
 *     it to COTUNE_STRUCT_SIZE(type, last_field). Structs are append-only. A reader looks at a field
 *     only when COTUNE_HAS_FIELD(p, field) says the writer knew it. A NULL function pointer, or one
 *     beyond struct_size, means "not supported".
 *  2. Fields are fixed width: int32_t, uint32_t, uint64_t, size_t, double, pointers and cotune_str.
 *     No bool, long, enums, bitfields or varargs. Enumerations are #defined int32_t constants.
 *  3. Versions: a plugin reports the COTUNE_ABI_MAJOR/MINOR it was built with. The host refuses
 *     another major and accepts every minor.
 *  4. Opaque handles: whoever creates a handle destroys it; every destroy function accepts NULL.
 *  5. Errors are objects (cotune_error). A function returns NULL on success. The receiver of an error
 *     frees it with err->destroy(err). No C++ exception may cross the boundary.
 *  6. Memory: whoever allocates frees. Variable-length outputs go through a caller-provided
 *     cotune_sink; fixed-size bulk outputs go into caller-owned buffers of stated capacity.
 *     Strings are (pointer, length) pairs, UTF-8, not necessarily NUL-terminated.
 *  7. Threading: an instance is used by one thread at a time unless its component sets
 *     COTUNE_CAP_THREAD_SAFE. The host services table may be called from any thread.
 */
#ifndef COTUNE_COTUNE_H_
#define COTUNE_COTUNE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Versions, sizes, visibility                                                                    */
/* ---------------------------------------------------------------------------------------------- */

#define COTUNE_ABI_MAJOR 1
#define COTUNE_ABI_MINOR 10

/* Size of a struct up to and including `last_field`: what a writer stores in struct_size.
 * COTUNE_HAS_FIELD: nonzero when the struct behind `p` was written by someone who knew `field`.
 * COTUNE_ASSERT_LAST_FIELD: a compile-time check that `last_field` is the last field of `type`
 * (only tail padding may follow it; the golden layout test in tests/abi checks offsets exactly).
 * C++11 and later get the same macros in C++ casts, so that -Wold-style-cast and
 * -Wzero-as-null-pointer-constant builds of a plugin stay quiet. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define COTUNE_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(static_cast<type*>(nullptr)->last_field)) /* NOLINT(bugprone-macro-parentheses): a type in a cast */
#define COTUNE_HAS_FIELD(p, field)                                                                  \
  ((p) != nullptr && static_cast<size_t>(reinterpret_cast<const char*>(&(p)->field) -               \
                                         reinterpret_cast<const char*>(p)) + sizeof((p)->field) <= \
                         (p)->struct_size)
#define COTUNE_ASSERT_LAST_FIELD(type, last_field) \
  static_assert(sizeof(type) - COTUNE_STRUCT_SIZE(type, last_field) < sizeof(void*),              \
                "COTUNE_ASSERT_LAST_FIELD: " #last_field " is not the last field of " #type)
#else
#define COTUNE_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)0)->last_field))
#define COTUNE_HAS_FIELD(p, field)                                                       \
  ((p) != NULL && (size_t)((const char*)&(p)->field - (const char*)(p)) + sizeof((p)->field) <= \
                      (p)->struct_size)
/* C99 has no _Static_assert: a negative array size fails the build instead. */
#define COTUNE_ASSERT_LAST_FIELD(type, last_field)                                        \
  typedef char cotune_last_field_check_##type[(sizeof(type) - COTUNE_STRUCT_SIZE(type, last_field) < \
                                               sizeof(void*)) ? 1 : -1]
#endif

#if defined(_WIN32)
#define COTUNE_EXPORT __declspec(dllexport)
#else
#define COTUNE_EXPORT __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Strings, sinks and errors                                                                      */
/* ---------------------------------------------------------------------------------------------- */

/* A UTF-8 string by pointer and length. `data` need not be NUL-terminated. Its lifetime is stated
 * where it is returned. */
typedef struct cotune_str {
  const char* data;
  size_t len;
} cotune_str;

/* A byte sink the caller provides for variable-length output (JSON, text, saved state). The callee
 * calls write() any number of times; the bytes are copied before write() returns. write() returns 0
 * on success, nonzero when the caller cannot take more (the callee should then stop and return an
 * error). */
typedef struct cotune_sink {
  size_t struct_size;
  void* ctx;
  int32_t (*write)(void* ctx, const char* data, size_t len);
} cotune_sink;
COTUNE_ASSERT_LAST_FIELD(cotune_sink, write);

#define COTUNE_OK 0
#define COTUNE_ERR_INVALID_ARGUMENT 1 /* bad input: options, JSON, dimensions, values */
#define COTUNE_ERR_NOT_FOUND 2        /* a named thing (GPU, preset, file, job) does not exist */
#define COTUNE_ERR_UNSUPPORTED 3      /* the capability is not offered */
#define COTUNE_ERR_UNAVAILABLE 4      /* a resource (device, cluster, agent) cannot be reached */
#define COTUNE_ERR_FAILED_PRECONDITION 5 /* called in the wrong state (predict before fit, ...) */
#define COTUNE_ERR_RESOURCE_EXHAUSTED 6  /* out of memory, capacity, buffer space */
#define COTUNE_ERR_INTERNAL 7         /* a bug or an unexpected exception */
#define COTUNE_ERR_CANCELLED 8
#define COTUNE_ERR_VERSION 9          /* incompatible ABI or data version */

/* An error. Created by whoever fails (usually through cotune_host.error_new) and freed by whoever
 * receives it, by calling err->destroy(err). `message` lives until destroy. */
typedef struct cotune_error {
  size_t struct_size;
  int32_t code;
  cotune_str message;
  void (*destroy)(struct cotune_error* err);
} cotune_error;
COTUNE_ASSERT_LAST_FIELD(cotune_error, destroy);

/* ---------------------------------------------------------------------------------------------- */
/* Enumerations                                                                                   */
/* ---------------------------------------------------------------------------------------------- */

/* Component kinds. */
#define COTUNE_KIND_SPACE 1
#define COTUNE_KIND_PREDICTOR 2
#define COTUNE_KIND_SEARCHER 3
#define COTUNE_KIND_EXECUTOR 4

/* Capability flags of a component (cotune_component.capabilities). */
#define COTUNE_CAP_THREAD_SAFE (1u << 0)   /* instances may be called from several threads at once */
#define COTUNE_CAP_LOWER_TRACE (1u << 1)   /* space: lower() produces step traces */
#define COTUNE_CAP_RENDER_ARGS (1u << 2)   /* space: render() knows launch formats */
#define COTUNE_CAP_PREDICT_STD (1u << 3)   /* predictor: predict() fills a standard deviation */
#define COTUNE_CAP_SAVE_STATE (1u << 4)    /* predictor/searcher: save() and load() work */
#define COTUNE_CAP_ATTACH (1u << 5)        /* executor: attach() re-follows jobs after a restart */
#define COTUNE_CAP_NEEDS_TRACE (1u << 6)   /* executor: submit() requires a step trace */
#define COTUNE_CAP_CANDIDATES (1u << 7)    /* 1.1, executor: candidates() lists all it can answer */

/* Log levels for cotune_host.log. */
#define COTUNE_LOG_DEBUG 0
#define COTUNE_LOG_INFO 1
#define COTUNE_LOG_WARN 2
#define COTUNE_LOG_ERROR 3

/* Parameter types. Every configuration is an array of doubles, one per parameter:
 *  INT: the integer value; FLOAT: the value; CATEGORICAL: the index into choices; BOOL: 0 or 1. */
#define COTUNE_PARAM_INT 1
#define COTUNE_PARAM_FLOAT 2
#define COTUNE_PARAM_CATEGORICAL 3
#define COTUNE_PARAM_BOOL 4

/* Parameter flags. */
#define COTUNE_PARAM_LOG_SCALE (1u << 0) /* INT/FLOAT: the domain is best explored in log space */
#define COTUNE_PARAM_OPTIONAL (1u << 1)  /* 1.2: added to its space after configurations were stored: a
                                            stored configuration or a table of runs may leave it out (it
                                            takes its default), and the host's key of a configuration
                                            leaves it out at its default, so keys stored before it stay */

/* Trial statuses (cotune_trial_result.status). */
#define COTUNE_STATUS_PENDING 0   /* queued, not yet running */
#define COTUNE_STATUS_RUNNING 1
#define COTUNE_STATUS_OK 2
#define COTUNE_STATUS_FAILED 3
#define COTUNE_STATUS_OOM 4
#define COTUNE_STATUS_TIMEOUT 5
#define COTUNE_STATUS_CANCELLED 6
#define COTUNE_STATUS_UNAVAILABLE 7 /* the executor cannot answer this configuration (replay miss) */

/* Data types of compute ops and peak-FLOP/s entries (cotune_hardware.peak_flops). */
#define COTUNE_DTYPE_FP32 0
#define COTUNE_DTYPE_TF32 1
#define COTUNE_DTYPE_BF16 2
#define COTUNE_DTYPE_FP16 3
#define COTUNE_DTYPE_FP8 4
#define COTUNE_DTYPE_COUNT 5 /* entries of cotune_hardware.peak_flops (fp32 .. fp8) */
#define COTUNE_DTYPE_FP4 5   /* 1.2: NVFP4/MXFP4 GEMMs; its peak is cotune_hardware.peak_flops_fp4 */

/* ---------------------------------------------------------------------------------------------- */
/* Hardware and the step trace (the common language of spaces, the simulator and the cuda executor) */
/* ---------------------------------------------------------------------------------------------- */

/* Network levels a communication group can span. */
#define COTUNE_NET_NODE 0   /* within a node (NVLink / xGMI) */
#define COTUNE_NET_CLUSTER 1 /* across nodes (InfiniBand / RoCE) */
#define COTUNE_NET_ISLAND 2  /* across islands (data-centre network) */
#define COTUNE_NET_LEVELS 3

/* A GPU and the cluster around it. Resolved by the host (cotune_host.resolve_hardware) from the GPU
 * catalogue and the workload's "cluster" object; spaces keep a copy. */
typedef struct cotune_hardware {
  size_t struct_size;
  cotune_str gpu_name;                    /* borrowed from the host; lives as long as the host */
  double peak_flops[COTUNE_DTYPE_COUNT];  /* dense FLOP/s per dtype, 0 when unsupported */
  double hbm_bytes;                       /* memory per GPU */
  double hbm_bytes_per_s;                 /* peak memory bandwidth */
  double net_bytes_per_s[COTUNE_NET_LEVELS]; /* per-GPU unidirectional bandwidth per level */
  double net_latency_s[COTUNE_NET_LEVELS];   /* per-message latency per level */
  int32_t gpus_per_node;
  int32_t nodes;                          /* nodes in the cluster */
  int32_t nodes_per_island;               /* 0: one island */
  int32_t reserved0;
  double kernel_launch_s;                 /* fixed cost per kernel */
  double gemm_efficiency_max;             /* best achievable fraction of peak for large GEMMs */
  double gemm_half_efficiency_flops;      /* GEMM size (FLOPs) at which efficiency is half of max */
  double memory_efficiency;               /* achievable fraction of hbm_bytes_per_s */
  double network_efficiency;              /* achievable fraction of net bandwidth for collectives */
  double price_per_gpu_hour;              /* 0 when unknown */
  double host_bytes_per_node;             /* host (CPU) memory per node, 0 when unknown */
  /* 1.2: what the catalogue and calibration know beyond the roofline. A field that is 0 takes the
   * rule in parentheses, so a 1.1 writer's hardware means what it meant. */
  int32_t nvlink_domain;                  /* 1.2: GPUs that share one NVLink domain (gpus_per_node;
                                             72 on NVL72) */
  int32_t reserved1;
  double peak_flops_fp4;                  /* 1.2: dense FP4 FLOP/s (0: unsupported) */
  double gemm_efficiency_fp8;             /* 1.2: large-GEMM fraction of the FP8 peak (gemm_efficiency_max) */
  double gemm_efficiency_fp4;             /* 1.2: large-GEMM fraction of the FP4 peak (gemm_efficiency_fp8) */
  double attention_efficiency;            /* 1.2: fused attention forward, fraction of the bf16 peak at
                                             large sizes (0.8 x gemm_efficiency_max) */
  double host_launch_s;                   /* 1.2: host (CPU) time to issue one kernel: framework dispatch
                                             and launch; a phase is never faster than issuing all its
                                             kernels (0: no floor) */
  double net_efficiency[COTUNE_NET_LEVELS]; /* 1.2: achievable fraction of each level's bandwidth
                                               (network_efficiency) */
  double exp_per_s;                       /* 1.5: exponentials per second the special-function units
                                             issue: attention's softmax costs one per score, so
                                             attention_efficiency (at head_dim 128) falls at smaller
                                             head dims (0: independent of head_dim) */
  double grouped_gemm_efficiency;         /* 1.8: a grouped GEMM (COTUNE_OP_GROUPED) runs at this multiple
                                             of the efficiency of one dense GEMM of a group's size
                                             (0: 1). Grouped kernels are their own code path, tuned
                                             release by release apart from dense GEMMs */
  double block_scaled_gemm_efficiency;    /* 1.9: an FP8 GEMM with block scales (COTUNE_OP_BLOCK_SCALED:
                                             MXFP8, or 128-element blocks) runs at this fraction of
                                             gemm_efficiency_fp8, which is per-tensor scaling's (0: 1) */
} cotune_hardware;
COTUNE_ASSERT_LAST_FIELD(cotune_hardware, block_scaled_gemm_efficiency);

/* Op kinds of a step trace. */
#define COTUNE_OP_GEMM 1       /* m x k times k x n, `count` times */
#define COTUNE_OP_ATTENTION 2  /* softmax(Q K^T) V core: batch, heads, seq_q, seq_kv, head_dim */
#define COTUNE_OP_MEMORY 3     /* memory-bound work moving `bytes` (elementwise, norms, lookups) */
#define COTUNE_OP_COLLECTIVE 4 /* `collective` over `group_size` ranks spanning `net_level` */

/* Collectives. */
#define COTUNE_COLL_ALL_REDUCE 1
#define COTUNE_COLL_ALL_GATHER 2
#define COTUNE_COLL_REDUCE_SCATTER 3
#define COTUNE_COLL_ALL_TO_ALL 4
#define COTUNE_COLL_SEND_RECV 5

/* What a communication op is for: the breakdown of exposed communication is reported per group. */
#define COTUNE_GROUP_NONE 0
#define COTUNE_GROUP_TP 1  /* tensor (and sequence) parallel */
#define COTUNE_GROUP_CP 2  /* context parallel */
#define COTUNE_GROUP_EP 3  /* expert parallel */
#define COTUNE_GROUP_PP 4  /* pipeline send/recv */
#define COTUNE_GROUP_DP 5  /* data parallel gradients, ZeRO/FSDP gathers */
#define COTUNE_GROUP_EMB 6 /* embedding exchange (recommendation models) */
#define COTUNE_GROUP_COUNT 7

/* Phase of an op within one training step. */
#define COTUNE_PHASE_FORWARD 0  /* once per micro-batch, forward of this GPU's stage */
#define COTUNE_PHASE_BACKWARD 1 /* once per micro-batch, backward (including recomputation) */
#define COTUNE_PHASE_STEP 2     /* once per step: gradient sync, optimizer */

/* Streams: ops on one stream run in order; different streams overlap. */
#define COTUNE_STREAM_COMPUTE 0
#define COTUNE_STREAM_COMM 1 /* and above: further communication streams */

/* Op flags. */
#define COTUNE_OP_CAUSAL (1u << 0)      /* attention: causal mask (half the score matrix) */
#define COTUNE_OP_OPTIMIZER (1u << 1)   /* counted as optimizer time in the breakdown */
#define COTUNE_OP_RECOMPUTE (1u << 2)   /* recomputation of forward work inside backward */
/* 1.6: attention: PyTorch's SDPA (FlashAttention-2) rather than fused kernels (cuDNN, FlashAttention-3).
   FlashAttention-2 does not use the asynchronous tensor-core instructions of Hopper and Blackwell: on
   GPUs of 900 TFLOP/s bf16 and more it reaches 0.6 of attention_efficiency. A host before 1.6 times
   it as fused attention. */
#define COTUNE_OP_SDPA (1u << 3)
/* 1.8: GEMM: one of the groups of a grouped GEMM (the experts of a mixture-of-experts layer, one
   kernel for all of them): m, n, k are one group's, `count` counts the groups. The host scales its
   efficiency by the hardware's grouped_gemm_efficiency; a host before 1.8 times it as dense GEMMs. */
#define COTUNE_OP_GROUPED (1u << 4)
/* 1.9: GEMM in FP8: its operands carry a scale per block of elements (MXFP8's 32, or DeepSeek-style
   128 x 128 weights and 1 x 128 activations) rather than one per tensor. The host times it at the
   hardware's block_scaled_gemm_efficiency times the FP8 efficiency; a host before 1.9 as per-tensor. */
#define COTUNE_OP_BLOCK_SCALED (1u << 5)

/* One operation of a step trace. */
typedef struct cotune_op {
  size_t struct_size;
  int32_t kind;        /* COTUNE_OP_* */
  int32_t phase;       /* COTUNE_PHASE_* */
  int32_t stream;      /* COTUNE_STREAM_COMPUTE, or a communication stream >= COTUNE_STREAM_COMM */
  int32_t depends_on;  /* index of an op (same phase) that must finish before this starts; -1 none */
  int32_t dtype;       /* COTUNE_DTYPE_* for compute ops */
  int32_t collective;  /* COTUNE_COLL_* for COLLECTIVE */
  int32_t group;       /* COTUNE_GROUP_* for COLLECTIVE */
  int32_t net_level;   /* COTUNE_NET_* the group spans (its slowest level) */
  uint32_t flags;      /* COTUNE_OP_* flags */
  int32_t reserved0;
  double count;        /* how many times the op runs (e.g. layers on this stage) */
  double m, n, k;      /* GEMM dimensions */
  double batch, heads, seq_q, seq_kv, head_dim; /* ATTENTION dimensions */
  double bytes;        /* MEMORY: bytes moved; COLLECTIVE: bytes of each rank's buffer */
  double group_size;   /* COLLECTIVE: ranks in the group */
  double measured_s;   /* > 0: a measured duration of one run, used instead of the model's */
  cotune_str label;    /* short name for breakdowns ("qkv", "mlp_up", "tp_allreduce") */
  double kernels;      /* 1.2: kernels (framework operations) one run stands for: each costs the
                          GPU kernel_launch_s and the host host_launch_s (0: one) */
} cotune_op;
COTUNE_ASSERT_LAST_FIELD(cotune_op, kernels);

/* Pipeline schedules. */
#define COTUNE_SCHEDULE_1F1B 1
#define COTUNE_SCHEDULE_INTERLEAVED 2 /* interleaved 1F1B with `virtual_stages` chunks per device */
#define COTUNE_SCHEDULE_GPIPE 3

/* Peak memory per GPU, by part, in bytes. */
typedef struct cotune_memory {
  size_t struct_size;
  double weights;
  double gradients;
  double optimizer;
  double activations;
  double buffers; /* communication buffers, workspace, fragmentation reserve */
} cotune_memory;
COTUNE_ASSERT_LAST_FIELD(cotune_memory, buffers);

/* What one GPU does in one training step. Produced by a space's lower(); borrowed (see there). */
typedef struct cotune_trace {
  size_t struct_size;
  const cotune_op* ops;
  size_t num_ops;
  size_t op_stride;          /* bytes between consecutive ops: sizeof(cotune_op) of the writer */
  int32_t schedule;          /* COTUNE_SCHEDULE_* */
  int32_t pipeline_stages;   /* pp */
  int32_t virtual_stages;    /* chunks per device (1 unless interleaved) */
  int32_t micro_batches;     /* per step, per pipeline */
  double tokens_per_step;    /* tokens the whole job processes per step (for tokens/s) */
  double model_flops_per_gpu; /* useful model FLOPs per GPU per step, no recomputation (for MFU) */
  double gpus;               /* GPUs the job uses (for cost) */
  cotune_memory memory;      /* peak memory per GPU */
  cotune_hardware hardware;  /* the hardware to time on */
} cotune_trace;
COTUNE_ASSERT_LAST_FIELD(cotune_trace, hardware);

/* The performance model's answer for a trace (cotune_host.simulate_trace). */
typedef struct cotune_sim_result {
  size_t struct_size;
  double step_time_s;
  double tokens_per_s;
  double tflops_per_gpu;     /* achieved model TFLOP/s per GPU */
  double mfu;                /* model FLOPs utilisation, 0..1 */
  double peak_memory_bytes;
  int32_t fits;              /* 1 when peak memory fits in the GPU */
  int32_t reserved0;
  double compute_s;          /* compute time on the critical path per step (all micro-batches) */
  double bubble_s;           /* pipeline bubble */
  double optimizer_s;
  double exposed_comm_s[COTUNE_GROUP_COUNT]; /* communication not hidden behind compute, per group */
  double cost_per_mtokens;   /* price per million tokens, 0 when no price is known */
  double launch_bound_s;     /* 1.2: time the GPU waits for the host to issue kernels */
} cotune_sim_result;
COTUNE_ASSERT_LAST_FIELD(cotune_sim_result, launch_bound_s);

/* ---------------------------------------------------------------------------------------------- */
/* Host services                                                                                  */
/* ---------------------------------------------------------------------------------------------- */

/* The table the host passes to the entry point and to every create(). It outlives every component
 * instance. All functions are thread-safe. */
typedef struct cotune_host {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  cotune_str host_version;

  /* Writes one log line attributed to `component_id`. */
  void (*log)(int32_t level, cotune_str component_id, cotune_str message);

  /* Creates an error object (the message is copied). Never returns NULL. */
  cotune_error* (*error_new)(int32_t code, cotune_str message);

  /* JSON helpers for plugins without a JSON library. `pointer` is an RFC 6901 JSON pointer
   * ("/model/hidden"). get_number fails with NOT_FOUND when absent and INVALID_ARGUMENT when not a
   * number; get_string writes the string to `out`. */
  cotune_error* (*json_get_number)(cotune_str json, cotune_str pointer, double* out);
  cotune_error* (*json_get_string)(cotune_str json, cotune_str pointer, const cotune_sink* out);

  /* Resolves a cluster description (JSON: {"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8,
   * "network": {...}, "gpu_spec": {...}}) against the GPU catalogue into `out` (out->struct_size set
   * by the caller). */
  cotune_error* (*resolve_hardware)(cotune_str cluster_json, cotune_hardware* out);

  /* Times a step trace with the performance model. `out->struct_size` is set by the caller.
   * Runs in microseconds; safe to call from any thread. */
  cotune_error* (*simulate_trace)(const cotune_trace* trace, cotune_sim_result* out);
} cotune_host;
COTUNE_ASSERT_LAST_FIELD(cotune_host, simulate_trace);

/* ---------------------------------------------------------------------------------------------- */
/* Search spaces                                                                                  */
/* ---------------------------------------------------------------------------------------------- */

typedef struct cotune_space_instance cotune_space_instance;

/* One tunable parameter. Owned by the space instance; valid until it is destroyed. */
typedef struct cotune_param {
  size_t struct_size;
  cotune_str name;
  int32_t type;            /* COTUNE_PARAM_* */
  uint32_t flags;          /* COTUNE_PARAM_LOG_SCALE */
  double low;              /* INT/FLOAT: inclusive bounds */
  double high;
  const double* values;    /* INT: the allowed values in increasing order (num_values > 0), or NULL
                              for every integer in [low, high] */
  size_t num_values;
  const cotune_str* choices; /* CATEGORICAL: the choices, indexed by the configuration value */
  size_t num_choices;
  double default_value;
  cotune_str unit;         /* "", "sequences", "GPUs" */
  cotune_str help;         /* one sentence */
} cotune_param;
COTUNE_ASSERT_LAST_FIELD(cotune_param, help);

/* Launch formats for render(). */
#define COTUNE_RENDER_JSON 0       /* {"tp": 8, "recompute": "selective", ...} */
#define COTUNE_RENDER_MEGATRON 1   /* Megatron-LM command-line arguments */
#define COTUNE_RENDER_TORCHTITAN 2 /* a TorchTitan TOML fragment */
#define COTUNE_RENDER_TORCHREC 3   /* a TorchRec sharding plan (JSON) */
#define COTUNE_RENDER_NEMO 4       /* 1.2: Megatron-Bridge (NeMo) recipe overrides (Python) */
#define COTUNE_RENDER_DEEPSPEED 5  /* 1.2: a DeepSpeed ds_config (JSON) */

typedef struct cotune_space_api {
  size_t struct_size;

  /* Creates a space for a workload. `workload_json` describes the model, training setup and cluster;
   * `options_json` the space's own options ("{}" when none). Both are only read during the call. */
  cotune_error* (*create)(const cotune_host* host, cotune_str workload_json, cotune_str options_json,
                          cotune_space_instance** out);
  void (*destroy)(cotune_space_instance* space);

  /* The parameters, in configuration order. `*params` points to `*num_params` pointers owned by the
   * instance, valid until destroy. */
  cotune_error* (*describe)(cotune_space_instance* space, const cotune_param* const** params,
                            size_t* num_params);

  /* Validity of `n` configurations (row-major, n x num_params): out_valid[i] = 1 or 0. */
  cotune_error* (*check)(cotune_space_instance* space, const double* configs, size_t n,
                         int32_t* out_valid);

  /* Why one configuration is invalid: one line of text written to `out` (nothing when valid). A
   * line that starts with "out of memory" says the layout is well formed but does not fit: the
   * host then keeps measured runs of it as oom (import), times it (simulate) and reports oom, and
   * keeps it among an executor's candidates (a run of it was measured), where any other reason
   * refuses the configuration as invalid. */
  cotune_error* (*explain)(cotune_space_instance* space, const double* config, const cotune_sink* out);

  /* Up to `n` valid configurations drawn at random with `seed` (the same seed gives the same
   * draws) into out (capacity n x num_params); *out_count receives how many were found. */
  cotune_error* (*sample)(cotune_space_instance* space, uint64_t seed, size_t n, double* out,
                          size_t* out_count);

  /* Feature names: `*names` points to `*num_features` strings owned by the instance. */
  cotune_error* (*describe_features)(cotune_space_instance* space, const cotune_str** names,
                                     size_t* num_features);

  /* Features of `n` configurations into out (capacity n x num_features, row-major). Hot path. */
  cotune_error* (*featurize)(cotune_space_instance* space, const double* configs, size_t n,
                             double* out);

  /* Optional (COTUNE_CAP_LOWER_TRACE): the step trace of one configuration. `*out` is owned by the
   * instance and valid until the next lower() on it or destroy. */
  cotune_error* (*lower)(cotune_space_instance* space, const double* config,
                         const cotune_trace** out);

  /* Renders one configuration in a launch format (COTUNE_RENDER_*). JSON is always supported;
   * others return UNSUPPORTED when the space does not know them. */
  cotune_error* (*render)(cotune_space_instance* space, const double* config, int32_t format,
                          const cotune_sink* out);

  /* Optional: parses a rendered JSON configuration back into values (for imports and replays).
   * Parameters absent from the JSON take their defaults. */
  cotune_error* (*parse)(cotune_space_instance* space, cotune_str config_json, double* out_config);

  /* 1.2, optional (NULL: the space has no launch targets): names the framework and version that
   * configurations will be launched with, as "framework@version" ("megatron@core_v0.19.0"; the
   * framework alone: the newest version the space knows). From then on check(), explain() and
   * sample() also refuse what that framework refuses (explain() names the framework, the version
   * and the rule), and render() writes that version's format for that framework. An unknown target
   * is INVALID_ARGUMENT with a message naming the targets the space knows. */
  cotune_error* (*set_target)(cotune_space_instance* space, cotune_str target);

  /* 1.3, optional (NULL: the space names none): the metrics a trial of this space is measured in,
   * as a JSON array of names written to `out` (["step_time_s", "tokens_per_s", ...]). Before a
   * study's first trial the host checks the metrics its objectives and constraints name: one that
   * is not in the list but close to a name in it is refused as a typo, with that name suggested. */
  cotune_error* (*metrics)(cotune_space_instance* space, const cotune_sink* out);

  /* 1.4, optional, all three or none (NULL: the space has no table schema): how one row of a table
   * of runs (a CSV: column name -> cell text) says a workload and a configuration of this space, and
   * back. `cotune simulate --batch`, `import`, `export-history` and `predictor eval` read and write
   * the runs of any space that offers them (docs/ABI.md, "Table schema"). They take no instance: a
   * row says its own workload. All three write JSON to `out`. */

  /* The schema: {"columns": [...], "config_columns": [...], "reads": [...]}. `columns`: every column
   * table_write may write, in the order a table lists them; `config_columns`: those of them that say
   * the configuration (the rest say the workload); `reads` (optional): further names table_read
   * accepts (other spellings tables use). "workload_json" always reaches table_read. */
  cotune_error* (*table_schema)(const cotune_host* host, const cotune_sink* out);

  /* One row into {"workload": {...}, "config": {...}, "options": {...}, "devices": N}. `row_json` is
   * a JSON object of column -> cell text, empty cells left out; columns the schema does not read are
   * ignored. `config` is a configuration as parse() reads it, `options` the space options under which
   * the row's values are in the domain (the host merges those of a workload's rows), `devices`
   * (required) the GPUs the run used (per-GPU metrics are converted with it). A row that must give its workload
   * whole gives it in the column "workload_json" (a workload, docs/workloads.md) with the
   * configuration's columns. A cell that cannot be read is INVALID_ARGUMENT naming the column and what
   * was expected ("column tp: expected a whole number, got 'x'"). */
  cotune_error* (*table_read)(const cotune_host* host, cotune_str row_json, const cotune_sink* out);

  /* The inverse, for a workload and a configuration (the JSON object render() writes, as the host
   * stored it: keys and spacing may differ):
   * {"cells": {column: text}, "inexact": "...", "read_back": {...} or null}. `inexact` is empty when
   * reading the cells back gives the same workload, else says what is lost (the host then writes the
   * configuration's cells with the workload whole in "workload_json"); `read_back` is the workload
   * reading the cells back gives (null when the columns cannot say it). An empty `config_json` asks
   * for the workload's cells alone (runs of a study find the history imported for its workload
   * through `read_back`). */
  cotune_error* (*table_write)(const cotune_host* host, cotune_str workload_json, cotune_str config_json,
                               const cotune_sink* out);
} cotune_space_api;
COTUNE_ASSERT_LAST_FIELD(cotune_space_api, table_write);

/* ---------------------------------------------------------------------------------------------- */
/* Predictors                                                                                     */
/* ---------------------------------------------------------------------------------------------- */

typedef struct cotune_predictor_instance cotune_predictor_instance;

typedef struct cotune_predictor_api {
  size_t struct_size;

  cotune_error* (*create)(const cotune_host* host, cotune_str options_json,
                          cotune_predictor_instance** out);
  void (*destroy)(cotune_predictor_instance* predictor);

  /* Fits on n rows of d features (row-major), targets y and optional weights w (NULL: all 1).
   * Replaces any earlier fit. Errors: INVALID_ARGUMENT for n == 0, NaN/inf values, d mismatches. */
  cotune_error* (*fit)(cotune_predictor_instance* predictor, const double* x, size_t n, size_t d,
                       const double* y, const double* w);

  /* Predicts n rows into out_mean (capacity n) and, when out_std is not NULL and the component has
   * COTUNE_CAP_PREDICT_STD, a standard deviation into out_std. Hot path. */
  cotune_error* (*predict)(cotune_predictor_instance* predictor, const double* x, size_t n,
                           size_t d, double* out_mean, double* out_std);

  /* Optional (COTUNE_CAP_SAVE_STATE): the fitted model as bytes, and back. */
  cotune_error* (*save)(cotune_predictor_instance* predictor, const cotune_sink* out);
  cotune_error* (*load)(cotune_predictor_instance* predictor, const void* data, size_t len);

  /* The fitted hyper-parameters and fit diagnostics as a JSON object. */
  cotune_error* (*describe_fit)(cotune_predictor_instance* predictor, const cotune_sink* out);
} cotune_predictor_api;
COTUNE_ASSERT_LAST_FIELD(cotune_predictor_api, describe_fit);

/* ---------------------------------------------------------------------------------------------- */
/* Searchers                                                                                      */
/* ---------------------------------------------------------------------------------------------- */

typedef struct cotune_searcher_instance cotune_searcher_instance;

/* What the host offers a searcher during propose(). Configurations are rows of num_params doubles.
 * All callbacks are valid only during the propose() call that received them. */
typedef struct cotune_search_context {
  size_t struct_size;
  void* ctx;
  size_t num_params;
  /* Up to n valid configurations drawn at random (see cotune_space_api.sample). */
  cotune_error* (*sample)(void* ctx, uint64_t seed, size_t n, double* out, size_t* out_count);
  /* out_valid[i] = 1 when configuration i is valid. */
  cotune_error* (*check)(void* ctx, const double* configs, size_t n, int32_t* out_valid);
  /* The predictor's score, normalised so that higher is better whatever the objective's direction;
   * out_std (may be NULL) receives its uncertainty on the same scale, 0 when unknown. Invalid
   * configurations score -inf. */
  cotune_error* (*score)(void* ctx, const double* configs, size_t n, double* out_score,
                         double* out_std);
  /* out_seen[i] = 1 when configuration i was already measured or is in flight. */
  cotune_error* (*seen)(void* ctx, const double* configs, size_t n, int32_t* out_seen);
  /* 1.1: changes whenever score() may answer differently for a configuration than during an earlier
   * propose() of this run (the predictor was refitted or restored); equal values mean equal
   * scores, so a searcher may keep them across proposals. 0: unknown (score again each time).
   * Read only when COTUNE_HAS_FIELD(context, score_version). */
  uint64_t score_version;
} cotune_search_context;
COTUNE_ASSERT_LAST_FIELD(cotune_search_context, score_version);

typedef struct cotune_searcher_api {
  size_t struct_size;

  /* Creates a searcher over the given parameters (borrowed for the call; copy what you keep). */
  cotune_error* (*create)(const cotune_host* host, cotune_str options_json,
                          const cotune_param* const* params, size_t num_params, uint64_t seed,
                          cotune_searcher_instance** out);
  void (*destroy)(cotune_searcher_instance* searcher);

  /* Proposes up to n distinct, valid, unseen configurations into out (capacity n x num_params);
   * *out_count receives how many. Fewer than n (even 0) means the searcher found no more. */
  cotune_error* (*propose)(cotune_searcher_instance* searcher, const cotune_search_context* context,
                           size_t n, double* out, size_t* out_count);

  /* Reports n finished trials: their configurations, scores (higher is better, as in
   * cotune_search_context.score; NaN for failed) and statuses (COTUNE_STATUS_*). */
  cotune_error* (*observe)(cotune_searcher_instance* searcher, const double* configs, size_t n,
                           const double* scores, const int32_t* statuses);

  /* Optional (COTUNE_CAP_SAVE_STATE): the searcher's state as bytes, and back, so that a resumed
   * study proposes what the uninterrupted one would have. */
  cotune_error* (*save)(cotune_searcher_instance* searcher, const cotune_sink* out);
  cotune_error* (*load)(cotune_searcher_instance* searcher, const void* data, size_t len);
} cotune_searcher_api;
COTUNE_ASSERT_LAST_FIELD(cotune_searcher_api, load);

/* ---------------------------------------------------------------------------------------------- */
/* Executors                                                                                      */
/* ---------------------------------------------------------------------------------------------- */

typedef struct cotune_executor_instance cotune_executor_instance;
typedef struct cotune_job cotune_job;

/* One trial to run. Everything is borrowed for the duration of submit(). */
typedef struct cotune_trial {
  size_t struct_size;
  cotune_str trial_id;       /* unique within the store ("study-name/17") */
  cotune_str config_json;    /* the configuration rendered as JSON */
  cotune_str launch_args;    /* rendered for the target framework, "" when none */
  cotune_str workload_json;  /* the study's workload */
  cotune_str workdir;        /* a directory the executor may write logs and files into */
  const cotune_trace* trace; /* the step trace, NULL when the space does not lower */
  const cotune_param* const* params; /* the space's parameters and this configuration's values */
  size_t num_params;
  const double* config;
} cotune_trial;
COTUNE_ASSERT_LAST_FIELD(cotune_trial, config);

/* The state of a job. Strings are owned by the job and valid until the next poll() of that job or
 * release(). */
typedef struct cotune_trial_result {
  size_t struct_size;
  int32_t status;           /* COTUNE_STATUS_* */
  int32_t attempts;         /* how many times the executor started it (requeues count) */
  cotune_str metrics_json;  /* {"step_time_s": 1.2, "tokens_per_s": ...} when status is OK; "{}"
                               with FAILED when the job ran to its end but its metrics could not
                               be read (the host stops a study after 3 such trials in a row) */
  cotune_str error;         /* why, when status is not OK */
  cotune_str log_path;      /* where the trial's log is, "" when none */
  cotune_str external_id;   /* the executor's job id (Slurm job id, agent trial id), "" when none */
} cotune_trial_result;
COTUNE_ASSERT_LAST_FIELD(cotune_trial_result, external_id);

typedef struct cotune_executor_api {
  size_t struct_size;

  cotune_error* (*create)(const cotune_host* host, cotune_str options_json,
                          cotune_executor_instance** out);
  void (*destroy)(cotune_executor_instance* executor);

  /* How many trials may be in flight at once (>= 1). */
  cotune_error* (*capacity)(cotune_executor_instance* executor, int32_t* out);

  /* Starts a trial. The job handle is owned by the caller, who calls release() when done. */
  cotune_error* (*submit)(cotune_executor_instance* executor, const cotune_trial* trial,
                          cotune_job** out);

  /* Fills `out` with the job's state, waiting up to timeout_ms (0: do not wait) for it to finish. */
  cotune_error* (*poll)(cotune_executor_instance* executor, cotune_job* job, int32_t timeout_ms,
                        cotune_trial_result* out);

  /* Asks a job to stop; a later poll() reports CANCELLED (or the status it reached first). */
  cotune_error* (*cancel)(cotune_executor_instance* executor, cotune_job* job);

  /* Forgets a job (does not cancel it). Accepts NULL. */
  void (*release)(cotune_executor_instance* executor, cotune_job* job);

  /* Optional (COTUNE_CAP_ATTACH): follows a job started by an earlier process, by its external id. */
  cotune_error* (*attach)(cotune_executor_instance* executor, const cotune_trial* trial,
                          cotune_str external_id, cotune_job** out);

  /* 1.1, optional (COTUNE_CAP_CANDIDATES; read only when struct_size covers it): every configuration
   * this executor can answer, for an executor that knows a fixed set (a table of logged runs). The
   * host then searches among these only, instead of proposing what would come back unavailable.
   * `study` is a trial without a configuration (config NULL, config_json ""): the workload and the
   * space's parameters. Writes up to `capacity` rows of num_params values into out (NULL when
   * capacity is 0) and the number of rows there are into *out_count, so a first call with capacity
   * 0 sizes the buffer. COTUNE_ERR_UNSUPPORTED: as configured it lists none (search the space).
   * 1.7: a value NaN says the executor's record does not state that parameter (a table without its
   * column); the host completes the row as the space's parse() completes a configuration without
   * that key (its default, or a value the space derives from the others), and submit() receives
   * the completed configuration. Hosts before 1.7 do not: check host->abi_minor. */
  cotune_error* (*candidates)(cotune_executor_instance* executor, const cotune_trial* study,
                              double* out, size_t capacity, size_t* out_count);

  /* 1.3, optional (NULL: results carry what each job reports, unknown in advance): the metrics every
   * result of this executor can carry for `study` (a trial without a configuration, as for
   * candidates()), as a JSON array of names written to `out`. A study whose objectives or
   * constraints name any other metric is refused before its first trial. */
  cotune_error* (*metrics)(cotune_executor_instance* executor, const cotune_trial* study,
                           const cotune_sink* out);

  /* 1.10, optional (NULL: nothing to check; read only when struct_size covers it): checks the
   * executor's options against `study` (a trial without a configuration, as for candidates())
   * before the study's first trial, so that a mismatch between the two (a command placeholder
   * that names no parameter of the space) stops the study with its error at once instead of
   * failing every trial. COTUNE_ERR_INVALID_ARGUMENT (or NOT_FOUND, for a thing the options name
   * that does not exist) names the option and what was expected; the host reports either as the
   * study file's error. */
  cotune_error* (*check_study)(cotune_executor_instance* executor, const cotune_trial* study);
} cotune_executor_api;
COTUNE_ASSERT_LAST_FIELD(cotune_executor_api, check_study);

/* ---------------------------------------------------------------------------------------------- */
/* The plugin descriptor and entry point                                                          */
/* ---------------------------------------------------------------------------------------------- */

/* One component of a plugin. Static storage: valid while the library is loaded. */
typedef struct cotune_component {
  size_t struct_size;
  int32_t kind;            /* COTUNE_KIND_* */
  uint32_t capabilities;   /* COTUNE_CAP_* */
  cotune_str id;           /* unique, reverse-DNS: "org.cotune.space.llm" */
  cotune_str name;         /* short name used in study files: "llm" */
  cotune_str description;  /* one sentence */
  cotune_str version;      /* semantic version of the component: "1.2.0" */
  const void* api;         /* cotune_space_api*, cotune_predictor_api*, ... per kind */
} cotune_component;
COTUNE_ASSERT_LAST_FIELD(cotune_component, api);

/* What the entry point returns. Static storage: valid while the library is loaded. */
typedef struct cotune_plugin {
  size_t struct_size;
  uint32_t abi_major;      /* COTUNE_ABI_MAJOR the plugin was built with */
  uint32_t abi_minor;      /* COTUNE_ABI_MINOR the plugin was built with */
  const cotune_component* const* components;
  size_t num_components;
} cotune_plugin;
COTUNE_ASSERT_LAST_FIELD(cotune_plugin, num_components);

/* The one exported symbol of a plugin. `host` lives longer than every use of the plugin. Returns
 * NULL when the plugin cannot work with this host (it should log why through host->log). */
#define COTUNE_ENTRY_SYMBOL "cotune_plugin_entry_v1"
typedef const cotune_plugin* (*cotune_plugin_entry_fn)(const cotune_host* host);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COTUNE_COTUNE_H_ */
