// The execution summary of `cotune simulate`: read from the step trace's ops (execution_summary.hpp).
#include "cli/execution_summary.hpp"

#include <cotune/core/perfmodel/perfmodel.hpp>

namespace cotune::cli {
namespace {

using nlohmann::json;

// The workload's training fields that say what was asked for (an llm workload's; other spaces'
// have none): the FP8 recipe, where `auto` is MXFP8 on GPUs whose tensor cores scale blocks and
// per-tensor scaling before (docs/workloads.md), and tensor-parallel overlap, which needs sequence
// parallelism and tp > 1.
void explain_requests(const json& workload, ExecutionSummary* s) {
  const json training = workload.is_object() ? workload.value("training", json::object()) : json::object();
  if (!training.is_object()) return;
  // The recipe only where the workload names its precision (an llm workload's does for FP8).
  if (!s->fp8_scaling.empty() && training.contains("dtype")) {
    const json recipe = training.value("fp8_recipe", json("auto"));
    const std::string asked = recipe.is_string() ? recipe.get<std::string>() : "";
    if (asked == "auto") s->fp8_recipe = s->fp8_scaling == "per-block" ? "mxfp8" : "tensorwise";
    else s->fp8_recipe = asked;
  }
  if (training.value("tp_comm_overlap", json(false)) == json(true) && s->tp_comm != "overlapped")
    s->tp_comm_note = s->tp_comm.empty() ? "training.tp_comm_overlap has no tensor-parallel transfers to overlap (tp 1)"
                                         : "training.tp_comm_overlap takes effect only with sequence parallelism (sp) "
                                           "and tp > 1";
}

}  // namespace

ExecutionSummary summarize_execution(const cotune_trace& t, const json& workload) {
  ExecutionSummary s;
  double total = 0, block_scaled = 0, fp8 = 0;
  bool tp_forward = false, tp_overlapped = false;
  for (size_t i = 0; i < t.num_ops; ++i) {
    const auto& op = *reinterpret_cast<const cotune_op*>(reinterpret_cast<const char*>(t.ops) + i * t.op_stride);
    if (op.kind == COTUNE_OP_GEMM) {
      const double flops = 2 * op.m * op.n * op.k * op.count * (op.phase == COTUNE_PHASE_STEP ? 1 : t.micro_batches);
      s.gemm_share[core::perf::dtype_name(op.dtype)] += flops;
      total += flops;
      if (op.dtype == COTUNE_DTYPE_FP8) {
        fp8 += flops;
        if (op.flags & COTUNE_OP_BLOCK_SCALED) block_scaled += flops;
      }
    } else if (op.kind == COTUNE_OP_COLLECTIVE && op.group == COTUNE_GROUP_TP && op.phase == COTUNE_PHASE_FORWARD) {
      // The forward's transfers decide: the weight-gradient gather of the backward runs on a
      // stream of its own either way.
      tp_forward = true;
      tp_overlapped = tp_overlapped || op.stream != COTUNE_STREAM_COMPUTE;
    }
  }
  for (auto& [name, flops] : s.gemm_share) flops = total > 0 ? flops / total : 0;
  if (fp8 > 0) s.fp8_scaling = block_scaled >= fp8 / 2 ? "per-block" : "per-tensor";
  if (tp_forward) s.tp_comm = tp_overlapped ? "overlapped" : "blocking";
  explain_requests(workload, &s);
  return s;
}

json execution_json(const ExecutionSummary& s) {
  json j = {{"gemm_flops_share", s.gemm_share}};
  if (!s.fp8_scaling.empty()) j["fp8_scaling"] = s.fp8_scaling;
  if (!s.fp8_recipe.empty()) j["fp8_recipe"] = s.fp8_recipe;
  if (!s.tp_comm.empty()) j["tp_comm"] = s.tp_comm;
  if (!s.tp_comm_note.empty()) j["tp_comm_note"] = s.tp_comm_note;
  return j;
}

}  // namespace cotune::cli
