// Accuracy of the performance model on published runs (see published_runs.hpp).
#include "perfmodel/published_runs.hpp"

#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

namespace cotune::core::perf {
namespace {

using nlohmann::json;
using Rows = std::vector<std::map<std::string, std::string>>;

Rows read_csv(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw UserError(path + ": cannot open it");
  std::string line;
  std::vector<std::string> header;
  Rows rows;
  auto split = [](const std::string& l) {
    std::vector<std::string> out;
    std::stringstream ss(l);
    std::string cell;
    while (std::getline(ss, cell, ',')) out.push_back(cell);
    return out;
  };
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (header.empty()) {
      header = split(line);
      continue;
    }
    std::vector<std::string> cells = split(line);
    if (cells.size() != header.size()) throw UserError(path + ": a row has " + std::to_string(cells.size()) + " cells");
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

double num(const std::map<std::string, std::string>& row, const std::string& col) {
  auto it = row.find(col);
  if (it == row.end()) throw UserError("published runs: column '" + col + "' is missing");
  return std::stod(it->second);
}

json workload(double layers, double hidden, double heads, double batch, double gpus) {
  return {{"model", {{"layers", layers}, {"hidden", hidden}, {"heads", heads}, {"vocab", 51200}, {"seq_len", 2048},
                     {"tie_embeddings", true}}},
          {"training", {{"global_batch", batch}, {"dtype", "fp16"}, {"attention", "unfused"}, {"dropout", true},
                        {"overlap_grad_reduce", false}}},
          {"cluster", {{"gpu", "a100-80gb"}, {"nodes", std::ceil(gpus / 8)}}}};
}

struct Timed {
  double step = 0;
  std::string config;
};

// The step time of `config`, or step = 0 when the space rejects it.
Timed time_config(const Space& space, const json& config) {
  const std::vector<double> v = space.parse(config.dump());
  if (!space.valid(v.data())) return {};
  cotune_sim_result r{};
  r.struct_size = COTUNE_STRUCT_SIZE(cotune_sim_result, cost_per_mtokens);
  simulate(space.lower(v.data()), &r);
  return {r.step_time_s, space.render(v.data(), COTUNE_RENDER_JSON)};
}

void score(TableAccuracy& t) {
  double sum = 0;
  for (const auto& r : t.rows) sum += std::fabs(r.error());
  t.mape = t.rows.empty() ? 0 : sum / t.rows.size();
  for (size_t i = 0; i < t.rows.size(); ++i)
    for (size_t j = i + 1; j < t.rows.size(); ++j) {
      const PublishedRun &a = t.rows[i], &b = t.rows[j];
      if (std::fabs(a.measured - b.measured) <= 0.05 * std::min(a.measured, b.measured)) continue;
      ++t.pairs;
      if ((a.measured < b.measured) == (a.predicted < b.predicted)) ++t.pairs_ordered;
    }
}

TableAccuracy megatron_table1(const Registry& registry, const std::string& dir) {
  TableAccuracy t{"megatron_table1", "tflops_per_gpu", {}, 0, 0, 0};
  for (const auto& row : read_csv(dir + "/megatron_table1.csv")) {
    const double h = num(row, "hidden"), l = num(row, "layers"), a = num(row, "heads"), tp = num(row, "tp"),
                 pp = num(row, "pp"), gpus = num(row, "gpus"), B = num(row, "global_batch");
    const double s = 2048, V = 51200;
    // Megatron-LM eq. 3 (with full recomputation): what the paper's TFLOP/s count.
    const double flops = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    json options = {{"tp", {tp}}, {"pp", {pp}}, {"gpus", {gpus}}, {"recompute", {"full"}}, {"sp", {false}},
                    {"zero", {0}}, {"micro_batch", {1, 2, 4, 8}}};
    auto space = registry.make_space("llm", workload(l, h, a, B, gpus).dump(), options.dump());
    Timed best;
    for (double mb : {1, 2, 4, 8})
      for (double vpp : {1, 2, 3, 4, 5, 6, 7, 8}) {
        if (std::fmod(l, pp * vpp) != 0 || (vpp > 1 && pp == 1)) continue;
        json c = {{"tp", tp}, {"pp", pp}, {"dp", gpus / (tp * pp)}, {"micro_batch", mb}, {"vpp", vpp},
                  {"recompute", "full"}, {"sp", false}, {"zero", 0}};
        Timed x = time_config(*space, c);
        if (x.step > 0 && (best.step == 0 || x.step < best.step)) best = x;
      }
    if (best.step == 0) throw std::runtime_error("megatron_table1: no valid configuration for " + row.at("params_billion") + "B");
    PublishedRun r;
    r.label = row.at("params_billion") + "B tp" + row.at("tp") + " pp" + row.at("pp") + " " + row.at("gpus") + " GPUs";
    r.config = best.config;
    r.measured = num(row, "tflops_per_gpu");
    r.predicted = flops / gpus / best.step / 1e12;
    t.rows.push_back(r);
  }
  score(t);
  return t;
}

TableAccuracy korthikanti_table5(const Registry& registry, const std::string& dir) {
  TableAccuracy t{"korthikanti_table5", "iteration_time_s", {}, 0, 0, 0};
  for (const auto& row : read_csv(dir + "/korthikanti_table5.csv")) {
    const double gpus = num(row, "gpus");
    json c = {{"tp", num(row, "tp")}, {"pp", num(row, "pp")}, {"dp", num(row, "dp")},
              {"micro_batch", num(row, "micro_batch")}, {"vpp", num(row, "interleave")},
              {"recompute", row.at("recompute")}, {"sp", row.at("sequence_parallel") == "true"}, {"zero", 0}};
    json options = json::object();
    for (const char* p : {"tp", "pp", "dp", "micro_batch", "vpp"}) options[p] = {c[p]};
    options["gpus"] = {gpus};
    auto space = registry.make_space(
        "llm", workload(num(row, "layers"), num(row, "hidden"), num(row, "heads"), num(row, "global_batch"), gpus).dump(),
        options.dump());
    Timed x = time_config(*space, c);
    if (x.step == 0) throw std::runtime_error("korthikanti_table5: the space rejects " + c.dump());
    PublishedRun r;
    r.label = row.at("model") + " " + row.at("recompute") + (row.at("sequence_parallel") == "true" ? "+sp" : "");
    r.config = x.config;
    r.measured = num(row, "iteration_time_s");
    r.predicted = x.step;
    t.rows.push_back(r);
  }
  score(t);
  return t;
}

}  // namespace

std::vector<TableAccuracy> check_published_runs(const Registry& registry, const std::string& data_dir) {
  return {megatron_table1(registry, data_dir), korthikanti_table5(registry, data_dir)};
}

}  // namespace cotune::core::perf
