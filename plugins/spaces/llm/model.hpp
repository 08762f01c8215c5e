// A decoder-only transformer: its dimensions, the presets, and counts derived from them.
// Dense and mixture-of-experts layers may alternate (dense_layers_first, moe_layer_freq), attention
// is multi-head, grouped-query or multi-latent (DeepSeek's MLA), and multi-token-prediction layers
// may follow the decoder.
#ifndef COTUNE_PLUGINS_SPACES_LLM_MODEL_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_MODEL_HPP_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace cotune_llm {

// Multi-latent attention (DeepSeek-V2/V3): queries through an optional low-rank bottleneck, keys and
// values through a shared low-rank latent; a rotary part of the query/key head kept apart.
struct Mla {
  double q_lora_rank = 0;  // 0: queries projected directly from the hidden state
  double kv_lora_rank = 0;
  double qk_rope_head_dim = 0;
  double qk_nope_head_dim = 0;
  double v_head_dim = 0;
  bool on() const { return kv_lora_rank > 0; }
};

struct Model {
  std::string name;  // the preset name, or "custom"
  double layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn_hidden = 0, vocab = 0, seq_len = 0;
  double head_dim_given = 0;  // 0: hidden / heads
  double experts = 1, top_k = 1, expert_ffn_hidden = 0;  // experts > 1: mixture of experts
  double shared_experts = 0, shared_expert_ffn_hidden = 0;  // dense experts every token visits
  // Group-limited routing (DeepSeek-V3: 8 groups, 4 of them): the experts split into expert_groups
  // equal groups, and each token picks its top_k among the group_top_k groups that score best, so
  // that its experts sit on few nodes. 0: routing over all experts.
  double expert_groups = 0, group_top_k = 0;
  double moe_layer_freq = 1;      // every k-th layer (after dense_layers_first) is a MoE layer
  double dense_layers_first = 0;  // the first n layers keep a dense MLP (ffn_hidden)
  double capacity_factor = 0;     // 0: dropless; else tokens per expert are capped (and padded) to it
  double mtp_layers = 0;          // multi-token-prediction layers after the decoder (last stage)
  Mla mla;
  bool gated_mlp = false;       // SwiGLU-style MLP (three weight matrices)
  bool tie_embeddings = false;  // the output layer shares the input embedding
  // The MLP's nonlinearity: "swiglu" (gated_mlp), "gelu" or "squared_relu" (Nemotron). It costs the
  // same memory-bound work either way; the launch arguments name it.
  std::string activation;
  // Rotary position embeddings and their base; 0: learned absolute positions (GPT-2/3 style).
  double rope_base = 0;
  // Llama-class: SwiGLU, MLA, MTP or MoE, which Megatron-LM builds with RMSNorm, rotary embeddings
  // and no linear biases.
  bool llama_class() const { return gated_mlp || mla.on() || mtp_layers > 0 || moe(); }
  // Queries and keys rotated in every layer: a rope_base, a Llama-class model or a Nemotron-style one
  // (squared ReLU), which are built with rotary embeddings (the launch arguments say the same).
  // Otherwise GPT-style learned absolute positions, added once at the embedding.
  bool rotary() const { return rope_base > 0 || llama_class() || activation == "squared_relu"; }

  bool moe() const { return experts > 1; }
  double head_dim() const { return head_dim_given > 0 ? head_dim_given : hidden / heads; }
  // Per-head widths of queries/keys and of values (different under MLA).
  double qk_head_dim() const { return mla.on() ? mla.qk_nope_head_dim + mla.qk_rope_head_dim : head_dim(); }
  double v_head_dim() const { return mla.on() ? mla.v_head_dim : head_dim(); }
  double q_dim() const { return heads * qk_head_dim(); }  // all query heads
  double kv_dim() const { return kv_heads * head_dim(); }  // key (or value) heads, without MLA
  double mlp_matrices() const { return gated_mlp ? 3 : 2; }

  // Whether decoder layer i (0-based) has a MoE MLP, and how many of the model's layers do.
  bool moe_layer(double i) const;
  double moe_layers() const;

  // Parameters of one layer's attention, of a dense MLP, of one MoE MLP (routed and shared experts,
  // router) and of a layer's norms.
  double attention_params() const;
  double dense_mlp_params() const { return mlp_matrices() * hidden * ffn_hidden; }
  double routed_expert_params() const { return mlp_matrices() * hidden * expert_ffn_hidden; }  // one expert
  double shared_mlp_params() const { return shared_experts * mlp_matrices() * hidden * shared_expert_ffn_hidden; }
  double moe_mlp_params() const { return experts * routed_expert_params() + shared_mlp_params() + hidden * experts; }
  double embedding_params() const { return vocab * hidden; }
  // One multi-token-prediction layer: a decoder layer plus its input projection (2h -> h) and norms.
  double mtp_layer_params() const;
  double total_params() const;
  // Parameters one token goes through (all of a dense model; top_k experts of a MoE layer).
  double active_params() const;

  // Model FLOPs of one token's forward pass, counted as Megatron-LM and NeMo count them: 2 per
  // multiply-add, attention scores and values over the causal half of the sequence, the MoE's
  // top_k (and shared) experts, the output layer (and one per MTP layer).
  double forward_flops_per_token() const;
};

// Names of the built-in presets.
std::vector<std::string> preset_names();

// Whether `name` names a built-in preset, as a workload's "preset" field would read it (without
// case and punctuation, an alias, or the only preset with all its words).
bool names_a_preset(const std::string& name);

// Parses the workload's "model" object: {"preset": "llama3-70b", <overrides>} or explicit
// dimensions. Throws std::invalid_argument naming the field under `where`.
Model parse_model(const nlohmann::json& j, const std::string& where);

}  // namespace cotune_llm

#endif
