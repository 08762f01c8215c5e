// The recsys space's table schema (see table.hpp).
#include "table.hpp"

#include <cotune/cotune.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.hpp"
#include "workload.hpp"

namespace cotune_recsys {
namespace {

using nlohmann::json;

// Workload columns: where each lives in the workload and whether it is text.
struct WorkloadColumn {
  const char* column;
  const char* section;  // "model", "training", "cluster"
  const char* field;
  bool text;
};

const WorkloadColumn kWorkloadColumns[] = {
    {"preset", "model", "preset", true},
    {"global_batch", "training", "global_batch", false},
    {"dtype", "training", "dtype", true},
    {"embedding_optimizer", "training", "embedding_optimizer", true},
    {"dense_optimizer", "training", "dense_optimizer", true},
    {"gpu", "cluster", "gpu", true},
    {"gpus_per_node", "cluster", "gpus_per_node", false},
    {"nodes_per_island", "cluster", "nodes_per_island", false},
    {"host_gib_per_node", "cluster", "host_gib_per_node", false},
    {"host_link_GBps", "cluster", "host_link_GBps", false},
};

// The parameters' JSON kinds, as parse() reads them.
bool text_param(size_t p) {
  return p == kSharding || p == kBalance || p == kEmbPrecision || p == kA2aPrecision || p == kPipeline ||
         p == kDenseParallel;
}

double number(const std::string& column, const std::string& text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("column " + column + ": expected a number, got '" + text + "'");
}

std::string cell_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return number_text(v.get<double>());
  throw std::invalid_argument("expected a number, string or boolean, got " + v.dump());
}

json parse_object(std::string_view text, const char* what) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) throw std::invalid_argument(std::string(what) + ": expected a JSON object");
  return j;
}

json read_workload(const std::map<std::string, std::string>& cells) {
  auto cell = [&](const char* c) -> const std::string* {
    auto it = cells.find(c);
    return it == cells.end() ? nullptr : &it->second;
  };
  if (const std::string* whole = cell("workload_json")) {
    for (const WorkloadColumn& w : kWorkloadColumns)
      if (cell(w.column) != nullptr)
        throw std::invalid_argument(std::string("column ") + w.column +
                                    ": the row gives its workload in workload_json; leave the workload's own columns empty");
    json j = json::parse(*whole, nullptr, false);
    if (!j.is_object()) throw std::invalid_argument("column workload_json: expected a JSON object (a recsys workload)");
    return j;
  }
  for (const char* c : {"preset", "global_batch"})
    if (cell(c) == nullptr) throw std::invalid_argument(std::string("column ") + c + ": missing (required)");
  json w = {{"model", json::object()}, {"training", json::object()}, {"cluster", {{"gpu", "h100-sxm"}}}};
  for (const WorkloadColumn& c : kWorkloadColumns)
    if (const std::string* t = cell(c.column)) w[c.section][c.field] = c.text ? json(*t) : json(number(c.column, *t));
  return w;
}

}  // namespace

std::string table_schema() {
  json columns = json::array(), config = json::array();
  for (const WorkloadColumn& c : kWorkloadColumns) columns.push_back(c.column);
  for (size_t p = 0; p < kNumParams; ++p) {
    columns.push_back(kParamNames[p]);
    config.push_back(kParamNames[p]);
  }
  return json{{"columns", columns}, {"config_columns", config}, {"reads", {"workload_json"}}}.dump();
}

std::string table_read(std::string_view row_json) {
  try {
    const json row = parse_object(row_json, "row");
    std::map<std::string, std::string> cells;
    for (auto it = row.begin(); it != row.end(); ++it)
      if (it.value().is_string() && !it.value().get<std::string>().empty()) cells[it.key()] = it.value().get<std::string>();
    json workload = read_workload(cells);

    json config = json::object(), options = json::object();
    for (size_t p = 0; p < kNumParams; ++p) {
      auto it = cells.find(kParamNames[p]);
      if (it == cells.end()) {
        if (p == kGpus) throw std::invalid_argument("column gpus: missing (required)");
        continue;
      }
      json v;
      if (text_param(p)) {
        v = it->second;
      } else if (p == kOffload) {
        const std::string& t = it->second;
        if (t != "true" && t != "false" && t != "1" && t != "0")
          throw std::invalid_argument("column offload: expected true or false, got '" + t + "'");
        v = t == "true" || t == "1";
      } else {
        v = number(kParamNames[p], it->second);
      }
      config[kParamNames[p]] = v;
      options[kParamNames[p]] = json::array({v});
    }
    const double gpus = config["gpus"].get<double>();
    if (!(gpus >= 1) || gpus != std::floor(gpus))
      throw std::invalid_argument("column gpus: expected a whole number >= 1, got '" + cells["gpus"] + "'");
    // The cluster is the nodes the run's GPUs fill (unless the workload came whole).
    json& cluster = workload["cluster"];
    if (cluster.is_object() && !cluster.contains("nodes")) {
      json probe = cluster;
      probe["nodes"] = 1;
      for (const char* k : {"host_gib_per_node", "host_link_GBps"}) probe.erase(k);
      cotune_hardware hw{};
      try {
        hw = cotune::resolve_hardware(probe.dump());
      } catch (const std::exception& e) {
        throw std::invalid_argument(std::string("column gpu or gpus_per_node: ") + e.what());
      }
      cluster["nodes"] = std::ceil(gpus / std::max(1, hw.gpus_per_node));
    }
    return json{{"workload", workload}, {"config", config}, {"options", options}, {"devices", gpus}}.dump();
  } catch (const std::invalid_argument& e) {
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, e.what());
  }
}

std::string table_write(std::string_view workload_json, std::string_view config_json) {
  try {
    const json workload = parse_object(workload_json, "workload");
    std::map<std::string, std::string> cells;
    std::vector<std::string> lost;
    for (const char* section : {"model", "training", "cluster"}) {
      if (!workload.contains(section) || !workload[section].is_object())
        throw std::invalid_argument(std::string("workload: missing the object '") + section + "'");
      for (auto it = workload[section].begin(); it != workload[section].end(); ++it) {
        bool known = std::string(section) == "cluster" && it.key() == "nodes";  // said by gpus
        for (const WorkloadColumn& c : kWorkloadColumns)
          if (section == std::string(c.section) && it.key() == c.field) known = true, cells[c.column] = cell_text(it.value());
        if (!known) lost.push_back(std::string("workload/") + section + "/" + it.key());
      }
    }
    if (!config_json.empty()) {
      const json config = parse_object(config_json, "configuration");
      for (size_t p = 0; p < kNumParams; ++p)
        if (config.contains(kParamNames[p])) cells[kParamNames[p]] = cell_text(config[kParamNames[p]]);
    }
    std::string inexact;
    json read_back = nullptr;
    if (!lost.empty()) {
      inexact = "no column for";
      for (const std::string& l : lost) inexact += " " + l;
    } else {
      // Reading the cells back must give the same workload: check it rather than hope. The GPUs
      // of the cluster say its nodes when the configuration does not.
      std::map<std::string, std::string> back = cells;
      if (!back.count("gpus") && workload["cluster"].contains("nodes")) {
        json probe = workload["cluster"];
        for (const char* k : {"host_gib_per_node", "host_link_GBps"}) probe.erase(k);
        back["gpus"] = number_text(workload["cluster"]["nodes"].get<double>() *
                                   cotune::resolve_hardware(probe.dump()).gpus_per_node);
      }
      json row = json::object();
      for (const auto& [k, v] : back) row[k] = v;
      read_back = json::parse(table_read(row.dump()))["workload"];
      if (read_back != workload) inexact = "read back it differs: " + json::diff(workload, read_back).dump();
    }
    return json{{"cells", cells}, {"inexact", inexact}, {"read_back", read_back}}.dump();
  } catch (const std::invalid_argument& e) {
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, e.what());
  }
}

}  // namespace cotune_recsys
