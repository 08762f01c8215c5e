#include <cotune/core/errors.hpp>
#include <cotune/core/llm_csv_row.hpp>
#include <cotune/core/perfmodel.hpp>

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace cotune::core {
namespace {

using nlohmann::json;

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

class Cells {
 public:
  explicit Cells(const CsvCellLookup& cell) : cell_(cell) {}

  bool has(const std::string& col) const { return cell_(col) != nullptr; }
  const std::string& text(const std::string& col) const { return *cell_(col); }
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
      throw std::invalid_argument("column " + col + ": expected a whole number, got '" + text(col) + "'");
    return v;
  }
  bool boolean(const std::string& col, bool fallback) const {
    if (!has(col)) return fallback;
    const std::string& t = text(col);
    if (t == "true" || t == "1" || t == "yes") return true;
    if (t == "false" || t == "0" || t == "no") return false;
    throw std::invalid_argument("column " + col + ": expected true or false, got '" + t + "'");
  }
  std::string string(const std::string& col, const std::string& fallback) const { return has(col) ? text(col) : fallback; }

 private:
  const CsvCellLookup& cell_;
};

std::string cell_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return fmt(v.get<double>());
  throw std::invalid_argument("expected a number, string or boolean, got " + v.dump());
}

}  // namespace

const std::vector<std::string>& llm_config_columns() {
  static const std::vector<std::string> c = {"tp", "pp", "dp", "cp", "ep", "micro_batch", "vpp",
                                             "zero", "recompute", "sp", "gpus", "gpu"};
  return c;
}

const std::vector<std::string>& llm_csv_columns() {
  static const std::vector<std::string> c = {
      "hidden", "layers", "heads", "kv_heads", "ffn_hidden", "vocab", "seq_len", "experts", "top_k", "gated_mlp",
      "global_batch", "dtype", "attention", "dropout", "overlap_grad_reduce", "gpu", "gpus", "gpus_per_node",
      "tp", "pp", "cp", "ep", "micro_batch", "vpp", "dp", "zero", "recompute", "sp"};
  return c;
}

LlmCsvRow llm_row_from_cells(const CsvCellLookup& cell) {
  const Cells r(cell);
  for (const char* col : {"hidden", "layers", "heads"})
    if (!r.has(col)) throw std::invalid_argument(std::string("column ") + col + ": missing (required)");
  json model = {{"hidden", r.integer("hidden", 0)}, {"layers", r.integer("layers", 0)}, {"heads", r.integer("heads", 0)},
                {"vocab", r.integer("vocab", 51200)}, {"seq_len", r.integer("seq_len", 2048)}};
  if (r.has("kv_heads")) model["kv_heads"] = r.integer("kv_heads", 0);
  if (r.has("ffn_hidden")) model["ffn_hidden"] = r.integer("ffn_hidden", 0);
  const double experts = r.integer("experts", 1);
  if (experts > 1) {
    model["experts"] = experts;
    model["top_k"] = r.integer("top_k", 2);
  }
  if (r.has("gated_mlp")) model["gated_mlp"] = r.boolean("gated_mlp", false);

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
  if (!r.has("global_batch")) throw std::invalid_argument("column global_batch: missing (required)");

  const std::string gpu = r.string("gpu", "h100-sxm");
  json cluster = {{"gpu", gpu}};
  if (r.has("gpus_per_node")) cluster["gpus_per_node"] = r.integer("gpus_per_node", 8);
  cotune_hardware hw{};
  hw.struct_size = COTUNE_STRUCT_SIZE(cotune_hardware, host_bytes_per_node);
  json probe = cluster;
  probe["nodes"] = 1;
  try {
    perf::resolve_hardware(probe, &hw, "cluster");
  } catch (const UserError& e) {
    throw std::invalid_argument(std::string("column gpu or gpus_per_node: ") + e.what());
  }
  if (hw.gpus_per_node < 1) throw std::invalid_argument("column gpus_per_node: expected at least 1");
  cluster["nodes"] = std::ceil(gpus / hw.gpus_per_node);

  json training = {{"global_batch", r.integer("global_batch", 0)}, {"dtype", r.string("dtype", "bf16")},
                   {"attention", r.string("attention", "flash")}, {"dropout", r.boolean("dropout", false)}};
  if (r.has("overlap_grad_reduce")) training["overlap_grad_reduce"] = r.boolean("overlap_grad_reduce", true);

  LlmCsvRow row;
  row.workload = {{"model", model}, {"training", training}, {"cluster", cluster}};
  const std::string recompute = r.string("recompute", "none");
  const bool sp = r.boolean("sp", false);
  row.config = {{"tp", tp}, {"pp", pp}, {"dp", dp}, {"cp", cp}, {"ep", r.integer("ep", 1)},
                {"micro_batch", r.integer("micro_batch", 1)}, {"vpp", r.integer("vpp", 1)},
                {"zero", r.integer("zero", 0)}, {"recompute", recompute}, {"sp", sp}, {"gpus", gpus}, {"gpu", gpu}};
  // The row's values are the whole domain, so that any value (micro_batch 3, pp 35) is accepted by
  // the space and only its constraints judge the row.
  row.space_options = json::object();
  for (const char* p : {"tp", "pp", "dp", "cp", "ep", "micro_batch", "vpp", "zero", "gpus"})
    row.space_options[p] = {row.config[p]};
  row.space_options["recompute"] = {recompute};
  row.space_options["sp"] = {sp};
  return row;
}

std::map<std::string, std::string> llm_cells_from_json(const json& workload, const json& config,
                                                       std::string* inexact) {
  std::map<std::string, std::string> cells;
  std::vector<std::string> lost;
  auto section = [&](const char* name) -> const json& {
    if (!workload.contains(name) || !workload[name].is_object())
      throw std::invalid_argument(std::string("workload: missing the object '") + name + "'");
    return workload[name];
  };
  const json& model = section("model");
  const json& training = section("training");
  const json& cluster = section("cluster");
  static const char* const model_cols[] = {"hidden", "layers", "heads", "kv_heads", "ffn_hidden",
                                           "vocab", "seq_len", "experts", "top_k", "gated_mlp"};
  static const char* const training_cols[] = {"global_batch", "dtype", "attention", "dropout", "overlap_grad_reduce"};
  auto copy = [&](const json& obj, const char* where, const char* const* cols, size_t n) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool known = false;
      for (size_t i = 0; i < n; ++i) known = known || it.key() == cols[i];
      if (known) cells[it.key()] = cell_text(it.value());
      else lost.push_back(std::string("workload/") + where + "/" + it.key());
    }
  };
  copy(model, "model", model_cols, std::size(model_cols));
  copy(training, "training", training_cols, std::size(training_cols));
  for (auto it = cluster.begin(); it != cluster.end(); ++it)
    if (it.key() != "gpu" && it.key() != "gpus_per_node" && it.key() != "nodes")
      lost.push_back("workload/cluster/" + it.key());
  if (cluster.contains("gpus_per_node")) cells["gpus_per_node"] = cell_text(cluster["gpus_per_node"]);
  for (const std::string& c : llm_config_columns()) {
    if (!config.contains(c)) throw std::invalid_argument("configuration: missing '" + c + "'");
    cells[c] = cell_text(config[c]);
  }
  // A cluster gpu that is not the configuration's would not survive the trip (one gpu column).
  if (cluster.contains("gpu") && cell_text(cluster["gpu"]) != cells["gpu"])
    throw std::invalid_argument("workload/cluster/gpu '" + cell_text(cluster["gpu"]) +
                                "' differs from the configuration's gpu '" + cells["gpu"] + "'");
  std::string why;
  if (!lost.empty()) {
    // Fields without a column (a model preset, a network description): the cells cannot say this
    // workload, and without them reading back may not even parse (a preset leaves out hidden).
    why = "no column for";
    for (const std::string& l : lost) why += " " + l;
  } else {
    // Reading the cells back must give the same workload: check it rather than hope.
    const LlmCsvRow back = llm_row_from_cells([&](const std::string& col) -> const std::string* {
      auto it = cells.find(col);
      return it == cells.end() || it->second.empty() ? nullptr : &it->second;
    });
    if (back.workload != workload) why = "read back it differs: " + json::diff(workload, back.workload).dump();
  }
  if (inexact) *inexact = why;
  return cells;
}

}  // namespace cotune::core
