// Model presets (published architectures), the parser of the workload's "model" object and the
// parameter and FLOP counts of a model.
#include "model.hpp"

#include <cotune/support/likely_meant.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace cotune_llm {
namespace {

constexpr const char* kMlaFields = "q_lora_rank, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, v_head_dim";
constexpr const char* kModelFields =
    "preset, layers, hidden, heads, kv_heads, head_dim, ffn_hidden, vocab, seq_len, experts, top_k, expert_ffn_hidden, "
    "shared_experts, shared_expert_ffn_hidden, expert_groups, group_top_k, moe_layer_freq, dense_layers_first, capacity_factor, mla, mtp_layers, "
    "gated_mlp, tie_embeddings, activation, rope_base";

using nlohmann::json;

// Each preset is the model object it stands for (and "aliases": other names of it, such as
// Korthikanti et al.'s gpt-175b); docs/workloads.md cites the source of each.
// GPT-3 (Brown et al. 2020, vocab padded to 51200 as in Megatron-LM); the GPT models of Megatron-LM
// SC'21 Table 1 and Korthikanti et al. MLSys'23; NeMo's GPT-3 5B/20B and Nemotron configs; MPT
// (MosaicML llm-foundry); Llama 2/3/3.1 (Meta); Mixtral (Mistral AI); Qwen3 (Alibaba); DeepSeek-V3;
// Kimi K2 (Moonshot AI); gpt-oss (OpenAI).
constexpr const char* kPresetsJson = R"json([
 {"preset": "gpt3-175b", "aliases": ["gpt-175b"], "layers": 96, "hidden": 12288, "heads": 96, "ffn_hidden": 49152, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt3-5b", "layers": 24, "hidden": 4096, "heads": 32, "ffn_hidden": 16384, "vocab": 50304, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt3-20b", "layers": 44, "hidden": 6144, "heads": 48, "ffn_hidden": 24576, "vocab": 50304, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "llama2-7b", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 11008, "vocab": 32000, "seq_len": 4096, "gated_mlp": true, "rope_base": 10000},
 {"preset": "llama2-13b", "layers": 40, "hidden": 5120, "heads": 40, "ffn_hidden": 13824, "vocab": 32000, "seq_len": 4096, "gated_mlp": true, "rope_base": 10000},
 {"preset": "llama2-70b", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672, "vocab": 32000, "seq_len": 4096, "gated_mlp": true, "rope_base": 10000},
 {"preset": "llama3-8b", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "vocab": 128256, "seq_len": 8192, "gated_mlp": true, "rope_base": 500000},
 {"preset": "llama3-70b", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672, "vocab": 128256, "seq_len": 8192, "gated_mlp": true, "rope_base": 500000},
 {"preset": "llama3-405b", "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8, "ffn_hidden": 53248, "vocab": 128256, "seq_len": 8192, "gated_mlp": true, "rope_base": 500000},
 {"preset": "llama3.1-8b", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "vocab": 128256, "seq_len": 8192, "gated_mlp": true, "rope_base": 500000},
 {"preset": "llama3.1-70b", "layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672, "vocab": 128256, "seq_len": 8192, "gated_mlp": true, "rope_base": 500000},
 {"preset": "llama3.1-405b", "layers": 126, "hidden": 16384, "heads": 128, "kv_heads": 8, "ffn_hidden": 53248, "vocab": 128256, "seq_len": 8192, "gated_mlp": true, "rope_base": 500000},
 {"preset": "mixtral-8x7b", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "vocab": 32000, "seq_len": 4096, "experts": 8, "top_k": 2, "gated_mlp": true, "rope_base": 1000000},
 {"preset": "mixtral-8x22b", "layers": 56, "hidden": 6144, "heads": 48, "kv_heads": 8, "ffn_hidden": 16384, "vocab": 32768, "seq_len": 4096, "experts": 8, "top_k": 2, "gated_mlp": true, "rope_base": 1000000},
 {"preset": "qwen3-30b-a3b", "layers": 48, "hidden": 2048, "heads": 32, "kv_heads": 4, "head_dim": 128, "ffn_hidden": 6144, "vocab": 151936, "seq_len": 4096, "experts": 128, "top_k": 8, "expert_ffn_hidden": 768, "gated_mlp": true, "rope_base": 1000000},
 {"preset": "qwen3-235b-a22b", "layers": 94, "hidden": 4096, "heads": 64, "kv_heads": 4, "head_dim": 128, "ffn_hidden": 12288, "vocab": 151936, "seq_len": 4096, "experts": 128, "top_k": 8, "expert_ffn_hidden": 1536, "gated_mlp": true, "rope_base": 1000000},
 {"preset": "deepseek-v3", "layers": 61, "hidden": 7168, "heads": 128, "ffn_hidden": 18432, "vocab": 129280, "seq_len": 4096, "experts": 256, "top_k": 8, "expert_ffn_hidden": 2048, "shared_experts": 1, "shared_expert_ffn_hidden": 2048, "expert_groups": 8, "group_top_k": 4, "dense_layers_first": 3, "mtp_layers": 1, "gated_mlp": true, "rope_base": 10000,
  "mla": {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}},
 {"preset": "kimi-k2", "layers": 61, "hidden": 7168, "heads": 64, "ffn_hidden": 18432, "vocab": 163840, "seq_len": 4096, "experts": 384, "top_k": 8, "expert_ffn_hidden": 2048, "shared_experts": 1, "shared_expert_ffn_hidden": 2048, "dense_layers_first": 1, "gated_mlp": true, "rope_base": 10000,
  "mla": {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}},
 {"preset": "gpt-oss-120b", "layers": 36, "hidden": 2880, "heads": 64, "kv_heads": 8, "head_dim": 64, "ffn_hidden": 2880, "vocab": 201088, "seq_len": 4096, "experts": 128, "top_k": 4, "expert_ffn_hidden": 2880, "gated_mlp": true, "rope_base": 150000},
 {"preset": "nemotron-8b", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 16384, "vocab": 256000, "seq_len": 4096, "activation": "squared_relu", "rope_base": 10000},
 {"preset": "nemotron-22b", "layers": 40, "hidden": 6144, "heads": 48, "ffn_hidden": 24576, "vocab": 256000, "seq_len": 4096, "activation": "squared_relu", "rope_base": 10000},
 {"preset": "nemotron-4-340b", "layers": 96, "hidden": 18432, "heads": 96, "kv_heads": 8, "ffn_hidden": 73728, "vocab": 256000, "seq_len": 4096, "activation": "squared_relu", "rope_base": 10000},
 {"preset": "gpt-1.7b", "layers": 24, "hidden": 2304, "heads": 24, "ffn_hidden": 9216, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt-3.6b", "layers": 30, "hidden": 3072, "heads": 32, "ffn_hidden": 12288, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt-7.5b", "layers": 36, "hidden": 4096, "heads": 32, "ffn_hidden": 16384, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt-18.4b", "layers": 40, "hidden": 6144, "heads": 48, "ffn_hidden": 24576, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt-22b", "layers": 48, "hidden": 6144, "heads": 64, "ffn_hidden": 24576, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt-39.1b", "layers": 48, "hidden": 8192, "heads": 64, "ffn_hidden": 32768, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt-76.1b", "layers": 60, "hidden": 10240, "heads": 80, "ffn_hidden": 40960, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt-145.6b", "layers": 80, "hidden": 12288, "heads": 96, "ffn_hidden": 49152, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt-310.1b", "layers": 96, "hidden": 16384, "heads": 128, "ffn_hidden": 65536, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt-529.6b", "aliases": ["gpt-530b"], "layers": 105, "hidden": 20480, "heads": 128, "ffn_hidden": 81920, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "gpt-1t", "layers": 128, "hidden": 25600, "heads": 160, "ffn_hidden": 102400, "vocab": 51200, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "mpt-1b", "layers": 24, "hidden": 2048, "heads": 16, "ffn_hidden": 8192, "vocab": 50432, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "mpt-7b", "layers": 32, "hidden": 4096, "heads": 32, "ffn_hidden": 16384, "vocab": 50432, "seq_len": 2048, "tie_embeddings": true},
 {"preset": "mpt-30b", "layers": 48, "hidden": 7168, "heads": 64, "ffn_hidden": 28672, "vocab": 50432, "seq_len": 8192, "tie_embeddings": true},
 {"preset": "mpt-70b", "layers": 80, "hidden": 8192, "heads": 64, "ffn_hidden": 32768, "vocab": 50432, "seq_len": 2048, "tie_embeddings": true}
])json";

const json& presets() {
  static const json p = json::parse(kPresetsJson);
  return p;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

double positive_int(const json& v, const std::string& at) {
  if (!v.is_number()) throw std::invalid_argument(at + ": expected a positive integer, got " + v.dump());
  const double d = v.get<double>();
  if (!(d >= 1) || d != std::floor(d) || d > 1e12)
    throw std::invalid_argument(at + ": expected a positive integer, got " + v.dump());
  return d;
}

double whole(const json& v, const std::string& at) {  // 0 allowed
  if (!v.is_number()) throw std::invalid_argument(at + ": expected a whole number, got " + v.dump());
  const double d = v.get<double>();
  if (!(d >= 0) || d != std::floor(d) || d > 1e12)
    throw std::invalid_argument(at + ": expected a whole number (0 or more), got " + v.dump());
  return d;
}

bool boolean(const json& v, const std::string& at) {
  if (!v.is_boolean()) throw std::invalid_argument(at + ": expected true or false, got " + v.dump());
  return v.get<bool>();
}

Mla parse_mla(const json& j, const std::string& where) {
  if (!j.is_object())
    throw std::invalid_argument(where + ": expected an object with q_lora_rank, kv_lora_rank, qk_rope_head_dim, "
                                "qk_nope_head_dim, v_head_dim");
  Mla m;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string at = where + "/" + it.key();
    if (it.key() == "q_lora_rank") m.q_lora_rank = whole(it.value(), at);
    else if (it.key() == "kv_lora_rank") m.kv_lora_rank = positive_int(it.value(), at);
    else if (it.key() == "qk_rope_head_dim") m.qk_rope_head_dim = whole(it.value(), at);
    else if (it.key() == "qk_nope_head_dim") m.qk_nope_head_dim = positive_int(it.value(), at);
    else if (it.key() == "v_head_dim") m.v_head_dim = positive_int(it.value(), at);
    else
      throw std::invalid_argument(at + ": unknown field" + cotune::support::did_you_mean_listed(it.key(), kMlaFields) +
                                  " (expected " + kMlaFields + ")");
  }
  for (const char* r : {"kv_lora_rank", "qk_nope_head_dim", "v_head_dim"})
    if (!j.contains(r)) throw std::invalid_argument(where + "/" + r + ": missing (multi-latent attention needs it)");
  return m;
}

// A name in lower case without punctuation ("Llama-3.1 405B" -> "llama31405b"), and its words
// ("llama", "3", "1", "405b").
std::string squeezed(const std::string& name) {
  std::string s;
  for (char ch : name)
    if (std::isalnum(static_cast<unsigned char>(ch))) s += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::vector<std::string> words(const std::string& name) {
  std::vector<std::string> w(1);
  for (char ch : name) {
    if (std::isalnum(static_cast<unsigned char>(ch))) w.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    else if (!w.back().empty()) w.emplace_back();
  }
  if (w.back().empty()) w.pop_back();
  return w;
}

// The preset a name stands for: the exact name; else the only preset equal to it without case and
// punctuation ("LLAMA3_70B", "DeepSeekV3"); else the only preset that has every word of it
// ("Nemotron-340B" is nemotron-4-340b). nullptr when none or several.
// Its name and its aliases.
std::vector<std::string> names_of(const json& preset) {
  std::vector<std::string> names = {preset["preset"].get<std::string>()};
  for (const json& a : preset.value("aliases", json::array())) names.push_back(a.get<std::string>());
  return names;
}

const json* find_preset(const std::string& name) {
  for (const json& pr : presets())
    for (const std::string& n : names_of(pr))
      if (n == name) return &pr;
  const json* found = nullptr;
  int matches = 0;
  const std::string wanted = squeezed(name);
  for (const json& pr : presets()) {
    bool same = false;
    for (const std::string& n : names_of(pr)) same = same || squeezed(n) == wanted;
    if (same) found = &pr, ++matches;
  }
  if (matches == 1) return found;
  if (matches > 1) return nullptr;
  const std::vector<std::string> want = words(name);
  if (want.empty()) return nullptr;
  for (const json& pr : presets()) {
    const std::vector<std::string> have = words(pr["preset"].get<std::string>());
    bool all = true;
    for (const std::string& w : want) all = all && std::find(have.begin(), have.end(), w) != have.end();
    if (all) found = &pr, ++matches;
  }
  return matches == 1 ? found : nullptr;
}

// The model fields as one merged object: the preset's, then the object's own.
json merged_fields(const json& j, const std::string& where, std::string* preset_name) {
  if (!j.contains("preset")) return j;
  const json& p = j["preset"];
  if (!p.is_string()) throw std::invalid_argument(where + "/preset: expected a preset name (string)");
  if (const json* pr = find_preset(p.get<std::string>())) {
    *preset_name = (*pr)["preset"].get<std::string>();
    json m = *pr;
    m.erase("aliases");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "preset") m[it.key()] = it.value();
    return m;
  }
  std::string list;
  for (const auto& n : preset_names()) list += (list.empty() ? "" : ", ") + n;
  throw std::invalid_argument(where + "/preset: unknown preset '" + p.get<std::string>() + "'" +
                              cotune::support::did_you_mean(p.get<std::string>(), preset_names()) + " (expected one of " +
                              list + ")");
}

}  // namespace

bool Model::moe_layer(double i) const {
  if (!moe() || i < dense_layers_first) return false;
  return std::fmod(i - dense_layers_first, moe_layer_freq) == 0;
}

double Model::moe_layers() const {
  if (!moe()) return 0;
  const double routed = layers - dense_layers_first;
  return routed <= 0 ? 0 : std::ceil(routed / moe_layer_freq);
}

double Model::attention_params() const {
  if (!mla.on()) return hidden * (q_dim() + 2 * kv_dim()) + q_dim() * hidden;
  const double q_head = qk_head_dim();
  const double q = mla.q_lora_rank > 0 ? hidden * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * heads * q_head
                                       : hidden * heads * q_head;
  const double kv = hidden * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank +
                    mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim);
  return q + kv + heads * mla.v_head_dim * hidden;
}

double Model::mtp_layer_params() const {
  const double mlp = moe() ? moe_mlp_params() : dense_mlp_params();
  return attention_params() + mlp + 2 * hidden + 2 * hidden * hidden + 2 * hidden;
}

double Model::total_params() const {
  const double n_moe = moe_layers();
  const double per_layer = attention_params() + 2 * hidden;
  const double mlps = n_moe * moe_mlp_params() + (layers - n_moe) * dense_mlp_params();
  return layers * per_layer + mlps + embedding_params() * (tie_embeddings ? 1 : 2) + hidden +
         mtp_layers * mtp_layer_params();
}

double Model::active_params() const {
  const double n_moe = moe_layers();
  const double active_moe = top_k * routed_expert_params() + shared_mlp_params() + hidden * experts;
  return layers * (attention_params() + 2 * hidden) + n_moe * active_moe + (layers - n_moe) * dense_mlp_params() +
         embedding_params() * (tie_embeddings ? 1 : 2);
}

namespace {

// Forward FLOPs per token with the attention core over `keys` keys per query.
double flops_per_token(const Model& m, double keys) {
  const double core = 2 * keys * m.heads * (m.qk_head_dim() + m.v_head_dim());
  const double latent_norms = m.mla.on() ? m.mla.q_lora_rank + m.mla.kv_lora_rank : 0;  // weights, not products
  const double attention = 2 * (m.attention_params() - latent_norms) + core;
  const double dense = 2 * m.dense_mlp_params();
  const double moe = m.top_k * 2 * m.routed_expert_params() + 2 * m.shared_mlp_params() + 2 * m.hidden * m.experts;
  const double n_moe = m.moe_layers();
  const double decoder = m.layers * attention + n_moe * moe + (m.layers - n_moe) * dense;
  const double mtp = m.mtp_layers * (attention + (m.moe() ? moe : dense) + 2 * 2 * m.hidden * m.hidden +
                                     2 * m.hidden * m.vocab);
  return decoder + 2 * m.hidden * m.vocab + mtp;
}

// Group-limited routing as Megatron-LM checks it (moe_router_num_groups, moe_router_group_topk):
// both or neither, whole groups of experts, and at least one of the token's experts per chosen group
// (groups are scored by their best top_k / group_top_k experts). `given` is what the user wrote:
// values a preset set are said to be the preset's.
void check_expert_groups(Model& m, const json& fields, const json& given, const std::string& where,
                         const std::string& preset) {
  const bool groups = fields.contains("expert_groups"), chosen = fields.contains("group_top_k");
  if (groups != chosen)
    throw std::invalid_argument(where + "/" + (groups ? "group_top_k" : "expert_groups") +
                                ": missing (group-limited routing needs expert_groups and group_top_k)");
  if (!groups) return;
  const std::string from = given.contains("expert_groups") && given.contains("group_top_k")
                               ? ""
                               : " (preset " + preset + " sets them; expert_groups 1 and group_top_k 1 route over all experts)";
  if (m.group_top_k > m.expert_groups)
    throw std::invalid_argument(where + "/group_top_k: must not exceed expert_groups (" + num(m.expert_groups) +
                                "), got " + num(m.group_top_k) + from);
  if (m.expert_groups == 1 || m.group_top_k == m.expert_groups) {
    m.expert_groups = m.group_top_k = 0;  // every group chosen: routing over all experts
    return;
  }
  if (std::fmod(m.experts, m.expert_groups) != 0)
    throw std::invalid_argument(where + "/expert_groups: must divide experts (" + num(m.experts) + "), got " +
                                num(m.expert_groups) + from);
  if (m.top_k < m.group_top_k)
    throw std::invalid_argument(where + "/group_top_k: must not exceed top_k (" + num(m.top_k) + "): each chosen group " +
                                "is scored by its best top_k / group_top_k experts, got " + num(m.group_top_k) + from);
  if (m.top_k > m.group_top_k * m.experts / m.expert_groups)
    throw std::invalid_argument(where + "/group_top_k: the " + num(m.group_top_k) + " chosen groups hold " +
                                num(m.group_top_k * m.experts / m.expert_groups) + " experts, fewer than top_k (" +
                                num(m.top_k) + ")" + from);
}

}  // namespace

double Model::forward_flops_per_token() const { return flops_per_token(*this, seq_len / 2); }

bool names_a_preset(const std::string& name) { return find_preset(name) != nullptr; }

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const json& p : presets()) names.push_back(p["preset"].get<std::string>());
  return names;
}

Model parse_model(const json& j, const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument(where + ": expected an object with \"preset\" or explicit dimensions");
  Model m;
  m.name = "custom";
  std::string preset;
  const json fields = merged_fields(j, where, &preset);
  bool kv_given = false, ffn_given = false, top_k_given = false;
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    const std::string& k = it.key();
    const std::string at = where + "/" + k;
    const json& v = it.value();
    if (k == "preset") continue;
    if (k == "layers") m.layers = positive_int(v, at);
    else if (k == "hidden") m.hidden = positive_int(v, at);
    else if (k == "heads") m.heads = positive_int(v, at);
    else if (k == "kv_heads") m.kv_heads = positive_int(v, at), kv_given = true;
    else if (k == "head_dim") m.head_dim_given = positive_int(v, at);
    else if (k == "ffn_hidden") m.ffn_hidden = positive_int(v, at), ffn_given = true;
    else if (k == "vocab") m.vocab = positive_int(v, at);
    else if (k == "seq_len") m.seq_len = positive_int(v, at);
    else if (k == "experts") m.experts = positive_int(v, at);
    else if (k == "top_k") m.top_k = positive_int(v, at), top_k_given = true;
    else if (k == "expert_ffn_hidden") m.expert_ffn_hidden = positive_int(v, at);
    else if (k == "shared_experts") m.shared_experts = whole(v, at);
    else if (k == "shared_expert_ffn_hidden") m.shared_expert_ffn_hidden = positive_int(v, at);
    else if (k == "expert_groups") m.expert_groups = positive_int(v, at);
    else if (k == "group_top_k") m.group_top_k = positive_int(v, at);
    else if (k == "moe_layer_freq") m.moe_layer_freq = positive_int(v, at);
    else if (k == "dense_layers_first") m.dense_layers_first = whole(v, at);
    else if (k == "capacity_factor") {
      if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > 64)
        throw std::invalid_argument(at + ": expected a number in [0, 64] (0: dropless), got " + v.dump());
      m.capacity_factor = v.get<double>();
    } else if (k == "mtp_layers") m.mtp_layers = whole(v, at);
    else if (k == "mla") m.mla = parse_mla(v, at);
    else if (k == "gated_mlp") m.gated_mlp = boolean(v, at);
    else if (k == "tie_embeddings") m.tie_embeddings = boolean(v, at);
    else if (k == "activation") {
      if (!v.is_string() || (v != "swiglu" && v != "gelu" && v != "squared_relu"))
        throw std::invalid_argument(at + ": expected \"swiglu\", \"gelu\" or \"squared_relu\", got " + v.dump());
      m.activation = v.get<std::string>();
    } else if (k == "rope_base") {
      if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > 1e12)
        throw std::invalid_argument(at + ": expected a number >= 0 (0: learned absolute positions), got " + v.dump());
      m.rope_base = v.get<double>();
    } else
      throw std::invalid_argument(at + ": unknown model field" + cotune::support::did_you_mean_listed(k, kModelFields) +
                                  " (expected " + kModelFields + ")");
  }
  // SwiGLU is the gated MLP; the others have two matrices.
  if (m.activation.empty()) m.activation = m.gated_mlp ? "swiglu" : "gelu";
  else if (m.activation == "swiglu") m.gated_mlp = true;
  else if (m.gated_mlp)
    throw std::invalid_argument(where + "/activation: " + m.activation + " is not gated, but gated_mlp is true");
  if (!preset.empty()) m.name = j.size() > 1 ? preset + "+overrides" : preset;
  if (preset.empty()) {
    for (const char* r : {"layers", "hidden", "heads", "vocab", "seq_len"})
      if (!j.contains(r)) throw std::invalid_argument(where + "/" + r + ": missing (needed without a preset)");
  }
  if (!kv_given) m.kv_heads = m.heads;
  if (!ffn_given) m.ffn_hidden = 4 * m.hidden;
  if (m.head_dim_given == 0 && !m.mla.on() && std::fmod(m.hidden, m.heads) != 0)
    throw std::invalid_argument(where + "/heads: hidden (" + num(m.hidden) + ") must be divisible by heads (" +
                                num(m.heads) + "), or give head_dim");
  if (m.kv_heads > m.heads || std::fmod(m.heads, m.kv_heads) != 0)
    throw std::invalid_argument(where + "/kv_heads: must divide heads (" + num(m.heads) + "), got " + num(m.kv_heads));
  if (m.mla.on() && kv_given && m.kv_heads != m.heads)
    throw std::invalid_argument(where + "/kv_heads: multi-latent attention has one key/value head per query head");
  if (m.moe()) {
    if (m.expert_ffn_hidden == 0) m.expert_ffn_hidden = m.ffn_hidden;
    if (!top_k_given) m.top_k = 2;  // Megatron-LM's --moe-router-topk default, as a table row reads it
    if (m.top_k > m.experts)
      throw std::invalid_argument(where + "/top_k: must not exceed experts (" + num(m.experts) + ")");
    if (m.dense_layers_first >= m.layers)
      throw std::invalid_argument(where + "/dense_layers_first: must be below layers (" + num(m.layers) +
                                  "), or the model has no MoE layer");
    check_expert_groups(m, fields, j, where, preset);
  } else {
    if (m.top_k != 1)
      throw std::invalid_argument(where + "/top_k: only a mixture of experts (experts > 1) routes to top_k experts");
    for (const char* f : {"shared_experts", "moe_layer_freq", "dense_layers_first", "capacity_factor", "expert_groups",
                          "group_top_k"})
      if (j.contains(f)) throw std::invalid_argument(where + "/" + f + ": only a mixture of experts (experts > 1) has it");
  }
  if (m.shared_experts > 0 && m.shared_expert_ffn_hidden == 0) m.shared_expert_ffn_hidden = m.expert_ffn_hidden;
  if (m.shared_experts == 0 && j.contains("shared_expert_ffn_hidden"))
    throw std::invalid_argument(where + "/shared_expert_ffn_hidden: set shared_experts too (how many shared experts)");
  return m;
}

}  // namespace cotune_llm
