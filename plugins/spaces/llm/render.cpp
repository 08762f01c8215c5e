// Launch formats of a configuration (see render.hpp).
#include "render.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

#include "pipeline.hpp"

namespace cotune_llm {

const char* const kRecomputeNames[3] = {"none", "selective", "full"};

namespace {
std::string n(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}
}  // namespace

std::string render_json(const Config& c, double etp_param, const std::string& modules, const std::string& gpu_name) {
  nlohmann::ordered_json j;
  j["tp"] = static_cast<int64_t>(c.tp);
  j["pp"] = static_cast<int64_t>(c.pp);
  j["dp"] = static_cast<int64_t>(c.dp);
  j["cp"] = static_cast<int64_t>(c.cp);
  j["ep"] = static_cast<int64_t>(c.ep);
  j["micro_batch"] = static_cast<int64_t>(c.micro_batch);
  j["vpp"] = static_cast<int64_t>(c.vpp);
  j["zero"] = c.zero;
  j["recompute"] = kRecomputeNames[c.recompute];
  j["sp"] = c.sp;
  j["gpus"] = static_cast<int64_t>(c.gpus);
  j["gpu"] = gpu_name;
  // Left out at their default (0: the rule decides), so configurations from before they existed
  // render as they did.
  if (etp_param > 0) j["etp"] = static_cast<int64_t>(etp_param);
  if (c.first_stage > 0) j["first_stage_layers"] = static_cast<int64_t>(c.first_stage);
  if (c.last_stage > 0) j["last_stage_layers"] = static_cast<int64_t>(c.last_stage);
  if (!modules.empty()) j["recompute_modules"] = modules;
  return j.dump();
}

std::string render_megatron(const Workload& w, const Config& c) {
  const Model& m = w.model;
  std::string a;
  auto arg = [&a](const std::string& s) { a += (a.empty() ? "" : " ") + s; };
  arg("--num-layers " + n(m.layers));
  arg("--hidden-size " + n(m.hidden));
  arg("--num-attention-heads " + n(m.heads));
  if (m.kv_heads != m.heads) arg("--group-query-attention --num-query-groups " + n(m.kv_heads));
  arg("--ffn-hidden-size " + n(m.moe() ? m.expert_ffn_hidden : m.ffn_hidden));
  if (m.gated_mlp) arg("--swiglu");
  if (!m.tie_embeddings) arg("--untie-embeddings-and-output-weights");
  arg("--seq-length " + n(m.seq_len) + " --max-position-embeddings " + n(m.seq_len));
  if (m.moe()) arg("--num-experts " + n(m.experts) + " --moe-router-topk " + n(m.top_k));
  arg("--global-batch-size " + n(w.training.global_batch));
  arg("--micro-batch-size " + n(c.micro_batch));
  arg("--tensor-model-parallel-size " + n(c.tp));
  arg("--pipeline-model-parallel-size " + n(c.pp));
  PipelineSplit split;
  split_layers(m.layers, c.pp, c.vpp, c.first_stage, c.last_stage, &split);
  if (split.rule == SplitRule::kEven) {
    if (c.vpp > 1) arg("--num-layers-per-virtual-pipeline-stage " + n(m.layers / (c.pp * c.vpp)));
  } else {
    if (c.vpp > 1 && split.rule != SplitRule::kLayout) arg("--num-virtual-stages-per-pipeline-rank " + n(c.vpp));
    if (split.rule == SplitRule::kAccountEmbedding)
      arg("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split");
    if (split.rule == SplitRule::kAccountLoss) arg("--account-for-loss-in-pipeline-split");
    if (split.rule == SplitRule::kExplicit) {
      arg("--decoder-first-pipeline-num-layers " + n(split.first_stage));
      arg("--decoder-last-pipeline-num-layers " + n(split.last_stage));
    }
    if (split.rule == SplitRule::kLayout) arg("--pipeline-model-parallel-layout '" + layout_string(split, m.mtp_layers) + "'");
  }
  if (c.cp > 1) arg("--context-parallel-size " + n(c.cp));
  if (c.ep > 1) arg("--expert-model-parallel-size " + n(c.ep));
  if (m.moe() && c.etp != c.tp) arg("--expert-tensor-parallel-size " + n(c.etp));
  if (c.sp) arg("--sequence-parallel");
  if (c.recompute == kRecomputeSelective) {
    arg("--recompute-granularity selective");
    if (c.recompute_modules != kCoreAttn) {
      std::string modules = recompute_modules_text(c.recompute_modules);
      for (char& ch : modules)
        if (ch == ',') ch = ' ';
      arg("--recompute-modules " + modules);
    }
  }
  if (c.recompute == kRecomputeFull) arg("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  if (c.zero == 1 || c.zero == 2) arg("--use-distributed-optimizer");
  if (c.zero == 3) arg("--use-torch-fsdp2");
  if (w.training.overlap_grad_reduce && c.zero < 3) arg("--overlap-grad-reduce");
  if (w.training.attention == Attention::kFlash) arg("--use-flash-attn");
  if (w.training.dtype == COTUNE_DTYPE_FP16) arg("--fp16");
  else arg("--bf16");
  if (w.training.dtype == COTUNE_DTYPE_FP8) arg("--fp8-format hybrid");
  if (!w.training.dropout) arg("--attention-dropout 0 --hidden-dropout 0");
  return a;
}

std::string render_torchtitan(const Workload& w, const Config& c) {
  const Model& m = w.model;
  std::string t;
  t += "[training]\n";
  t += "local_batch_size = " + n(w.training.global_batch / c.dp) + "\n";
  t += "global_batch_size = " + n(w.training.global_batch) + "\n";
  t += "seq_len = " + n(m.seq_len) + "\n";
  t += std::string("mixed_precision_param = \"") + (w.training.dtype == COTUNE_DTYPE_FP16 ? "float16" : "bfloat16") + "\"\n";
  t += "mixed_precision_reduce = \"float32\"\n\n";
  t += "[parallelism]\n";
  // ZeRO-3 is FSDP; ZeRO-1/2 keep the weights after forward (FSDP without resharding); ZeRO-0 is
  // plain replication (DDP).
  t += "data_parallel_replicate_degree = " + n(c.zero == 0 ? c.dp : 1) + "\n";
  t += "data_parallel_shard_degree = " + n(c.zero == 0 ? 1 : c.dp) + "\n";
  if (c.zero == 1 || c.zero == 2) t += "fsdp_reshard_after_forward = \"never\"\n";
  t += "tensor_parallel_degree = " + n(c.tp) + "\n";
  t += std::string("disable_loss_parallel = ") + (c.tp > 1 ? "false" : "true") + "\n";
  t += "context_parallel_degree = " + n(c.cp) + "\n";
  t += "expert_parallel_degree = " + n(c.ep) + "\n";
  t += "pipeline_parallel_degree = " + n(c.pp) + "\n";
  if (c.pp > 1) {
    t += std::string("pipeline_parallel_schedule = \"") + (c.vpp > 1 ? "Interleaved1F1B" : "1F1B") + "\"\n";
    t += "pipeline_parallel_microbatch_size = " + n(c.micro_batch) + "\n";
    t += "pipeline_parallel_layers_per_stage = " + n(m.layers / (c.pp * c.vpp)) + "\n";
  }
  t += "\n[activation_checkpoint]\n";
  t += std::string("mode = \"") + kRecomputeNames[c.recompute] + "\"\n";
  if (c.recompute == kRecomputeSelective) t += "selective_ac_option = \"op\"\n";
  if (w.training.dtype == COTUNE_DTYPE_FP8) t += "\n[float8]\nenable_fsdp_float8_all_gather = true\n";
  return t;
}

}  // namespace cotune_llm
