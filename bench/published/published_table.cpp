// Reading tables of published runs (see published_table.hpp).
#include "published/published_table.hpp"

#include <cotune/core/history/csv.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

namespace cotune::core::perf {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool contains_word(const std::string& text, const char* word) { return lower(text).find(word) != std::string::npos; }

bool number(const std::string& text, double* out) {
  if (text.empty()) return false;
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used != text.size() || !std::isfinite(v)) return false;
    *out = v;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// SwiGLU by model family (see the header), or nullopt when the name says nothing.
int gated_by_family(const std::string& model) {
  for (const char* g : {"llama", "qwen", "mistral", "mixtral", "deepseek", "kimi", "gpt-oss", "gpt oss", "gpt_oss",
                        "gptoss", "gemma", "olmo", "yi-"})
    if (contains_word(model, g)) return 1;
  for (const char* n : {"gpt", "mpt", "nemotron", "opt-", "bloom", "falcon", "starcoder"})
    if (contains_word(model, n)) return 0;
  return -1;
}

// Rotary embeddings by family where the MLP does not say it (a gated MLP is rotary anyway, as is a
// squared-ReLU one): Nemotron, Falcon, GPT-NeoX/Pythia, GPT-J and StarCoder2 rotate; GPT-2/3, OPT,
// BLOOM and MPT (ALiBi) do not.
bool rotary_by_family(const std::string& model) {
  for (const char* r : {"nemotron", "falcon", "neox", "pythia", "gpt-j", "gptj", "starcoder2"})
    if (contains_word(model, r)) return true;
  return false;
}

// The catalogue name of a GPU as tables write it (its own spelling when the catalogue has no match:
// the row is then refused by the GPU check).
std::string catalogue_gpu(const std::string& gpu) {
  const std::string name = catalogue_gpu_name(gpu);
  return name.empty() ? lower(gpu) : name;
}

// Free text (notes, a model variant) as words in lower case, with a "|" where a clause ends: at a
// comma, semicolon, '+' or '&', and at the words "and" and "with" ("no AC + torch.compile": the
// negation is another clause's). Brackets, colons and '=' only separate words ("torch.compile (off)",
// "compile: False").
std::vector<std::string> clause_words(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    if (cur.empty()) return;
    out.push_back(cur == "and" || cur == "with" ? "|" : cur);
    cur.clear();
  };
  for (char ch : lower(text)) {
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '/') {
      cur += ch;
    } else {
      flush();
      if (ch == ',' || ch == ';' || ch == '+' || ch == '&' || ch == '\n') out.push_back("|");
    }
  }
  flush();
  return out;
}

bool negation(const std::string& w) {
  for (const char* n : {"no", "not", "w/o", "without", "disable", "disabled", "never", "non"})
    if (w == n) return true;
  return false;
}

// Where the words of `text` mention `phrase` (its words in order, e.g. {"async", "tp"} or
// {"asynctp"}): `affirmed` when some mention stands without a negation right before it ("no",
// "w/o", "disabled", ...: "no token-drop"), `negated` when some mention has one.
struct Mention {
  bool affirmed = false, negated = false;
};
Mention mention(const std::vector<std::string>& words, const std::vector<std::string>& phrase) {
  Mention m;
  for (size_t i = 0; i + phrase.size() <= words.size(); ++i) {
    if (!std::equal(phrase.begin(), phrase.end(), words.begin() + long(i))) continue;
    (i > 0 && negation(words[i - 1]) ? m.negated : m.affirmed) = true;
  }
  return m;
}

// Whether free text says torch.compile was on: a mention of it ("compile", "compiled", "torch.compile")
// that no negation right before ("no torch.compile", "not using torch.compile", "disabled compile")
// or right after ("torch.compile disabled", "compile: False", "compile=0", "torch.compile (off)",
// "torch.compile not used") takes back; "uncompiled" is a negation.
bool says_compiled(const std::string& text) {
  const std::vector<std::string> w = clause_words(text);
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] != "compile" && w[i] != "compiled") continue;
    size_t j = i;
    while (j > 0 && (w[j - 1] == "torch" || w[j - 1] == "using" || w[j - 1] == "use" || w[j - 1] == "used")) --j;
    bool negated = j > 0 && negation(w[j - 1]);
    if (i + 1 < w.size())
      for (const char* off : {"disabled", "off", "false", "0", "no", "not", "unused", "none"})
        negated = negated || w[i + 1] == off;
    if (!negated) return true;
  }
  return false;
}

// How the row's framework runs elementwise work and attention (the llm space's training.kernels):
// the row's own `kernels` cell; else PyTorch-native trainers (by their repository) run eager, or
// compiled where the row says torch.compile was on; everything else (Megatron-LM, NeMo,
// Megatron-Bridge, Megatron-DeepSpeed) runs Transformer Engine's fused kernels.
std::string kernels_of(const std::string& stated, const std::string& repo, const std::vector<std::string>& texts) {
  if (!stated.empty()) return lower(stated);
  const std::string r = lower(repo);
  bool native = false;
  for (const char* n : {"torchtitan", "llm-foundry", "composer", "pytorch/", "torchtune", "huggingface", "transformers",
                        "accelerate", "litgpt", "lit-gpt", "olmo", "fms-fsdp"})
    native = native || r.find(n) != std::string::npos;
  if (!native) return "fused";
  // Each text on its own: the last words of the notes are no clause of the model variant's.
  return std::any_of(texts.begin(), texts.end(), says_compiled) ? "compiled" : "eager";
}

// The recompute cell as the llm space names it: tables also write activation checkpointing as a
// yes/no ("True": every layer, full) or name selective op-level checkpointing.
std::string recompute_of(const std::string& cell) {
  const std::string v = lower(cell);
  if (v == "true" || v == "yes" || v == "1" || v == "on") return "full";
  if (v == "false" || v == "no" || v == "0" || v == "off") return "none";
  if (v == "op" || v == "sac" || v.rfind("selective", 0) == 0) return "selective";  // "selective (op)"
  return v;
}

// The slice's precision: the llm space's word for what the dtype cell says (bfloat16, amp_bf16 and
// bf16-mixed are bf16; MXFP8 and float8 fp8).
std::string dtype_of(const std::string& dtype) {
  const std::string d = lower(dtype);
  if (d.rfind("fp8", 0) == 0 || d.find("mxfp8") != std::string::npos || d.rfind("float8", 0) == 0) return "fp8";
  if (d.rfind("fp4", 0) == 0 || d.find("nvfp4") != std::string::npos) return "fp4";
  if (d.empty() || d.find("bf16") != std::string::npos || d == "bfloat16") return "bf16";
  if (d.find("fp16") != std::string::npos || d == "float16" || d == "half" || d == "16-mixed" || d == "amp") return "fp16";
  return d;
}

// Dense transformer FLOPs per token (forward x 3) as Megatron-LM and NeMo count them, from the
// row's cells; 0 when the row is not a plain dense model. `recomputed`: the layers' forward counted
// a second time, as Megatron-LM's A100 papers count full recomputation (eq. 3: 4 passes over the
// layers, 3 over the output layer).
double dense_flops_per_token(const std::map<std::string, std::string>& c, FlopsConvention conv, bool recomputed = false) {
  auto get = [&](const char* k, double fallback) {
    double v = fallback;
    auto it = c.find(k);
    if (it != c.end()) number(it->second, &v);
    return v;
  };
  const double h = get("hidden", 0), L = get("layers", 0), a = get("heads", 0), s = get("seq_len", 0),
               V = get("vocab", 0);
  if (h <= 0 || L <= 0 || a <= 0 || s <= 0 || V <= 0 || get("experts", 1) > 1) return 0;
  const double kv = get("kv_heads", a), ffn = get("ffn_hidden", 4 * h), hd = get("head_dim", h / a);
  const double mats = c.count("gated_mlp") && c.at("gated_mlp") == "true" ? 3 : 2;
  const double layer_params = L * (h * (a * hd + 2 * kv * hd) + a * hd * h + mats * h * ffn);
  const double keys = conv == FlopsConvention::kCausal ? s / 2 : s;
  return (recomputed ? 4 : 3) * (2 * layer_params + L * 4 * keys * a * hd) + 3 * 2 * V * h;
}

PublishedRow read_row(const CsvTable& t, const CsvRecord& rec) {
  auto cell = [&](const char* name) -> std::string {
    const long i = t.column(name);
    return i < 0 ? std::string() : rec.fields[size_t(i)];
  };
  PublishedRow r;
  r.line = rec.line;
  r.model = cell("model");
  r.variant = cell("model_variant");
  r.version = cell("source_version");
  r.gpu = catalogue_gpu(cell("gpu"));
  r.dtype = dtype_of(cell("dtype"));
  double experts = 1, ep = 1;
  r.moe = (number(cell("experts"), &experts) && experts > 1) || (number(cell("ep"), &ep) && ep > 1);
  auto& c = r.cells;
  for (const char* k : {"hidden", "layers", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "seq_len",
                        "global_batch", "gpus", "tp", "pp", "cp", "gated_mlp", "tie_embeddings", "zero", "sp",
                        "shared_experts", "shared_expert_ffn_hidden", "dense_layers_first", "moe_layer_freq",
                        "capacity_factor", "mtp_layers", "first_stage_layers", "last_stage_layers"})
    if (!cell(k).empty()) c[k] = cell(k);
  if (r.moe) {
    if (!cell("experts").empty()) c["experts"] = cell("experts");
    for (const char* k : {"top_k", "ep", "etp", "expert_groups", "group_top_k"})
      if (!cell(k).empty()) c[k] = cell(k);
    r.etp_unstated = cell("etp").empty();
    r.ep_unstated = cell("ep").empty();
    const std::string expert_ffn = !cell("expert_ffn_hidden").empty() ? cell("expert_ffn_hidden") : cell("moe_ffn_hidden");
    if (!expert_ffn.empty()) c["expert_ffn_hidden"] = expert_ffn;
  }
  if (!r.model.empty()) c["preset"] = r.model;
  if (!c.count("gated_mlp")) {
    int gated = gated_by_family(r.model);
    if (gated < 0) {
      double h = 0, f = 0;
      gated = number(cell("hidden"), &h) && number(cell("ffn_hidden"), &f) && f == 4 * h ? 0 : 1;
    }
    c["gated_mlp_fallback"] = gated ? "true" : "false";  // used when the name is no preset
  }
  if (!c.count("rope_base") && rotary_by_family(r.model)) c["rope_base_fallback"] = "10000";  // likewise
  c["gpu"] = r.gpu;
  c["dtype"] = r.dtype;
  // The FP8 recipe its precision names: the llm space's table reader reads it (MXFP8, blockwise, else
  // per-tensor scaling).
  if (r.dtype == "fp8" && !cell("dtype_detail").empty()) c["dtype_detail"] = cell("dtype_detail");
  if (lower(cell("task")) == "lora") c["peft"] = "lora";  // frozen base weights; sft and pretrain train them all
  // What a model_variant says of the model: DeepSeek-V3 "w/o MTP" drops the preset's multi-token
  // prediction layer; "tokendrop" caps each expert's tokens at the mean (Megatron-Bridge's token-drop
  // recipes: capacity factor 1.0, padded to it).
  const std::vector<std::string> variant = clause_words(r.variant);
  if (!c.count("mtp_layers") && mention(variant, {"mtp"}).negated) c["mtp_layers"] = "0";
  if (r.moe && !c.count("capacity_factor") &&
      (mention(variant, {"tokendrop"}).affirmed || mention(variant, {"token", "drop"}).affirmed))
    c["capacity_factor"] = "1";
  c["kernels"] = kernels_of(cell("kernels"), cell("source_repo"), {cell("notes"), cell("dtype_detail"), r.variant});
  // Megatron-style runs on Ampere ran Megatron-LM as it was before Transformer Engine: attention with
  // the score matrix materialised (its fused softmax; --use-flash-attn came in 2023 and was opt-in),
  // dropout at its defaults (0.1), no sequence parallelism, no distributed optimizer and the
  // gradient all-reduce after the backward: the settings of its A100 papers (the two tuning
  // tables). Not sharded runs (ZeRO-3 and FSDP are DeepSpeed's and PyTorch's runtimes), not
  // PyTorch-native trainers; everything since runs flash attention without dropout. An attention
  // or dropout cell says otherwise.
  double fsdp = 0;
  const bool unsharded = cell("fsdp").empty() || (number(cell("fsdp"), &fsdp) && fsdp == 0);
  const bool ampere_or_older = r.gpu.rfind("a100", 0) == 0 || r.gpu.rfind("v100", 0) == 0;
  const bool megatron_on_ampere = ampere_or_older && c["kernels"] == "fused" && unsharded;
  c["attention"] = !cell("attention").empty() ? lower(cell("attention")) : megatron_on_ampere ? "unfused" : "flash";
  c["dropout"] = !cell("dropout").empty() ? cell("dropout") : megatron_on_ampere ? "true" : "false";
  if (megatron_on_ampere) {
    r.recompute_counted = recompute_of(cell("recompute")) == "full" && c["attention"] == "unfused";
    if (cell("overlap_grad_reduce").empty()) c["overlap_grad_reduce"] = "false";
    if (!c.count("sp")) c["sp"] = "false";
    if (!c.count("zero")) c["zero"] = "0";
  }
  // Megatron-Bridge's performance summary runs its perf recipes, whose precision sets
  // grad_reduce_in_fp32 = False (frameworks/nemo_recipe_fields.md): bf16 gradient buffers.
  if (lower(cell("source_repo")).find("megatron-bridge") != std::string::npos &&
      lower(cell("source_path")).find("performance-summary") != std::string::npos)
    c["grad_reduce"] = "bf16";
  double tp = 1;
  number(cell("tp"), &tp);
  // NVIDIA's performance recipes overlap tensor-parallel communication with the GEMMs on every dense
  // bf16 and fp8 model that uses TP (tp_comm_overlap = True; False on MoE models and in NVFP4:
  // frameworks/nemo_recipe_parallelism.csv). Transformer Engine's userbuffers came with Hopper:
  // NVIDIA's Ampere tables (Megatron-LM's papers) predate them.
  const bool nvidia_recipe = lower(cell("source_repo")).find("nvidia") != std::string::npos && !ampere_or_older;
  // A variant named for it ("AsyncTP": TorchTitan's asynchronous tensor parallelism) overlaps too.
  const bool async_tp = mention(variant, {"asynctp"}).affirmed || mention(variant, {"async", "tp"}).affirmed;
  if (!cell("tp_comm_overlap").empty()) c["tp_comm_overlap"] = cell("tp_comm_overlap");
  else if (tp > 1 && (async_tp || (nvidia_recipe && !r.moe && r.dtype != "fp4"))) c["tp_comm_overlap"] = "true";
  // Their models compute the loss fused (NeMo's and Megatron-Bridge's GPT configs set
  // cross_entropy_loss_fusion; Megatron-LM's own default, which its A100 papers ran, does not).
  if (!cell("cross_entropy_fusion").empty()) c["cross_entropy_fusion"] = cell("cross_entropy_fusion");
  else if (nvidia_recipe) c["cross_entropy_fusion"] = "true";
  // The fsdp cell as the llm space reads it (a degree or FSDP's sharding strategy); not sharded, the
  // distributed optimizer (ZeRO-1: Megatron-Bridge's and NeMo's default).
  if (!c.count("zero")) {
    if (!unsharded) c["fsdp"] = cell("fsdp");
    else c["zero"] = "1";
  }
  if (!c.count("sp")) c["sp"] = tp > 1 ? "true" : "false";
  if (!cell("micro_batch").empty()) c["micro_batch"] = cell("micro_batch");
  else r.micro_batch_unstated = true;
  if (!cell("vpp").empty()) c["vpp"] = cell("vpp");
  else r.vpp_unstated = true;
  std::string recompute = recompute_of(cell("recompute"));
  // TorchTitan checkpoints selectively by default (per operator, its activation_checkpoint mode):
  // an unstated cell there is that default, not a choice left to the fastest fit.
  if (recompute.empty() && lower(cell("source_repo")).find("torchtitan") != std::string::npos) {
    recompute = "selective";
    r.recompute_defaulted = true;
  }
  if (recompute.empty()) r.recompute_unstated = true;
  else c["recompute"] = recompute;

  if (!c.count("hidden") && r.model.empty()) r.refused = "model dimensions unknown";

  // The measurement, as a step time.
  double gbs = 0, seq = 0, gpus = 0, v = 0;
  number(cell("global_batch"), &gbs);
  number(cell("seq_len"), &seq);
  number(cell("gpus"), &gpus);
  if (number(cell("step_time_s"), &v) && v > 0) {
    r.measured_step_s = v, r.measured_from = "step_time_s";
  } else if (number(cell("tokens_per_s_per_gpu"), &v) && v > 0 && gbs > 0 && seq > 0 && gpus > 0) {
    r.measured_step_s = gbs * seq / (v * gpus), r.measured_from = "tokens_per_s_per_gpu";
  } else if (number(cell("tokens_per_s"), &v) && v > 0 && gbs > 0 && seq > 0) {
    r.measured_step_s = gbs * seq / v, r.measured_from = "tokens_per_s";
  } else if (number(cell("tflops_per_gpu"), &v) && v > 0) {
    r.measured_from = "tflops_per_gpu";  // converted once the table's convention is known
    r.published_tflops = v;
  } else if (r.refused.empty()) {
    r.refused = "no measurement (step time, tokens/s or TFLOP/s)";
  }
  return r;
}

}  // namespace

std::string PublishedRow::slice() const { return gpu + " " + dtype + (moe ? " moe" : " dense"); }

std::string PublishedRow::group() const { return model + " " + gpu + " " + dtype; }
std::string PublishedRow::release_group() const { return group() + " " + version; }

PublishedTable read_published_table(const std::string& path) {
  const CsvTable t = read_csv_file(path);
  for (const char* k : {"model", "gpu", "gpus", "tp", "pp", "global_batch", "seq_len"})
    if (t.column(k) < 0) throw UserError(path + ": no column '" + std::string(k) + "' (the published schema)");
  PublishedTable table;
  table.name = std::filesystem::path(path).stem().string();
  for (const CsvRecord& rec : t.rows) table.rows.push_back(read_row(t, rec));

  // The table's FLOP convention: from the rows that give both tokens/s per GPU and TFLOP/s.
  const long tflops_col = t.column("tflops_per_gpu"), tokens_col = t.column("tokens_per_s_per_gpu");
  int causal = 0, full = 0;
  for (size_t i = 0; i < t.rows.size() && tflops_col >= 0 && tokens_col >= 0; ++i) {
    double tf = 0, tok = 0;
    if (!number(t.rows[i].fields[size_t(tflops_col)], &tf) || !number(t.rows[i].fields[size_t(tokens_col)], &tok))
      continue;
    std::map<std::string, std::string> c = table.rows[i].cells;
    if (c.count("gated_mlp_fallback") && !c.count("gated_mlp")) c["gated_mlp"] = c["gated_mlp_fallback"];
    const double fc = dense_flops_per_token(c, FlopsConvention::kCausal);
    const double ff = dense_flops_per_token(c, FlopsConvention::kFullAttention);
    if (fc <= 0) continue;
    const double implied = tf * 1e12 / tok;
    (std::fabs(implied / fc - 1) < std::fabs(implied / ff - 1) ? causal : full) += 1;
  }
  if (causal + full > 0) {
    table.convention = causal > full ? FlopsConvention::kCausal : FlopsConvention::kFullAttention;
    table.convention_note = std::string(causal > full ? "causal" : "full attention") + " (" +
                            std::to_string(std::max(causal, full)) + " of " + std::to_string(causal + full) +
                            " dense rows with tokens/s and TFLOP/s agree)";
  } else {
    table.convention = FlopsConvention::kFullAttention;
    table.convention_note = "full attention (no row gives both tokens/s and TFLOP/s: Megatron-LM's and NeMo's "
                            "formula before 2025)";
  }
  for (PublishedRow& r : table.rows) {
    if (r.measured_from != "tflops_per_gpu" || !r.refused.empty()) continue;
    std::map<std::string, std::string> c = r.cells;
    if (c.count("gated_mlp_fallback") && !c.count("gated_mlp")) c["gated_mlp"] = c["gated_mlp_fallback"];
    if (table.convention == FlopsConvention::kCausal) continue;  // the model's own count, once simulated
    // Megatron-LM on Ampere printed hardware FLOPs: with full recomputation, eq. 3's fourth pass.
    const double per_token = dense_flops_per_token(c, table.convention, r.recompute_counted);
    double gbs = 0, seq = 0, gpus = 0;
    number(c["global_batch"], &gbs);
    number(c["seq_len"], &seq);
    number(c["gpus"], &gpus);
    if (per_token <= 0) {
      r.refused = "only TFLOP/s published, counted with full attention: known for dense models only";
      continue;
    }
    r.measured_step_s = per_token * gbs * seq / (r.published_tflops * 1e12 * gpus);
  }
  return table;
}

std::vector<PublishedTable> read_published_tables(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".csv") files.push_back(e.path().string());
  if (ec) throw UserError(dir + ": cannot list it (" + ec.message() + ")");
  std::sort(files.begin(), files.end());
  std::vector<PublishedTable> tables;
  for (const std::string& f : files) tables.push_back(read_published_table(f));
  return tables;
}

}  // namespace cotune::core::perf
