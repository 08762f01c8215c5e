// The llm space's table schema (see table.hpp).
#include "table.hpp"
#include "workload.hpp"

#include <cotune/cotune.hpp>
#include <cotune/support/column_spellings.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <vector>

namespace cotune_llm {
namespace {

using nlohmann::json;

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

enum class Kind { kWhole, kNumber, kBool, kText };

// A model column and the model field (under "mla" when `mla`) it sets.
struct ModelColumn {
  const char* column;
  const char* field;
  Kind kind;
  bool mla;
};

const ModelColumn kModelColumns[] = {
    {"hidden", "hidden", Kind::kWhole, false},
    {"layers", "layers", Kind::kWhole, false},
    {"heads", "heads", Kind::kWhole, false},
    {"kv_heads", "kv_heads", Kind::kWhole, false},
    {"head_dim", "head_dim", Kind::kWhole, false},
    {"ffn_hidden", "ffn_hidden", Kind::kWhole, false},
    {"vocab", "vocab", Kind::kWhole, false},
    {"seq_len", "seq_len", Kind::kWhole, false},
    {"experts", "experts", Kind::kWhole, false},
    {"top_k", "top_k", Kind::kWhole, false},
    {"expert_ffn_hidden", "expert_ffn_hidden", Kind::kWhole, false},
    {"shared_experts", "shared_experts", Kind::kWhole, false},
    {"shared_expert_ffn_hidden", "shared_expert_ffn_hidden", Kind::kWhole, false},
    {"expert_groups", "expert_groups", Kind::kWhole, false},
    {"group_top_k", "group_top_k", Kind::kWhole, false},
    {"moe_layer_freq", "moe_layer_freq", Kind::kWhole, false},
    {"dense_layers_first", "dense_layers_first", Kind::kWhole, false},
    {"capacity_factor", "capacity_factor", Kind::kNumber, false},
    {"mtp_layers", "mtp_layers", Kind::kWhole, false},
    {"q_lora_rank", "q_lora_rank", Kind::kWhole, true},
    {"kv_lora_rank", "kv_lora_rank", Kind::kWhole, true},
    {"qk_rope_head_dim", "qk_rope_head_dim", Kind::kWhole, true},
    {"qk_nope_head_dim", "qk_nope_head_dim", Kind::kWhole, true},
    {"v_head_dim", "v_head_dim", Kind::kWhole, true},
    {"gated_mlp", "gated_mlp", Kind::kBool, false},
    {"tie_embeddings", "tie_embeddings", Kind::kBool, false},
    {"activation", "activation", Kind::kText, false},
    {"rope_base", "rope_base", Kind::kNumber, false},
};

// Other names of a column, as published tables and logs write them.
const std::pair<const char*, const char*> kAliases[] = {{"moe_ffn_hidden", "expert_ffn_hidden"}};

// Per-GPU bandwidths a row may give for its cluster (cluster.gpu_spec fields).
const char* const kBandwidthColumns[] = {"nvlink_GBps", "network_GBps", "island_GBps"};

// Precisions as logs name them: MXFP8, fp8_cs (current scaling), NVFP4, bfloat16.
std::string dtype_word(const std::string& w) {
  if (w.rfind("fp8", 0) == 0 || w.rfind("mxfp8", 0) == 0 || w.rfind("float8", 0) == 0) return "fp8";
  if (w.rfind("fp4", 0) == 0 || w.rfind("nvfp4", 0) == 0 || w.rfind("mxfp4", 0) == 0) return "fp4";
  // Mixed precision as trainers name it: Composer's amp_bf16, Lightning's bf16-mixed and bf16-true.
  if (w.find("bf16") != std::string::npos || w == "bfloat16") return "bf16";
  if (w.find("fp16") != std::string::npos || w == "float16" || w == "half" || w == "16-mixed" || w == "amp")
    return "fp16";
  if (w == "float32") return "fp32";
  return w;
}

// The FP8 recipe a precision word names ("mxfp8", "fp8_cs"/"fp8-cs": current scaling), "" otherwise.
std::string fp8_recipe_word(const std::string& w) {
  if (w.rfind("mxfp8", 0) == 0) return "mxfp8";
  if (w == "fp8_cs" || w == "fp8-cs") return "tensorwise";
  return "";
}

// The FP8 recipe a published table's precision note names (its dtype_detail column, free text in
// lower case): MXFP8 ("MXFP8", "FP8-MX"), blockwise ("FP8 blockwise ..."), and otherwise per-tensor
// scaling ("FP8", "FP8-CS": current scaling; NeMo's older delayed and hybrid scaling time alike).
std::string fp8_recipe_of_detail(const std::string& detail) {
  if (detail.find("mxfp8") != std::string::npos || detail.find("fp8-mx") != std::string::npos) return "mxfp8";
  if (detail.find("blockwise") != std::string::npos) return "blockwise";
  return "tensorwise";
}

// The MLP's nonlinearity as configs name it, in lower case: Hugging Face's hidden_act "silu" is the
// gated SwiGLU MLP in every architecture that names it (Llama, Mistral, Qwen, DeepSeek), its GeLU
// variants are GeLU, "relu2" is squared ReLU. Other words stay as written (the model names them).
std::string activation_word(const std::string& w) {
  if (w == "silu" || w == "swish") return "swiglu";
  if (w.rfind("gelu", 0) == 0) return "gelu";
  if (w == "relu2") return "squared_relu";
  return w;
}

// A yes/no cell in lower case as logs write it (True/False, yes/no, on/off, 1/0); nullopt otherwise.
std::optional<bool> truth(const std::string& w) {
  if (w == "true" || w == "yes" || w == "1" || w == "on") return true;
  if (w == "false" || w == "no" || w == "0" || w == "off") return false;
  return std::nullopt;
}

// The ZeRO stage a published table's fsdp cell says: a degree (> 0: parameters, gradients and
// optimizer state sharded, ZeRO-3; 0: not sharded, `fallback`), yes/no, or PyTorch FSDP's
// ShardingStrategy (FULL_SHARD and HYBRID_SHARD shard all three, within the shard group for the
// latter, which is timed as sharding over all data-parallel ranks; SHARD_GRAD_OP and
// _HYBRID_SHARD_ZERO2 keep parameters whole, ZeRO-2; NO_SHARD is DDP).
double zero_of_fsdp_cell(const std::string& w, double fallback) {
  std::string s;
  for (char ch : w) s += ch == '-' || ch == ' ' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (const std::optional<bool> t = truth(s)) return *t ? 3 : fallback;
  if (s.rfind("shardingstrategy.", 0) == 0) s = s.substr(std::strlen("shardingstrategy."));
  if (s == "full_shard" || s == "hybrid_shard") return 3;
  if (s == "shard_grad_op" || s == "_hybrid_shard_zero2" || s == "hybrid_shard_zero2") return 2;
  if (s == "no_shard") return 0;
  char* end = nullptr;
  const double v = std::strtod(w.c_str(), &end);
  if (!w.empty() && end == w.c_str() + w.size() && std::isfinite(v) && v >= 0 && v == std::floor(v) &&
      w.find_first_not_of("0123456789.") == std::string::npos)
    return v > 0 ? 3 : fallback;
  throw std::invalid_argument("column fsdp: expected a sharding degree (0: none) or a ShardingStrategy (FULL_SHARD, "
                              "HYBRID_SHARD, SHARD_GRAD_OP, NO_SHARD), got '" + w + "'");
}

// Activation checkpointing as logs write it: a yes/no (yes: every layer, full) or the mode.
std::string recompute_word(const std::string& w) {
  const std::optional<bool> t = truth(w);
  if (t) return *t ? "full" : "none";
  // TorchTitan's op-level selective checkpointing as logs name it: "selective (op)", "selective_op", "op".
  if (w.rfind("selective", 0) == 0 || w == "op" || w == "sac") return "selective";
  return w;
}

const char* const kTrainingColumns[] = {"global_batch", "dtype",   "attention", "kernels",
                                        "dropout",      "overlap_grad_reduce", "overlap_moe_comm", "tp_comm_overlap",
                                        "cross_entropy_fusion", "moe_dispatcher", "fp8_recipe", "grad_reduce", "peft"};

// Configuration columns a configuration JSON may leave out (their default is the space's rule).
const char* const kOptionalConfig[] = {"etp", "first_stage_layers", "last_stage_layers"};

// The text of a cell, or nullptr when the column is absent or the cell empty.
using CsvCellLookup = std::function<const std::string*(const std::string& column)>;

// One row as the schema reads it: a workload, a configuration, and the row's values as the domain.
struct LlmCsvRow {  // NOLINT(bugprone-exception-escape): nlohmann::json's moves cannot throw
  json workload;
  json config;
  json space_options;
};

class Cells {
 public:
  explicit Cells(const CsvCellLookup& cell) : cell_(cell) {}

  const std::string* get(const std::string& col) const {
    if (const std::string* t = cell_(col)) return t;
    for (const auto& [alias, name] : kAliases)
      if (col == name)
        if (const std::string* t = cell_(alias)) return t;
    return nullptr;
  }
  bool has(const std::string& col) const { return get(col) != nullptr; }
  const std::string& text(const std::string& col) const { return *get(col); }
  double number(const std::string& col) const {
    const std::string& t = text(col);
    try {
      size_t used = 0;
      double v = std::stod(t, &used);
      if (used == t.size() && std::isfinite(v)) return v;
    } catch (const std::exception&) {
    }
    throw std::invalid_argument("column " + col + ": expected a number, got '" + t + "'");
  }
  double integer(const std::string& col, double fallback) const {
    if (!has(col)) return fallback;
    const double v = number(col);
    if (v != std::floor(v) || v < 0)
      throw std::invalid_argument("column " + col + ": expected a whole number, got '" + text(col) + "'" +
                                  (v < 0 ? " (a count or a degree cannot be negative)" : ""));
    return v;
  }
  bool boolean(const std::string& col, bool fallback) const {
    if (!has(col)) return fallback;
    if (const std::optional<bool> t = truth(lower(text(col)))) return *t;
    throw std::invalid_argument("column " + col + ": expected true or false, got '" + text(col) + "'");
  }
  std::string string(const std::string& col, const std::string& fallback) const { return has(col) ? text(col) : fallback; }
  // A keyword cell (dtype, kernels, recompute, ...) in lower case: logs write BF16 and Full too.
  std::string word(const std::string& col, const std::string& fallback) const {
    return has(col) ? lower(text(col)) : fallback;
  }

 private:
  const CsvCellLookup& cell_;
};

std::string cell_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return fmt(v.get<double>());
  throw std::invalid_argument("expected a number, string or boolean, got " + v.dump());
}

json model_of(const Cells& r) {
  json model = json::object();
  // A published table's model column names the preset where it names one ("LLAMA3_70B", "Kimi_K2");
  // otherwise the row's dimensions describe the model.
  const bool model_preset = !r.has("preset") && r.has("model") && names_a_preset(r.text("model"));
  const bool preset = r.has("preset") || model_preset;
  if (preset) model["preset"] = r.text(model_preset ? "model" : "preset");
  for (const ModelColumn& c : kModelColumns) {
    if (!r.has(c.column)) continue;
    json v;
    if (c.kind == Kind::kBool) v = r.boolean(c.column, false);
    else if (c.kind == Kind::kNumber) v = r.number(c.column);
    else if (c.kind == Kind::kText) v = activation_word(r.word(c.column, ""));
    else v = r.integer(c.column, 0);
    if (c.mla) model["mla"][c.field] = v;
    else model[c.field] = v;
  }
  // A preset keeps its own base unless the row gives one.
  if (!model.contains("rope_base") && cotune::support::rotary_position_embedding(r.string("position_embedding_type", "")) &&
      (r.has("rotary_base") || !preset))
    model["rope_base"] = r.has("rotary_base") ? r.number("rotary_base") : 10000.0;
  if (!preset) {
    for (const char* col : {"hidden", "layers", "heads"})
      if (!r.has(col))
        throw std::invalid_argument(std::string("column ") + col + ": missing (required without preset)" +
                                    (r.has("model") ? "; the model '" + r.text("model") + "' is no preset of the llm space"
                                                    : std::string()));
    if (!model.contains("vocab")) model["vocab"] = 51200;
    if (!model.contains("seq_len")) model["seq_len"] = 2048;
  }
  // A dense model may say experts = 1 (a mixture of experts routes to 2 unless told: the model's
  // own default).
  if (model.contains("experts") && model["experts"].get<double>() <= 1) {
    model.erase("experts");
    if (model.contains("top_k") && model["top_k"].get<double>() <= 1) model.erase("top_k");
  }
  return model;
}

const std::vector<std::string>& llm_config_columns() {
  static const std::vector<std::string> c = {"tp",   "pp",  "dp",  "cp",  "ep", "micro_batch", "vpp", "zero",
                                             "recompute", "sp", "gpus", "gpu", "etp", "first_stage_layers",
                                             "last_stage_layers"};
  return c;
}

const std::vector<std::string>& llm_csv_columns() {
  static const std::vector<std::string> c = [] {
    std::vector<std::string> cols = {"preset"};
    for (const ModelColumn& m : kModelColumns) cols.push_back(m.column);
    for (const char* t : kTrainingColumns) cols.push_back(t);
    for (const char* k : {"gpu", "gpus", "gpus_per_node", "nodes_per_island"}) cols.push_back(k);
    for (const char* b : kBandwidthColumns) cols.push_back(b);
    for (const char* k : {"tp", "pp", "cp", "ep", "etp", "micro_batch", "vpp", "dp", "zero", "recompute", "sp",
                          "first_stage_layers", "last_stage_layers"})
      cols.push_back(k);
    return cols;
  }();
  return c;
}

// The columns that describe the workload (not the configuration): a row with workload_json leaves
// them empty.
bool workload_column(const std::string& col) {
  if (col == "preset" || col == "gpus_per_node" || col == "nodes_per_island") return true;
  for (const ModelColumn& m : kModelColumns)
    if (col == m.column) return true;
  for (const char* t : kTrainingColumns)
    if (col == t) return true;
  for (const char* b : kBandwidthColumns)
    if (col == b) return true;
  for (const auto& alias : kAliases)
    if (col == alias.first) return true;
  return false;
}

json workload_of_json_cell(const Cells& r) {
  for (const std::string& col : llm_csv_columns())
    if (workload_column(col) && r.has(col))
      throw std::invalid_argument("column " + col + ": the row gives its workload in workload_json; leave the "
                                  "workload's own columns empty");
  const json w = json::parse(r.text("workload_json"), nullptr, false);
  if (!w.is_object() || !w.contains("model") || !w.contains("training") || !w.contains("cluster"))
    throw std::invalid_argument("column workload_json: expected a JSON object with model, training and cluster (a "
                                "workload, docs/workloads.md)");
  return w;
}

// The catalogue's name of a GPU as tables spell it ("a100" is a100-80gb), so that the space's gpu
// parameter matches; the name as given when the catalogue does not know it (the space says so).
std::string catalogue_name(const std::string& spelled) {
  try {
    const cotune_hardware hw = cotune::resolve_hardware(json({{"gpu", spelled}, {"nodes", 1}}).dump());
    return std::string(cotune::view(hw.gpu_name));
  } catch (const std::exception&) {
    return spelled;
  }
}

LlmCsvRow llm_row_from_cells(const CsvCellLookup& cell) {
  const Cells r(cell);
  // A workload the columns cannot say exactly (a preset with changes, a price, a network object)
  // comes whole, as JSON; the row's other columns are its configuration.
  const bool whole = r.has("workload_json");
  const json given = whole ? workload_of_json_cell(r) : json();
  json model = whole ? json() : model_of(r);

  const double tp = r.integer("tp", 1), pp = r.integer("pp", 1), cp = r.integer("cp", 1);
  for (const char* col : {"tp", "pp", "cp"})
    if (r.has(col) && r.integer(col, 1) < 1)
      throw std::invalid_argument(std::string("column ") + col + ": expected at least 1, got '" + r.text(col) + "'");
  double gpus = 0, dp = 0;
  if (r.has("gpus")) gpus = r.integer("gpus", 0);
  if (r.has("dp")) dp = r.integer("dp", 0);
  if (gpus == 0 && dp == 0) throw std::invalid_argument("columns gpus and dp: give at least one of them");
  if (gpus == 0) gpus = tp * pp * dp * cp;
  if (dp == 0) dp = gpus / (tp * pp * cp);
  if (dp != std::floor(dp) || dp < 1)
    throw std::invalid_argument("gpus (" + fmt(gpus) + ") is not divisible by tp*pp*cp (" + fmt(tp * pp * cp) + ")");
  if (!whole && !r.has("global_batch")) throw std::invalid_argument("column global_batch: missing (required)");

  // The catalogue's name for it ("a100" is a100-80gb), so the space's gpu parameter matches.
  const json* given_gpu = whole && given["cluster"].is_object() && given["cluster"].contains("gpu") &&
                                  given["cluster"]["gpu"].is_string()
                              ? &given["cluster"]["gpu"]
                              : nullptr;
  const std::string spelled_gpu = r.string("gpu", given_gpu ? given_gpu->get<std::string>() : "h100-sxm");
  const std::string gpu = catalogue_name(spelled_gpu);
  LlmCsvRow row;
  json cluster = {{"gpu", gpu}};
  if (whole) {
    row.workload = given;
  } else {
    if (r.has("gpus_per_node")) cluster["gpus_per_node"] = r.integer("gpus_per_node", 8);
    if (r.has("nodes_per_island")) cluster["nodes_per_island"] = r.integer("nodes_per_island", 0);
    for (const char* b : kBandwidthColumns)
      if (r.has(b)) {
        const double v = r.number(b);
        if (!(v > 0)) throw std::invalid_argument(std::string("column ") + b + ": expected GB/s > 0, got '" + r.text(b) + "'");
        cluster["gpu_spec"][b] = v;
      }
    json probe = cluster;
    probe["nodes"] = 1;
    cotune_hardware hw{};
    try {
      hw = cotune::resolve_hardware(probe.dump());
    } catch (const std::exception& e) {
      // The message names the field (/cluster/gpu, /cluster/gpus_per_node, /cluster/gpu_spec/...).
      const std::string what = e.what();
      const char* column = what.find("/cluster/gpu:") != std::string::npos            ? "column gpu"
                           : what.find("/cluster/gpus_per_node") != std::string::npos ? "column gpus_per_node"
                                                                                      : "column gpu, gpus_per_node or a bandwidth";
      throw std::invalid_argument(std::string(column) + ": " + what);
    }
    if (hw.gpus_per_node < 1) throw std::invalid_argument("column gpus_per_node: expected at least 1");
    cluster["nodes"] = std::ceil(gpus / hw.gpus_per_node);

    json training = {{"global_batch", r.integer("global_batch", 0)}, {"dtype", dtype_word(r.word("dtype", "bf16"))},
                     {"attention", r.word("attention", "flash")}, {"dropout", r.boolean("dropout", false)}};
    if (r.has("overlap_grad_reduce")) training["overlap_grad_reduce"] = r.boolean("overlap_grad_reduce", true);
    if (r.has("overlap_moe_comm")) training["overlap_moe_comm"] = r.boolean("overlap_moe_comm", false);
    if (r.has("tp_comm_overlap")) training["tp_comm_overlap"] = r.boolean("tp_comm_overlap", false);
    if (r.has("cross_entropy_fusion")) training["cross_entropy_fusion"] = r.boolean("cross_entropy_fusion", false);
    if (r.has("moe_dispatcher")) training["moe_dispatcher"] = r.word("moe_dispatcher", "");
    // Only FP8 runs have one (Megatron-LM's argument dump names a recipe for every run).
    const std::string named = fp8_recipe_word(r.word("dtype", ""));
    if (r.has("fp8_recipe") && training["dtype"] == "fp8") {
      const std::string recipe = r.word("fp8_recipe", "");
      if (!named.empty() && recipe != "auto" && recipe != named)
        throw std::invalid_argument("column fp8_recipe: '" + recipe + "' disagrees with the dtype '" +
                                    r.word("dtype", "") + "', which names " + named);
      training["fp8_recipe"] = named.empty() || recipe != "auto" ? recipe : named;
    } else if (!named.empty()) {
      training["fp8_recipe"] = named;
    } else if (r.has("dtype_detail") && training["dtype"] == "fp8") {
      training["fp8_recipe"] = fp8_recipe_of_detail(r.word("dtype_detail", ""));
    }
    if (r.has("grad_reduce")) training["grad_reduce"] = dtype_word(r.word("grad_reduce", ""));
    if (r.has("peft")) training["peft"] = r.word("peft", "");
    // A published table's task column: LoRA freezes the base weights; sft and pretrain train them all.
    else if (r.word("task", "") == "lora") training["peft"] = "lora";
    if (r.has("kernels")) training["kernels"] = r.word("kernels", "");
    row.workload = {{"model", model}, {"training", training}, {"cluster", cluster}};
  }

  // zero, or a published table's fsdp column: a degree (> 0: FSDP over that many ranks, ZeRO-3) or
  // PyTorch FSDP's sharding strategy as logs print it.
  double zero = r.integer("zero", 0);
  if (!r.has("zero") && r.has("fsdp")) zero = zero_of_fsdp_cell(r.text("fsdp"), zero);
  // Megatron-LM's --use-distributed-optimizer shards the optimizer state: zero 1.
  if (!r.has("zero") && zero == 0 && r.boolean("use_distributed_optimizer", false)) zero = 1;

  const std::string recompute = recompute_word(r.word("recompute", "none"));
  // TorchTitan applies sequence parallelism with tensor parallelism (always at v0.1.0 and v0.2.2, by
  // default at HEAD): a row run with it (its format cell) and no sp cell ran with sp at tp > 1;
  // elsewhere sp is off unless said.
  const bool torchtitan = r.word("format", "").rfind("torchtitan", 0) == 0;
  const bool sp = r.boolean("sp", torchtitan && tp > 1);
  row.config = {{"tp", tp}, {"pp", pp}, {"dp", dp}, {"cp", cp}, {"ep", r.integer("ep", 1)},
                {"micro_batch", r.integer("micro_batch", 1)}, {"vpp", r.integer("vpp", 1)},
                {"zero", zero}, {"recompute", recompute}, {"sp", sp}, {"gpus", gpus}, {"gpu", gpu}};
  for (const char* o : kOptionalConfig)
    if (r.has(o)) row.config[o] = r.integer(o, 0);
  // The row's values are the whole domain, so that any value (micro_batch 3, pp 35) is accepted by
  // the space and only its constraints judge the row.
  row.space_options = json::object();
  for (const char* p : {"tp", "pp", "dp", "cp", "ep", "micro_batch", "vpp", "zero", "gpus"})
    row.space_options[p] = {row.config[p]};
  for (const char* o : kOptionalConfig)
    if (row.config.contains(o)) row.space_options[o] = {row.config[o]};
  row.space_options["recompute"] = {recompute};
  row.space_options["sp"] = {sp};
  return row;
}

// The cells of a workload and a configuration. Fields the row builder would not have written
// (defaults) are left out; `lost` receives the workload's fields that have no column.
std::map<std::string, std::string> cells_of(const json& workload, const json& config, std::vector<std::string>* lost) {
  std::map<std::string, std::string> cells;
  auto section = [&](const char* name) -> const json& {
    if (!workload.contains(name) || !workload[name].is_object())
      throw std::invalid_argument(std::string("workload: missing the object '") + name + "'");
    return workload[name];
  };
  const json& model = section("model");
  const json& training = section("training");
  const json& cluster = section("cluster");
  for (auto it = model.begin(); it != model.end(); ++it) {
    const std::string& key = it.key();
    if (key == "preset") {
      cells["preset"] = cell_text(it.value());
      continue;
    }
    if (key == "mla" && it.value().is_object()) {
      for (auto f = it.value().begin(); f != it.value().end(); ++f) {
        bool known = false;
        for (const ModelColumn& c : kModelColumns)
          if (c.mla && f.key() == c.field) known = true, cells[c.column] = cell_text(f.value());
        if (!known) lost->push_back("workload/model/mla/" + f.key());
      }
      continue;
    }
    bool known = false;
    for (const ModelColumn& c : kModelColumns)
      if (!c.mla && key == c.field) known = true, cells[c.column] = cell_text(it.value());
    if (!known) lost->push_back("workload/model/" + key);
  }
  for (auto it = training.begin(); it != training.end(); ++it) {
    bool known = false;
    for (const char* t : kTrainingColumns) known = known || it.key() == t;
    if (known) cells[it.key()] = cell_text(it.value());
    else lost->push_back("workload/training/" + it.key());
  }
  for (auto it = cluster.begin(); it != cluster.end(); ++it) {
    const std::string& key = it.key();
    if (key == "gpu" || key == "nodes") continue;
    if (key == "gpus_per_node" || key == "nodes_per_island") {
      cells[key] = cell_text(it.value());
    } else if (key == "gpu_spec" && it.value().is_object()) {
      for (auto f = it.value().begin(); f != it.value().end(); ++f) {
        bool known = false;
        for (const char* b : kBandwidthColumns) known = known || f.key() == b;
        if (known) cells[f.key()] = cell_text(f.value());
        else lost->push_back("workload/cluster/gpu_spec/" + f.key());
      }
    } else {
      lost->push_back("workload/cluster/" + key);
    }
  }
  for (const std::string& c : llm_config_columns()) {
    bool optional = false;
    for (const char* o : kOptionalConfig) optional = optional || c == o;
    if (!config.contains(c)) {
      if (optional) continue;
      throw std::invalid_argument("configuration: missing '" + c + "'");
    }
    cells[c] = cell_text(config[c]);
  }
  // A cluster gpu that is not the configuration's would not survive the trip (one gpu column).
  if (cluster.contains("gpu") && cell_text(cluster["gpu"]) != cells["gpu"])
    throw std::invalid_argument("workload/cluster/gpu '" + cell_text(cluster["gpu"]) +
                                "' differs from the configuration's gpu '" + cells["gpu"] + "'");
  return cells;
}

// The cells of a workload alone. Its row still needs the configuration columns the reader
// requires, so they hold the schema's defaults (tp 1, ...), with gpus from the cluster's nodes
// (dp follows from it); table_write leaves them out of its answer.
std::map<std::string, std::string> workload_cells(const json& workload, std::vector<std::string>* lost) {
  json config = {{"tp", 1}, {"pp", 1}, {"dp", 1}, {"cp", 1}, {"ep", 1}, {"micro_batch", 1}, {"vpp", 1},
                 {"zero", 0}, {"recompute", "none"}, {"sp", false}, {"gpus", 1}, {"gpu", "h100-sxm"}};
  if (workload.contains("cluster") && workload["cluster"].is_object() && workload["cluster"].contains("gpu"))
    config["gpu"] = workload["cluster"]["gpu"];
  std::map<std::string, std::string> cells = cells_of(workload, config, lost);
  const json& cluster = workload["cluster"];
  if (cluster.contains("nodes") && cluster["nodes"].is_number()) {
    const double nodes = cluster["nodes"].get<double>();
    double per_node = cluster.value("gpus_per_node", 0.0);
    if (!(per_node > 0)) {
      json probe = cluster;
      probe["nodes"] = 1;
      per_node = cotune::resolve_hardware(probe.dump()).gpus_per_node;
    }
    cells["gpus"] = fmt(nodes * per_node);
    cells.erase("dp");
  }
  return cells;
}

json parse_object(std::string_view text, const char* what) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) throw std::invalid_argument(std::string(what) + ": expected a JSON object");
  return j;
}

// Runs f; a row or workload it cannot read is INVALID_ARGUMENT with its message (the host names the
// row), anything else stays what it was.
template <class F>
std::string answer(F&& f) {
  try {
    return f();
  } catch (const std::invalid_argument& e) {
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, e.what());
  }
}

}  // namespace

std::string table_schema() {
  json reads = json::array({"fsdp", "task", "model", "dtype_detail", "workload_json", "position_embedding_type",
                            "rotary_base", "use_distributed_optimizer", "format"});
  for (const auto& alias : kAliases) reads.push_back(alias.first);
  return json{{"columns", llm_csv_columns()}, {"config_columns", llm_config_columns()}, {"reads", reads}}.dump();
}

std::string table_read(std::string_view row_json) {
  return answer([&] {
    const json row = parse_object(row_json, "row");
    std::map<std::string, std::string> cells;
    for (auto it = row.begin(); it != row.end(); ++it)
      if (it.value().is_string() && !it.value().get<std::string>().empty()) cells[it.key()] = it.value().get<std::string>();
    LlmCsvRow r = llm_row_from_cells([&](const std::string& col) -> const std::string* {
      auto it = cells.find(col);
      return it == cells.end() ? nullptr : &it->second;
    });
    const double devices = r.config["gpus"].get<double>();
    return json{{"workload", std::move(r.workload)}, {"config", std::move(r.config)},
                {"options", std::move(r.space_options)}, {"devices", devices}}
        .dump();
  });
}

std::string table_write(std::string_view workload_json, std::string_view config_json) {
  return answer([&] {
    const json workload = parse_object(workload_json, "workload");
    std::vector<std::string> lost;
    std::map<std::string, std::string> cells =
        config_json.empty() ? workload_cells(workload, &lost)
                            : cells_of(workload, parse_object(config_json, "configuration"), &lost);
    // Fields without a column (a network description, a price): the cells cannot say this workload
    // and nothing reads back. Otherwise reading the cells back must give the same workload: checked
    // rather than hoped.
    std::string inexact;
    json read_back = nullptr;
    if (!lost.empty()) {
      inexact = "no column for";
      for (const std::string& l : lost) inexact += " " + l;
    } else {
      read_back = llm_row_from_cells([&](const std::string& col) -> const std::string* {
                    auto it = cells.find(col);
                    return it == cells.end() || it->second.empty() ? nullptr : &it->second;
                  }).workload;
      if (read_back != workload) inexact = "read back it differs: " + json::diff(workload, read_back).dump();
    }
    if (config_json.empty()) {
      // The workload's own cells: its configuration's columns say nothing of it.
      for (const std::string& c : llm_config_columns())
        if (c != "gpus" && c != "gpu") cells.erase(c);
    }
    return json{{"cells", cells}, {"inexact", inexact}, {"read_back", read_back}}.dump();
  });
}

}  // namespace cotune_llm
