// The analytic performance model: times a step trace on a hardware description (MAD-Max style).
// Exposed to plugins through cotune_host.simulate_trace and cotune_host.resolve_hardware.
#ifndef COTUNE_CORE_PERFMODEL_PERFMODEL_HPP_
#define COTUNE_CORE_PERFMODEL_PERFMODEL_HPP_

#include <cotune/cotune.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cotune::core::perf {

// Names of the GPUs in the built-in catalogue (core/data/gpus.json), e.g. "h100-sxm".
std::vector<std::string> catalogue_gpu_names();

// The catalogue name a GPU is spelled as: case, '_' or spaces for '-' and an "nvidia-" prefix are
// ignored, and gpus.json's aliases ("a100" -> "a100-80gb", "h100_80gb" -> "h100-sxm", ...) apply.
// "" when no entry matches.
std::string catalogue_gpu_name(const std::string& spelled);

// The fields a GPU description (a catalogue entry, cluster.gpu_spec, a calibration) may hold, and a
// check of such an object (UserError naming the field under `where`).
const std::vector<std::string>& gpu_field_names();
void check_gpu_fields(const nlohmann::json& fields, const std::string& where);

// Resolves a cluster object ({"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8, "network": {...},
// "gpu_spec": {...}, "calibration": {"h100-sxm": {...}}, "price_per_gpu_hour": 2.5}) into `out` (whose
// struct_size the caller set; only what it covers is written). The GPU's fields come from the
// catalogue, then gpu_spec, then the calibration's entry for that GPU.
// Throws UserError naming the field (JSON pointer below `where`) and what was expected.
void resolve_hardware(const nlohmann::json& cluster, cotune_hardware* out,
                      const std::string& where = "/cluster");

// The hardware a trace is timed on, every ABI 1.2 field filled: what the writer did not know (an
// older struct_size) or left 0 takes the rule cotune.h gives for it (gemm_efficiency_fp8 =
// gemm_efficiency_max, net_efficiency[l] = network_efficiency, nvlink_domain = gpus_per_node, ...).
cotune_hardware effective_hardware(const cotune_hardware& hw);

// Kernels one run of `op` stands for (op.kernels when its writer knew the field and set it, else 1).
double op_kernels(const cotune_op& op);

// The duration of one run of `op` on `hw`, in seconds (before multiplying by op.count; a positive
// op.measured_s is returned as is). Each kernel of the op (op_kernels) adds kernel_launch_s.
// op_time_effective() takes hardware that is already an effective_hardware() (the hot path). The rules:
//  GEMM       2mnk FLOPs at the dtype's peak x e x F/(F + H), e the dtype's large-GEMM efficiency
//             (gemm_efficiency_max, _fp8, _fp4), H = gemm_half_efficiency_flops x the dtype's peak
//             over bf16's (a fixed cost in time); or the bytes (mk + kn + mn) at memory speed when
//             slower (skinny GEMMs). A grouped GEMM's group (COTUNE_OP_GROUPED) runs at that e x
//             grouped_gemm_efficiency; a lift above 1 stops at 0.95 of the peak.
//  ATTENTION  fused (flash) attention: 4 b h sq skv d FLOPs, halved when causal, on the same size
//             curve with attention_efficiency as its maximum; the backward phase does 2.5x the
//             work at 0.8 of the forward's rate unless flagged RECOMPUTE (then a forward rerun).
//             attention_efficiency holds at head dim 128: each score also costs one exponential
//             at exp_per_s (when set), a share s of the score's time there, so head dim d runs at
//             the rate x 1 / ((1 - s) + s x 128 / d).
//  MEMORY     bytes at hbm_bytes_per_s x memory_efficiency.
//  COLLECTIVE alpha-beta on the level's bandwidth x net_efficiency[level] and latency. `bytes` is
//             the full buffer: the reduced buffer (all-reduce), the gathered buffer (all-gather and
//             reduce-scatter), a rank's send buffer (all-to-all, send/recv). All-reduce takes the
//             faster of ring 2(n-1)/n B/bw + 2(n-1)a and tree 2B/bw + 2 log2(n) a; the others are
//             rings (n-1)/n B/bw + (n-1)a; send/recv is B/bw + a. Groups of one rank cost nothing.
double op_time(const cotune_op& op, const cotune_hardware& hw);
double op_time_effective(const cotune_op& op, const cotune_hardware& hw);

// A COTUNE_DTYPE_*'s name as workloads and errors write it ("bf16", "fp8"; "unknown" otherwise).
const char* dtype_name(int32_t dtype);

// The work of one run of a compute op, before any efficiency: FLOPs and bytes moved (GEMM and
// ATTENTION as in op_time's rules; MEMORY: its bytes, no FLOPs; COLLECTIVE: none).
struct OpWork {
  double flops = 0;
  double bytes = 0;
};
OpWork op_work(const cotune_op& op);

// A collective as a ring: bytes each rank puts on the wire per byte of `bytes`, and latency hops
// (zeros for a group of one rank, an empty buffer or an op that is not a COLLECTIVE). Throws
// UserError for an unknown collective or network level.
struct RingShape {
  double wire = 0;
  double hops = 0;
};
RingShape ring_shape(const cotune_op& op);

// Bytes per element of a COTUNE_DTYPE_* (fp4: half a byte and its block scale), the hardware's
// peak FLOP/s for it, and the large-GEMM efficiency of that dtype on an effective_hardware(); the
// first two throw UserError for an unknown dtype (and peak_flops for a GPU without that dtype).
double dtype_bytes(int32_t dtype);
double peak_flops(const cotune_hardware& hw, int32_t dtype);
double gemm_efficiency_max(const cotune_hardware& hw, int32_t dtype);

// Times one step of `trace`. Reads only the fields each struct_size covers. Throws UserError on a
// malformed trace (no ops stride, negative sizes).
//
// Each of the FORWARD and BACKWARD phases is timed once (for one micro-batch of this GPU's stage,
// all its virtual chunks) with stream clocks: ops on a stream run in order, an op starts after
// the op it depends on, and a collective on the compute stream blocks it. Time the compute stream
// spends waiting, or blocked in a collective, is exposed communication of that op's group.
// STEP-phase ops on a communication stream that depend on nothing overlap with the backward of
// the last micro-batch (gradient reduction as gradients become ready). The host issues every
// kernel (op_kernels x count, on every stream) at host_launch_s each; a micro-batch takes the longer
// of the GPU's F + B and the host's time to issue them (launch_bound_s: the difference, when the
// host is slower), and so does the step phase. The step is
//   micro_batches x M + bubble + step phase,  M = max(F + B, host),  bubble = (p - 1) / v x M
// (1F1B and interleaved; GPipe: (p - 1) x M). MFU uses the peak of the first GEMM's dtype. Only
// the fields of `out` its struct_size covers are written.
void simulate(const cotune_trace& trace, cotune_sim_result* out);

// Throws UserError naming what is wrong with a malformed trace (struct sizes older than this host
// reads, no ops stride, negative sizes, unknown phases or groups, a hardware description that was not
// resolved). simulate() and roofline_terms() call it first.
void validate_trace(const cotune_trace& trace);

// The step of `trace` as roofline terms, for a cost model that learns one rate per term from
// measurements (CostModel, the "roofline" prior): each term is work at the hardware's nominal
// rate, with none of the efficiencies, overlap or schedule simulation above. Forward and backward
// terms are multiplied by the pipeline's stretch (micro_batches + bubble, as in simulate()), so a
// learned rate is the fraction of that work on the critical path. In seconds unless named a count:
//  compute_s        GEMM and attention: the slower of FLOPs at peak and bytes at HBM bandwidth
//  memory_s         memory-bound ops: bytes at HBM bandwidth
//  kernels          compute and memory kernels launched (a count: the fixed cost of each, launch
//                   and the low efficiency of a small GEMM)
//  comm_node_s, comm_cluster_s, comm_island_s
//                   collectives: ring wire bytes at the level's bandwidth
//  comm_hops        collectives: latency hops (a count)
//  step_s           the STEP phase (gradient sync, optimizer): its compute and communication as above
//  fixed            1 (a constant per step)
// A positive op.measured_s counts as the op's time in compute_s or memory_s (step_s in the step).
constexpr size_t kRooflineTerms = 9;
extern const char* const kRooflineTermNames[kRooflineTerms];
void roofline_terms(const cotune_trace& trace, double out[kRooflineTerms]);

}  // namespace cotune::core::perf

#endif  // COTUNE_CORE_PERFMODEL_PERFMODEL_HPP_
