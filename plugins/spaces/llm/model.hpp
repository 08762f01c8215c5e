// A decoder-only transformer: its dimensions, the presets, and counts derived from them.
#ifndef COTUNE_PLUGINS_SPACES_LLM_MODEL_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_MODEL_HPP_

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace cotune_llm {

struct Model {
  std::string name;        // the preset name, or "custom"
  double layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn_hidden = 0, vocab = 0, seq_len = 0;
  double experts = 1, top_k = 1, expert_ffn_hidden = 0;  // experts > 1: mixture of experts
  bool gated_mlp = false;       // SwiGLU-style MLP (three weight matrices)
  bool tie_embeddings = false;  // the output layer shares the input embedding

  bool moe() const { return experts > 1; }
  double head_dim() const { return hidden / heads; }
  double kv_dim() const { return kv_heads * head_dim(); }
  double mlp_matrices() const { return gated_mlp ? 3 : 2; }
  // Parameters of one layer's attention (QKV + output projection) and MLP (all experts + router).
  double attention_params() const { return hidden * (hidden + 2 * kv_dim()) + hidden * hidden; }
  double mlp_params() const {
    return moe() ? experts * mlp_matrices() * hidden * expert_ffn_hidden + hidden * experts
                 : mlp_matrices() * hidden * ffn_hidden;
  }
  double total_params() const {
    return layers * (attention_params() + mlp_params() + 2 * hidden) + vocab * hidden * (tie_embeddings ? 1 : 2);
  }
  // Model FLOPs of one token's forward pass (Megatron-LM convention: attention scores counted in
  // full, 2 FLOPs per multiply-add; the MoE counts the top_k experts a token visits).
  double forward_flops_per_token() const;
};

// Names of the built-in presets.
std::vector<std::string> preset_names();

// Parses the workload's "model" object: {"preset": "llama3-70b", <overrides>} or explicit
// dimensions. Throws std::invalid_argument naming the field under `where`.
Model parse_model(const nlohmann::json& j, const std::string& where);

}  // namespace cotune_llm

#endif
