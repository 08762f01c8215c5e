// Parser of the recommendation-model workload JSON (schema in docs/workloads-recsys.md).
#include "workload.hpp"

#include <cotune/support/likely_meant.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "generator.hpp"
#include "presets.hpp"

namespace cotune_recsys {

using nlohmann::json;

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

double positive_number(const json& v, const std::string& at) {
  if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
    throw std::invalid_argument(at + ": expected a positive number, got " + v.dump());
  return v.get<double>();
}

double positive_integer(const json& v, const std::string& at) {
  const double x = v.is_number() ? v.get<double>() : 0;
  if (!v.is_number() || x < 1 || x != std::floor(x) || x > 1e15)
    throw std::invalid_argument(at + ": expected a positive integer, got " + v.dump());
  return x;
}

std::vector<double> layer_list(const json& v, const std::string& at) {
  if (!v.is_array() || v.empty()) throw std::invalid_argument(at + ": expected a non-empty list of layer widths");
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(positive_integer(v[i], at + "/" + std::to_string(i)));
  return out;
}

double bottom_output(const Workload& w) { return w.dense.bottom_mlp.back(); }

double interaction_width(const Workload& w) {
  const double d = bottom_output(w);
  if (w.dense.interaction == Interaction::kDot) {
    const double f = static_cast<double>(w.tables.size()) + 1;  // every table's vector and the dense one
    return d + f * (f - 1) / 2;  // the dense vector and the upper triangle of pairwise dot products
  }
  double sum = d;
  for (const Table& t : w.tables) sum += t.dim;
  return sum;
}

double dense_params(const Workload& w) {
  double params = 0, in = w.dense.features;
  for (double out : w.dense.bottom_mlp) params += in * out + out, in = out;
  in = interaction_width(w);
  for (double out : w.dense.top_mlp) params += in * out + out, in = out;
  return params;
}

namespace {

std::string text(const json& v, const std::string& at) {
  if (!v.is_string()) throw std::invalid_argument(at + ": expected a string, got " + v.dump());
  return v.get<std::string>();
}

Table parse_table(const json& j, const std::string& at) {
  if (!j.is_object()) throw std::invalid_argument(at + ": expected an object {name, rows, dim, pooling, skew}");
  Table t;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const std::string where = at + "/" + k;
    if (k == "name") t.name = text(it.value(), where);
    else if (k == "rows") t.rows = positive_integer(it.value(), where);
    else if (k == "dim") t.dim = positive_integer(it.value(), where);
    else if (k == "pooling") t.pooling = positive_number(it.value(), where);
    else if (k == "skew") {
      const json& v = it.value();
      if (!v.is_number() || v.get<double>() < 0 || v.get<double>() >= 1)
        throw std::invalid_argument(where + ": expected a number in [0, 1), got " + v.dump());
      t.skew = v.get<double>();
    } else {
      throw std::invalid_argument(where + ": unknown table field (expected name, rows, dim, pooling, skew)");
    }
  }
  for (const char* k : {"name", "rows", "dim"})
    if (!j.contains(k)) throw std::invalid_argument(at + "/" + k + ": missing");
  if (t.name.empty()) throw std::invalid_argument(at + "/name: expected a non-empty name");
  return t;
}

void parse_model(const json& given, Workload& w) {
  if (!given.is_object()) throw std::invalid_argument("/model: expected an object");
  json m = given;
  if (given.contains("preset")) {
    m = preset_model(text(given["preset"], "/model/preset"), "/model/preset");
    for (auto it = given.begin(); it != given.end(); ++it)
      if (it.key() != "preset") m[it.key()] = it.value();
    // A table list given next to a preset replaces its generator, and the other way round.
    if (given.contains("tables")) m.erase("table_generator");
    if (given.contains("table_generator")) m.erase("tables");
  }
  for (auto it = m.begin(); it != m.end(); ++it) {
    const std::string& k = it.key();
    if (k != "tables" && k != "table_generator" && k != "dense_features" && k != "bottom_mlp" && k != "top_mlp" &&
        k != "interaction")
      throw std::invalid_argument("/model/" + k + ": unknown model field (expected preset, tables, table_generator, "
                                  "dense_features, bottom_mlp, top_mlp, interaction)");
  }
  if (m.contains("tables") == m.contains("table_generator"))
    throw std::invalid_argument("/model: expected exactly one of tables (a list) or table_generator");
  if (m.contains("tables")) {
    const json& list = m["tables"];
    if (!list.is_array() || list.empty()) throw std::invalid_argument("/model/tables: expected a non-empty list");
    for (size_t i = 0; i < list.size(); ++i) w.tables.push_back(parse_table(list[i], "/model/tables/" + std::to_string(i)));
  } else {
    w.tables = generate_tables(m["table_generator"], "/model/table_generator");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < w.tables.size(); ++i)
    if (!names.insert(w.tables[i].name).second)
      throw std::invalid_argument("/model/tables/" + std::to_string(i) + "/name: '" + w.tables[i].name +
                                  "' is used by an earlier table");
  for (const char* k : {"dense_features", "bottom_mlp", "top_mlp"})
    if (!m.contains(k)) throw std::invalid_argument(std::string("/model/") + k + ": missing");
  w.dense.features = positive_integer(m["dense_features"], "/model/dense_features");
  w.dense.bottom_mlp = layer_list(m["bottom_mlp"], "/model/bottom_mlp");
  w.dense.top_mlp = layer_list(m["top_mlp"], "/model/top_mlp");
  const std::string inter = m.contains("interaction") ? text(m["interaction"], "/model/interaction") : "dot";
  if (inter == "dot") w.dense.interaction = Interaction::kDot;
  else if (inter == "cat") w.dense.interaction = Interaction::kCat;
  else throw std::invalid_argument("/model/interaction: expected dot or cat, got '" + inter + "'");
  if (w.dense.interaction == Interaction::kDot)
    for (size_t i = 0; i < w.tables.size(); ++i)
      if (w.tables[i].dim != bottom_output(w))
        throw std::invalid_argument("/model/tables/" + std::to_string(i) + "/dim: the dot interaction needs every "
                                    "table's dim equal to the bottom MLP's last width (" +
                                    number_text(bottom_output(w)) + "), table '" + w.tables[i].name + "' has " +
                                    number_text(w.tables[i].dim) + " (use interaction cat)");
}

Training parse_training(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("/training: expected an object");
  if (!j.contains("global_batch")) throw std::invalid_argument("/training/global_batch: missing (samples per step)");
  Training t;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const std::string at = "/training/" + k;
    if (k == "global_batch") {
      t.global_batch = positive_integer(it.value(), at);
    } else if (k == "dtype") {
      const std::string d = text(it.value(), at);
      if (d == "fp32") t.dtype = COTUNE_DTYPE_FP32;
      else if (d == "tf32") t.dtype = COTUNE_DTYPE_TF32;
      else if (d == "bf16") t.dtype = COTUNE_DTYPE_BF16;
      else if (d == "fp16") t.dtype = COTUNE_DTYPE_FP16;
      else throw std::invalid_argument(at + ": expected fp32, tf32, bf16 or fp16, got '" + d + "'");
    } else if (k == "embedding_optimizer") {
      const std::string o = text(it.value(), at);
      if (o == "rowwise_adagrad") t.emb_optimizer = EmbOptimizer::kRowwiseAdagrad;
      else if (o == "sgd") t.emb_optimizer = EmbOptimizer::kSgd;
      else throw std::invalid_argument(at + ": expected rowwise_adagrad or sgd, got '" + o + "'");
    } else if (k == "dense_optimizer") {
      const std::string o = text(it.value(), at);
      if (o == "adam" || o == "adamw") t.dense_optimizer = DenseOptimizer::kAdam;
      else if (o == "sgd") t.dense_optimizer = DenseOptimizer::kSgd;
      else throw std::invalid_argument(at + ": expected adam, adamw or sgd, got '" + o + "'");
    } else {
      throw std::invalid_argument(at + ": unknown training field (expected global_batch, dtype, embedding_optimizer, "
                                  "dense_optimizer)");
    }
  }
  return t;
}

}  // namespace

Workload parse_workload(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("workload: expected a JSON object with model, training and cluster");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k != "model" && k != "training" && k != "cluster" && k != "name" && k != "description")
      throw std::invalid_argument("/" + k + ": unknown workload field (expected model, training, cluster)");
  }
  for (const char* k : {"model", "training", "cluster"})
    if (!j.contains(k)) throw std::invalid_argument(std::string("/") + k + ": missing");
  Workload w;
  parse_model(j["model"], w);
  w.training = parse_training(j["training"]);
  if (!j["cluster"].is_object()) throw std::invalid_argument("/cluster: expected an object");
  w.cluster = j["cluster"];
  // Every field a recsys cluster may have: the catalogue resolver's and the two read here. A typo of
  // one of these two would otherwise meet the resolver, which knows neither.
  const std::vector<std::string> cluster_fields = {"gpu", "gpu_spec", "nodes", "gpus_per_node", "nodes_per_island",
                                                   "network", "price_per_gpu_hour", "calibration",
                                                   "host_gib_per_node", "host_link_GBps"};
  for (auto it = w.cluster.begin(); it != w.cluster.end(); ++it)
    if (std::find(cluster_fields.begin(), cluster_fields.end(), it.key()) == cluster_fields.end()) {
      std::string expected;
      for (const std::string& f : cluster_fields) expected += (expected.empty() ? "" : ", ") + f;
      throw std::invalid_argument("/cluster/" + it.key() + ": unknown cluster field" +
                                  cotune::support::did_you_mean(it.key(), cluster_fields) + " (expected " + expected +
                                  ")");
    }
  // The two recsys fields are read here; the rest goes to the host's catalogue resolver.
  if (w.cluster.contains("host_gib_per_node")) {
    const json& v = w.cluster["host_gib_per_node"];
    if (!v.is_number() || v.get<double>() < 0)
      throw std::invalid_argument("/cluster/host_gib_per_node: expected a non-negative number, got " + v.dump());
    w.host_bytes_per_node = v.get<double>() * 1073741824.0;
    w.cluster.erase("host_gib_per_node");
  }
  // PCIe 5.0 x16 moves 64 GB/s per direction; about 50 GB/s is reached by UVM-cached lookups.
  w.host_link_bytes_per_s = 50e9;
  if (w.cluster.contains("host_link_GBps")) {
    w.host_link_bytes_per_s = positive_number(w.cluster["host_link_GBps"], "/cluster/host_link_GBps") * 1e9;
    w.cluster.erase("host_link_GBps");
  }
  return w;
}

}  // namespace cotune_recsys
