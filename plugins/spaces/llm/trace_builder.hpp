// Appends the ops of a step trace: GEMMs (with the quantisation work low-precision GEMMs need),
// attention, memory-bound work and collectives placed on the network levels their ranks span.
#ifndef COTUNE_PLUGINS_SPACES_LLM_TRACE_BUILDER_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_TRACE_BUILDER_HPP_

#include <cotune/cotune.h>

#include <vector>

namespace cotune_llm {

// The most ops a trace can hold; the builder never allocates beyond it.
constexpr size_t kMaxOps = 320;

// The network level and ranks-per-domain of a group of `size` ranks placed `stride` ranks apart
// (Megatron-LM order: tensor, context, expert/data, pipeline; ranks fill NVLink domains in order:
// nvlink_domain GPUs, gpus_per_node when the hardware does not say).
struct GroupPlacement {
  int32_t level;           // the slowest level the group spans
  double ranks_per_domain; // ranks of the group inside one NVLink domain
};
GroupPlacement place_group(double stride, double size, const cotune_hardware& hw);

// What a GEMM is in its layer: low-precision GEMMs quantise their activation operand in the
// forward (input) and data-gradient (output gradient) GEMMs; the weight-gradient GEMM reuses both.
enum class GemmRole { kForward, kDgrad, kWgrad };

class TraceBuilder {
 public:
  // `dtype`: the training's GEMM precision; attention and the router stay in bf16. `frozen`: the
  // weights get no gradient (LoRA), so weight-gradient GEMMs are left out. `unfused`: the kernels,
  // and the bytes they move, that an eager framework runs for each fused elementwise kernel (1 when
  // fused; every memory op but the optimizer's and host work is scaled by it). `sdpa`: attention
  // runs PyTorch's SDPA kernels (COTUNE_OP_SDPA), as PyTorch-native trainers do.
  TraceBuilder(std::vector<cotune_op>& ops, const cotune_hardware& hw, int32_t dtype, bool frozen = false,
               double unfused = 1, bool sdpa = false);
  // FP8 GEMMs scale blocks of their operands (MXFP8, blockwise): flagged COTUNE_OP_BLOCK_SCALED.
  void set_block_scaled(bool on) { block_scaled_ = on; }

  // Ops between begin_block and end_block run `count` times per micro-batch (a layer's block on
  // every layer of the stage); end_block appends the quantisation of its low-precision GEMMs as one
  // memory op.
  void begin_block(int32_t phase, double count, uint32_t flags = 0);
  void end_block();

  // Returns the op's index, or -1 for a weight-gradient GEMM of frozen weights (none is emitted).
  int32_t gemm(int32_t phase, const char* label, double m, double n, double k, double count, GemmRole role,
               uint32_t flags = 0, double kernels = 1);
  int32_t gemm_bf16(int32_t phase, const char* label, double m, double n, double k, double count, uint32_t flags = 0,
                    double kernels = 1, GemmRole role = GemmRole::kForward);
  int32_t attention(int32_t phase, double batch, double heads, double seq_q, double seq_kv, double head_dim,
                    double count, uint32_t flags, double kernels);
  int32_t memory(int32_t phase, const char* label, double bytes, double count, uint32_t flags = 0, double kernels = 1);
  // Memory-bound work whose bytes and kernels the caller gives for the framework at hand (not scaled
  // by `unfused`): the loss, which each framework computes its own way.
  int32_t memory_as_given(int32_t phase, const char* label, double bytes, double count, double kernels);
  // Host-side framework work with no GPU kernel of its own (module calls, bookkeeping).
  int32_t host(int32_t phase, const char* label, double count, double operations, uint32_t flags = 0);

  // A collective over `size` ranks placed `stride` apart. Across NVLink domains a ring collective
  // is hierarchical (inside the domain, then 1/ranks_per_domain of the data across), an all-to-all
  // sends (size - ranks_per_domain)/size of its buffer over the network and the rest over NVLink.
  // Returns the last op emitted (or `depends_on` when the group has a single rank).
  int32_t collective(int32_t phase, int32_t stream, const char* label, int32_t coll, int32_t group, double bytes,
                     double stride, double size, double count, int32_t depends_on = -1, uint32_t flags = 0);

  // An all-to-all in which each rank sends `wire_intra` bytes to the ranks of its NVLink domain and
  // `wire_inter` bytes over its network link: for dispatchers whose traffic is not an even split of
  // one buffer. Returns the last op emitted.
  int32_t all_to_all(int32_t phase, int32_t stream, const char* label, int32_t group, double wire_intra,
                     double wire_inter, double stride, double size, double count, uint32_t flags = 0);

  const cotune_hardware& hardware() const { return hw_; }
  int32_t last() const { return static_cast<int32_t>(ops_.size()) - 1; }
  void depend(int32_t op, int32_t on) {
    if (op >= 0) ops_[op].depends_on = on;
  }
  // The next op of `op`'s phase that is not a collective waits for `op` (-1: none): the consumer of
  // an overlapped collective, emitted by code that need not know of the overlap.
  void wait_next(int32_t op) { waiting_for_ = op; }
  cotune_op& op(int32_t i) { return ops_[i]; }

 private:
  cotune_op& next(int32_t phase, int32_t kind, const char* label, double count, uint32_t flags, double kernels);
  int32_t memory_op(int32_t phase, const char* label, double bytes, double count, uint32_t flags, double kernels);
  int32_t one(int32_t phase, int32_t stream, const char* label, int32_t coll, int32_t group, double bytes, double size,
              int32_t level, double count, int32_t dep, uint32_t flags);

  std::vector<cotune_op>& ops_;
  const cotune_hardware& hw_;
  int32_t dtype_;
  bool frozen_;
  double unfused_;
  bool sdpa_;
  bool block_scaled_ = false;
  // The open block: its phase, runs, flags, and the bytes and kernels of its quantisation per run.
  int32_t block_phase_ = -1;
  double block_count_ = 0;
  uint32_t block_flags_ = 0;
  double cast_bytes_ = 0, cast_kernels_ = 0;
  int32_t waiting_for_ = -1;
};

}  // namespace cotune_llm

#endif
