// Megatron-LM pretrain_gpt.py arguments (docs/exports.md, megatron_lm_rules.md): a bash fragment
// with the environment and a MEGATRON_ARGS array, one option per line.
#include <string>
#include <vector>

#include "pipeline.hpp"
#include "render.hpp"

namespace cotune_llm {
namespace {

using render_detail::num;

// One option per line: the flag and its values.
class Args {
 public:
  void add(const std::string& flag) { lines_.push_back(flag); }
  void add(const std::string& flag, double v) { lines_.push_back(flag + " " + num(v)); }
  void add(const std::string& flag, const std::string& v) { lines_.push_back(flag + " " + v); }
  std::string text() const {
    std::string out = "MEGATRON_ARGS=(\n";
    for (const std::string& l : lines_) out += "  " + l + "\n";
    return out + ")\n";
  }

 private:
  std::vector<std::string> lines_;
};

// Llama-class models (SwiGLU), MLA, MTP and MoE models are built with RMSNorm, rotary embeddings
// and no linear biases (M60; M42 for MoE with expert tensor parallelism; M63 for MTP); Nemotron
// (squared ReLU) with rotary embeddings and no biases, keeping LayerNorm; GPT-style models keep
// Megatron's defaults (LayerNorm, learned positions, biases, GeLU).
// Megatron-LM's --rotary-base default (M60).
constexpr double kMegatronRotaryBase = 10000;

void model_args(Args& a, const Model& m) {
  a.add("--num-layers", m.layers);
  a.add("--hidden-size", m.hidden);
  a.add("--num-attention-heads", m.heads);
  a.add("--ffn-hidden-size", m.ffn_hidden);
  if (!m.mla.on()) {
    if (m.head_dim_given > 0 && m.head_dim_given != m.hidden / m.heads) a.add("--kv-channels", m.head_dim_given);
    if (m.kv_heads < m.heads) {
      a.add("--group-query-attention");
      a.add("--num-query-groups", m.kv_heads);
    }
  }
  a.add("--seq-length", m.seq_len);
  a.add("--max-position-embeddings", m.seq_len);
  a.add("--tokenizer-type", std::string("NullTokenizer"));
  a.add("--vocab-size", m.vocab);
  if (!m.tie_embeddings) a.add("--untie-embeddings-and-output-weights");
  if (m.gated_mlp) a.add("--swiglu");
  if (m.activation == "squared_relu") a.add("--squared-relu");
  if (m.llama_class()) a.add("--normalization", std::string("RMSNorm"));
  if (m.rotary()) {
    a.add("--position-embedding-type", std::string("rope"));
    if (m.rope_base > 0 && m.rope_base != kMegatronRotaryBase) a.add("--rotary-base", m.rope_base);
  }
  if (m.llama_class() || m.activation == "squared_relu") a.add("--disable-bias-linear");
  if (m.mla.on()) {
    a.add("--multi-latent-attention");
    if (m.mla.q_lora_rank > 0) a.add("--q-lora-rank", m.mla.q_lora_rank);
    a.add("--kv-lora-rank", m.mla.kv_lora_rank);
    a.add("--qk-head-dim", m.mla.qk_nope_head_dim);
    a.add("--qk-pos-emb-head-dim", m.mla.qk_rope_head_dim);
    a.add("--v-head-dim", m.mla.v_head_dim);
  }
  if (m.mtp_layers > 0) a.add("--mtp-num-layers", m.mtp_layers);
  if (m.moe()) {
    a.add("--num-experts", m.experts);
    a.add("--moe-router-topk", m.top_k);
    if (m.top_k == 1) a.add("--moe-router-pre-softmax");  // M43
    a.add("--moe-ffn-hidden-size", m.expert_ffn_hidden);
    a.add("--moe-grouped-gemm");
    if (m.dense_layers_first > 0 || m.moe_layer_freq != 1)
      a.add("--moe-layer-freq", "'" + render_detail::moe_layer_pattern(m) + "'");
    if (m.shared_experts > 0) a.add("--moe-shared-expert-intermediate-size", m.shared_experts * m.shared_expert_ffn_hidden);
    if (m.expert_groups > 1) {
      a.add("--moe-router-num-groups", m.expert_groups);
      a.add("--moe-router-group-topk", m.group_top_k);
    }
    if (m.capacity_factor > 0) {
      a.add("--moe-expert-capacity-factor", m.capacity_factor);
      a.add("--moe-pad-expert-input-to-capacity");
    }
  }
}

void pipeline_args(Args& a, const Model& m, const Config& c) {
  a.add("--pipeline-model-parallel-size", c.pp);
  PipelineSplit split;
  split_layers(m.layers, c.pp, c.vpp, c.first_stage, c.last_stage, &split, m.mtp_layers);
  if (split.rule == SplitRule::kEven) {
    if (c.vpp > 1) a.add("--num-layers-per-virtual-pipeline-stage", m.layers / (c.pp * c.vpp));
    return;
  }
  if (split.rule == SplitRule::kLayout) {
    a.add("--pipeline-model-parallel-layout", "'" + layout_string(split, m.mtp_layers) + "'");
    return;
  }
  if (c.vpp > 1) a.add("--num-virtual-stages-per-pipeline-rank", c.vpp);
  if (split.rule == SplitRule::kAccountEmbedding) {
    a.add("--account-for-embedding-in-pipeline-split");
    a.add("--account-for-loss-in-pipeline-split");
  } else if (split.rule == SplitRule::kAccountLoss) {
    a.add("--account-for-loss-in-pipeline-split");
  } else {
    a.add("--decoder-first-pipeline-num-layers", split.first_stage);
    a.add("--decoder-last-pipeline-num-layers", split.last_stage);
  }
}

}  // namespace

std::string render_megatron(const Workload& w, const Config& c, const Target& t, const cotune_hardware& hw) {
  const Model& m = w.model;
  Args a;
  model_args(a, m);
  a.add("--micro-batch-size", c.micro_batch);
  a.add("--global-batch-size", w.training.global_batch);
  a.add("--tensor-model-parallel-size", c.tp);
  pipeline_args(a, m, c);
  if (c.cp > 1) a.add("--context-parallel-size", c.cp);
  if (m.moe()) {
    if (c.ep > 1) a.add("--expert-model-parallel-size", c.ep);
    if (c.etp != c.tp) a.add("--expert-tensor-parallel-size", c.etp);
  }
  if (c.sp && c.tp > 1) a.add("--sequence-parallel");  // M08

  if (c.recompute == kRecomputeSelective) {
    a.add("--recompute-granularity", std::string("selective"));
    if (c.recompute_modules != kCoreAttn) {
      std::string modules = recompute_modules_text(c.recompute_modules);
      for (char& ch : modules)
        if (ch == ',') ch = ' ';
      a.add("--recompute-modules", modules);
    }
  } else if (c.recompute == kRecomputeFull) {
    a.add("--recompute-granularity", std::string("full"));  // M54: a method and a layer count
    a.add("--recompute-method", std::string("uniform"));
    a.add("--recompute-num-layers", 1);
  }

  // ZeRO: the distributed optimizer shards the optimizer state only (M25); gradients and weights
  // too are Megatron-FSDP (M28).
  const bool fsdp = c.zero >= 2;
  if (c.zero == 1) {
    a.add("--use-distributed-optimizer");
    if (w.training.overlap_grad_reduce) {
      a.add("--overlap-grad-reduce");
      a.add("--overlap-param-gather");  // M26
    }
  } else if (fsdp) {
    a.add("--use-megatron-fsdp");
    a.add("--data-parallel-sharding-strategy", std::string(c.zero == 2 ? "optim_grads" : "optim_grads_params"));
    a.add("--ckpt-format", std::string("fsdp_dtensor"));
    if (w.training.overlap_grad_reduce) a.add("--overlap-grad-reduce");
  } else if (w.training.overlap_grad_reduce) {
    a.add("--overlap-grad-reduce");
  }
  // With --bf16 Megatron-LM accumulates and reduces gradients in fp32 unless told otherwise (M53).
  if (w.training.grad_reduce == GradReduce::kBf16) a.add("--grad-reduce-in-bf16");
  if (w.model.moe()) {
    if (w.training.moe_dispatcher == MoeDispatcher::kFlex) {
      a.add("--moe-token-dispatcher-type", std::string("flex"));
      a.add("--moe-flex-dispatcher-backend", std::string("deepep"));  // HybridEP moves the same bytes
    } else {
      a.add("--moe-token-dispatcher-type", std::string("alltoall"));
    }
  }
  if (w.training.overlap_moe_comm && c.ep > 1) a.add("--overlap-moe-expert-parallel-comm");  // M50
  if (w.training.tp_comm_overlap && c.sp && c.tp > 1) a.add("--tp-comm-overlap");  // M09: with sequence parallelism
  if (w.training.cross_entropy_fusion) a.add("--cross-entropy-loss-fusion");

  a.add("--attention-backend", std::string(w.training.attention == Attention::kFlash ? "auto" : "unfused"));  // M55
  a.add(w.training.dtype == COTUNE_DTYPE_FP16 ? "--fp16" : "--bf16");
  if (w.training.dtype == COTUNE_DTYPE_FP8) {
    // MXFP8 keeps E4M3 for gradients too (its block scales cover their range); the others use hybrid.
    const Fp8Recipe r = fp8_recipe_on(w.training, hw);
    a.add("--fp8-format", std::string(r == Fp8Recipe::kMxfp8 ? "e4m3" : "hybrid"));
    a.add("--fp8-recipe", std::string(fp8_recipe_name(r)));
  } else if (w.training.dtype == COTUNE_DTYPE_FP4) {
    a.add("--fp4-format", std::string("e2m1"));
    a.add("--fp4-recipe", std::string("nvfp4"));
  }
  if (!w.training.dropout) {
    a.add("--attention-dropout", 0);
    a.add("--hidden-dropout", 0);
  }

  double nodes = 1, per_node = 1;
  const std::string world = render_detail::world(c, hw, &nodes, &per_node);
  std::string out = "# " + t.label() + ": pretrain_gpt.py arguments for " + world + "\n# torchrun --nnodes " + num(nodes) + " --nproc-per-node " + num(per_node) +
                    " pretrain_gpt.py \"${MEGATRON_ARGS[@]}\" plus your data, tokenizer, schedule and checkpoint "
                    "arguments\n";
  // M11: TP and CP communication overlap needs one hardware queue before Blackwell; FSDP needs more.
  if (!fsdp && (c.tp > 1 || c.cp > 1)) out += "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  return out + a.text();
}

}  // namespace cotune_llm
