// Model presets (published architectures) and the parser of the workload's "model" object.
#include "model.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace cotune_llm {
namespace {

using nlohmann::json;

struct Preset {
  const char* name;
  double layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq_len, experts, top_k, expert_ffn;
  bool gated, tied;
};

// GPT-3 (Brown et al. 2020, vocab padded to 51200 as in Megatron-LM); Llama 3 (Meta 2024);
// Mixtral 8x7B (Mistral 2024); the GPT models of Megatron-LM SC'21 Table 1 and Korthikanti et al.
// MLSys'23; MPT (MosaicML llm-foundry).
const Preset kPresets[] = {
    {"gpt3-175b", 96, 12288, 96, 96, 49152, 51200, 2048, 1, 1, 0, false, true},
    {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 1, 1, 0, true, false},
    {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 1, 1, 0, true, false},
    {"llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, 1, 1, 0, true, false},
    {"mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096, 8, 2, 14336, true, false},
    {"gpt-1.7b", 24, 2304, 24, 24, 9216, 51200, 2048, 1, 1, 0, false, true},
    {"gpt-3.6b", 30, 3072, 32, 32, 12288, 51200, 2048, 1, 1, 0, false, true},
    {"gpt-7.5b", 36, 4096, 32, 32, 16384, 51200, 2048, 1, 1, 0, false, true},
    {"gpt-18.4b", 40, 6144, 48, 48, 24576, 51200, 2048, 1, 1, 0, false, true},
    {"gpt-22b", 48, 6144, 64, 64, 24576, 51200, 2048, 1, 1, 0, false, true},
    {"gpt-39.1b", 48, 8192, 64, 64, 32768, 51200, 2048, 1, 1, 0, false, true},
    {"gpt-76.1b", 60, 10240, 80, 80, 40960, 51200, 2048, 1, 1, 0, false, true},
    {"gpt-145.6b", 80, 12288, 96, 96, 49152, 51200, 2048, 1, 1, 0, false, true},
    {"gpt-310.1b", 96, 16384, 128, 128, 65536, 51200, 2048, 1, 1, 0, false, true},
    {"gpt-529.6b", 105, 20480, 128, 128, 81920, 51200, 2048, 1, 1, 0, false, true},
    {"gpt-1t", 128, 25600, 160, 160, 102400, 51200, 2048, 1, 1, 0, false, true},
    {"mpt-1b", 24, 2048, 16, 16, 8192, 50432, 2048, 1, 1, 0, false, true},
    {"mpt-7b", 32, 4096, 32, 32, 16384, 50432, 2048, 1, 1, 0, false, true},
    {"mpt-30b", 48, 7168, 64, 64, 28672, 50432, 8192, 1, 1, 0, false, true},
    {"mpt-70b", 80, 8192, 64, 64, 32768, 50432, 2048, 1, 1, 0, false, true},
};

double positive_int(const json& v, const std::string& at) {
  if (!v.is_number()) throw std::invalid_argument(at + ": expected a positive integer, got " + v.dump());
  const double d = v.get<double>();
  if (!(d >= 1) || d != std::floor(d) || d > 1e12)
    throw std::invalid_argument(at + ": expected a positive integer, got " + v.dump());
  return d;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

bool boolean(const json& v, const std::string& at) {
  if (!v.is_boolean()) throw std::invalid_argument(at + ": expected true or false, got " + v.dump());
  return v.get<bool>();
}

}  // namespace

double Model::forward_flops_per_token() const {
  const double attn = 2 * attention_params() + 4 * seq_len * hidden;
  const double mlp = moe() ? top_k * 2 * mlp_matrices() * hidden * expert_ffn_hidden + 2 * hidden * experts
                           : 2 * mlp_matrices() * hidden * ffn_hidden;
  return layers * (attn + mlp) + 2 * hidden * vocab;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

Model parse_model(const json& j, const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument(where + ": expected an object with \"preset\" or explicit dimensions");
  Model m;
  m.name = "custom";
  bool have_preset = false;
  if (j.contains("preset")) {
    const json& p = j["preset"];
    if (!p.is_string()) throw std::invalid_argument(where + "/preset: expected a preset name (string)");
    const std::string name = p.get<std::string>();
    for (const Preset& pr : kPresets) {
      if (name != pr.name) continue;
      have_preset = true;
      m.name = pr.name;
      m.layers = pr.layers, m.hidden = pr.hidden, m.heads = pr.heads, m.kv_heads = pr.kv_heads;
      m.ffn_hidden = pr.ffn_hidden, m.vocab = pr.vocab, m.seq_len = pr.seq_len;
      m.experts = pr.experts, m.top_k = pr.top_k, m.expert_ffn_hidden = pr.expert_ffn;
      m.gated_mlp = pr.gated, m.tie_embeddings = pr.tied;
    }
    if (!have_preset) {
      std::string list;
      for (const auto& n : preset_names()) list += (list.empty() ? "" : ", ") + n;
      throw std::invalid_argument(where + "/preset: unknown preset '" + name + "' (expected one of " + list + ")");
    }
  }
  bool kv_given = false, ffn_given = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const std::string at = where + "/" + k;
    const json& v = it.value();
    if (k == "preset") continue;
    if (k == "layers") m.layers = positive_int(v, at);
    else if (k == "hidden") m.hidden = positive_int(v, at);
    else if (k == "heads") m.heads = positive_int(v, at);
    else if (k == "kv_heads") m.kv_heads = positive_int(v, at), kv_given = true;
    else if (k == "ffn_hidden") m.ffn_hidden = positive_int(v, at), ffn_given = true;
    else if (k == "vocab") m.vocab = positive_int(v, at);
    else if (k == "seq_len") m.seq_len = positive_int(v, at);
    else if (k == "experts") m.experts = positive_int(v, at);
    else if (k == "top_k") m.top_k = positive_int(v, at);
    else if (k == "expert_ffn_hidden") m.expert_ffn_hidden = positive_int(v, at);
    else if (k == "gated_mlp") m.gated_mlp = boolean(v, at);
    else if (k == "tie_embeddings") m.tie_embeddings = boolean(v, at);
    else
      throw std::invalid_argument(at + ": unknown model field (expected preset, layers, hidden, heads, kv_heads, "
                                  "ffn_hidden, vocab, seq_len, experts, top_k, expert_ffn_hidden, gated_mlp, "
                                  "tie_embeddings)");
  }
  if (have_preset && j.size() > 1) m.name += "+overrides";
  if (!have_preset) {
    const char* required[] = {"layers", "hidden", "heads", "vocab", "seq_len"};
    for (const char* r : required)
      if (!j.contains(r)) throw std::invalid_argument(where + "/" + r + ": missing (needed without a preset)");
    if (!kv_given) m.kv_heads = m.heads;
    if (!ffn_given) m.ffn_hidden = 4 * m.hidden;
  }
  if (std::fmod(m.hidden, m.heads) != 0)
    throw std::invalid_argument(where + "/heads: hidden (" + num(m.hidden) + ") must be divisible by heads (" +
                                num(m.heads) + ")");
  if (m.kv_heads > m.heads || std::fmod(m.heads, m.kv_heads) != 0)
    throw std::invalid_argument(where + "/kv_heads: must divide heads (" + num(m.heads) + "), got " +
                                num(m.kv_heads));
  if (m.moe()) {
    if (m.expert_ffn_hidden == 0) m.expert_ffn_hidden = m.ffn_hidden;
    if (m.top_k > m.experts)
      throw std::invalid_argument(where + "/top_k: must not exceed experts (" + num(m.experts) + ")");
  } else if (m.top_k != 1) {
    throw std::invalid_argument(where + "/top_k: only a mixture of experts (experts > 1) routes to top_k experts");
  }
  return m;
}

}  // namespace cotune_llm
