// Accuracy of the performance model on published runs (see published_runs.hpp).
#include "published/published_runs.hpp"

#include <cotune/core/errors.hpp>
#include <cotune/core/abi/table_schema.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/history/ranking_metrics.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <random>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

namespace cotune::core::perf {
namespace {

using nlohmann::json;

// The published tables are runs of decoder-only transformers: the llm space reads and lowers them.
constexpr const char* kSpace = "llm";
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
    auto space = registry.make_space(kSpace, workload(l, h, a, B, gpus).dump(), options.dump());
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
        kSpace, workload(num(row, "layers"), num(row, "hidden"), num(row, "heads"), num(row, "global_batch"), gpus).dump(),
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

struct Candidate {
  double step = 0;
  bool fits = false;
  std::string config;
  double model_flops_per_gpu = 0;
  std::shared_ptr<const TraceCopy> trace;
  const json* workload = nullptr;
};

// The fastest of the unstated choices (see predict_published_row).
RowPrediction predict_row(const Registry& registry, const PublishedRow& row, const json* calibration,
                          const std::map<std::string, std::string>& cells) {
  RowPrediction out;
  TableRow r;
  try {
    r = TableSchema::of(registry, kSpace).read(cells);
  } catch (const std::exception& e) {
    out.refused = e.what();
    return out;
  }
  if (calibration != nullptr) r.workload["cluster"]["calibration"] = *calibration;
  const std::vector<double> micro_batches =
      row.micro_batch_unstated ? std::vector<double>{1, 2, 4, 8} : std::vector<double>{r.config["micro_batch"].get<double>()};
  const std::vector<double> vpps = row.vpp_unstated ? std::vector<double>{1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20}
                                                    : std::vector<double>{r.config["vpp"].get<double>()};
  // Unstated recomputation: none (what nearly every recipe runs), else the lightest set of cheap
  // modules whose memory estimate fits, else none (flagged out of memory: the run did fit); a
  // stated one as given.
  struct Recompute {
    std::string granularity, modules;
  };
  std::vector<Recompute> recomputes = {{r.config["recompute"].get<std::string>(), ""}};
  if (row.recompute_defaulted) recomputes.push_back({"full", ""});
  if (row.recompute_unstated)
    recomputes = {{"none", ""},
                  {"selective", "core_attn"},
                  {"selective", "core_attn,layernorm"},
                  {"selective", "core_attn,mla_up_proj"},
                  {"selective", "core_attn,layernorm,mla_up_proj,moe_act"}};
  std::vector<std::string> granularities, module_sets;
  for (const Recompute& rc : recomputes) {
    if (std::find(granularities.begin(), granularities.end(), rc.granularity) == granularities.end())
      granularities.push_back(rc.granularity);
    if (!rc.modules.empty()) module_sets.push_back(rc.modules);
  }
  std::vector<double> etps = {r.config.contains("etp") ? r.config["etp"].get<double>() : 0.0};
  // Unstated etp: 1, what Megatron-Bridge's MoE recipes set (frameworks/nemo_recipe_parallelism.csv),
  // else the tensor-parallel degree (0: Megatron-LM's default) where the expert grid needs it.
  if (row.etp_unstated && row.moe) etps = {1, 0};
  // Unstated ep on a MoE row: the recipe chose it among the powers of two that divide the experts.
  std::vector<double> eps = {r.config.contains("ep") ? r.config["ep"].get<double>() : 1.0};
  if (row.ep_unstated && row.moe && r.workload["model"].contains("experts")) {
    eps.clear();
    const double experts = r.workload["model"]["experts"].get<double>();
    for (double ep = 1; ep <= experts; ep *= 2)
      if (std::fmod(experts, ep) == 0) eps.push_back(ep);
  }
  r.options["ep"] = eps;
  r.options["micro_batch"] = micro_batches;
  r.options["vpp"] = vpps;
  r.options["recompute"] = granularities;
  if (!module_sets.empty()) r.options["recompute_modules"] = module_sets;
  r.options["etp"] = etps;
  // Unstated token dispatcher on a MoE row: the recipe chose Megatron's alltoall or the flex
  // dispatcher (DeepEP, HybridEP), which Megatron-Bridge's perf recipes name for every MoE model
  // (frameworks/nemo_recipe_parallelism.csv, moe_flex_dispatcher_backend).
  std::vector<json> workloads = {r.workload};
  if (row.moe && !r.workload["training"].contains("moe_dispatcher")) {
    workloads[0]["training"]["moe_dispatcher"] = "alltoall";
    workloads.push_back(workloads[0]);
    workloads[1]["training"]["moe_dispatcher"] = "flex";
  }
  Candidate best;
  std::string first_reason;
  for (const json& workload : workloads) {
    std::unique_ptr<Space> space;
    try {
      space = registry.make_space(kSpace, workload.dump(), r.options.dump());
    } catch (const std::exception& e) {
      out.refused = e.what();
      return out;
    }
    for (double ep : eps)
      for (double mb : micro_batches)
        for (double vpp : vpps) {
          Candidate c;
          for (const Recompute& rc : recomputes) {  // the lightest recomputation that fits
            json config = r.config;
            config["ep"] = ep, config["micro_batch"] = mb, config["vpp"] = vpp, config["recompute"] = rc.granularity;
            if (!rc.modules.empty()) config["recompute_modules"] = rc.modules;
            else if (!module_sets.empty()) config["recompute_modules"] = module_sets.front();
            std::vector<double> v;
            std::string why;
            for (double etp : etps) {  // the first expert grid the framework accepts
              config["etp"] = etp;
              v = space->parse(config.dump());
              why = space->explain(v.data());
              if (why.find("ep*etp") == std::string::npos) break;
            }
            const bool oom = why.rfind("out of memory", 0) == 0;
            if (why.find("recompute module") != std::string::npos || why.find("recompute_modules") != std::string::npos)
              continue;  // modules this model has not (mla_up_proj without MLA, ...)
            if (!why.empty() && !oom) {
              if (first_reason.empty()) first_reason = why;
              break;  // a layout rule: another recomputation will not help
            }
            cotune_sim_result res{};
            res.struct_size = sizeof res;
            const cotune_trace& trace = space->lower(v.data());
            simulate(trace, &res);
            if (c.step == 0 || !oom)  // the first (lightest) when nothing fits
              c = {res.step_time_s, !oom, space->render(v.data(), COTUNE_RENDER_JSON), trace.model_flops_per_gpu,
                   std::make_shared<const TraceCopy>(trace), &workload};
            if (!oom) break;
          }
          if (c.step == 0) continue;
          const bool better = best.step == 0 || (c.fits && !best.fits) || (c.fits == best.fits && c.step < best.step);
          if (better) best = c;
        }
  }
  if (best.step == 0) {
    out.refused = first_reason.empty() ? "no valid configuration" : first_reason;
    return out;
  }
  out.step_s = best.step;
  out.config = best.config;
  out.workload = best.workload->dump(1);
  out.options = r.options.dump();
  out.oom = !best.fits;
  out.trace = best.trace;
  out.measured_step_s = row.measured_step_s;
  if (out.measured_step_s <= 0 && row.published_tflops > 0)
    out.measured_step_s = best.model_flops_per_gpu / (row.published_tflops * 1e12);
  return out;
}

}  // namespace

std::vector<TableAccuracy> check_published_runs(const Registry& registry, const std::string& data_dir) {
  return {megatron_table1(registry, data_dir), korthikanti_table5(registry, data_dir)};
}

RowPrediction predict_published_row(const Registry& registry, const PublishedRow& row, const json* calibration) {
  const auto refusal = [](std::string why) {
    RowPrediction r;
    r.refused = std::move(why);
    return r;
  };
  if (!row.refused.empty()) return refusal(row.refused);
  RowPrediction p = predict_row(registry, row, calibration, row.cells);
  if (p.refused.find("unknown preset") != std::string::npos) {
    // The table's model is no preset: its own dimensions, and SwiGLU by family.
    std::map<std::string, std::string> cells = row.cells;
    cells.erase("preset");
    if (cells.count("gated_mlp_fallback")) cells["gated_mlp"] = cells["gated_mlp_fallback"];
    if (cells.count("rope_base_fallback")) cells["rope_base"] = cells["rope_base_fallback"];
    if (!cells.count("hidden")) return refusal("model dimensions unknown");
    p = predict_row(registry, row, calibration, cells);
  }
  return p;
}

namespace {

using ThroughputGroups = std::map<std::string, std::pair<std::vector<double>, std::vector<double>>>;  // predicted, measured

// Kendall's tau-b per group, averaged with each group weighted by its pairs (NaN without any).
void pooled_tau(const ThroughputGroups& groups, double* tau, int* pairs_out) {
  double weighted = 0;
  int pairs_total = 0;
  for (const auto& [name, g] : groups) {
    const double t = kendall_tau(g.first, g.second);
    if (!std::isfinite(t)) continue;
    const int pairs = static_cast<int>(g.first.size() * (g.first.size() - 1) / 2);
    weighted += t * pairs;
    pairs_total += pairs;
  }
  *pairs_out = pairs_total;
  if (pairs_total > 0) *tau = weighted / pairs_total;
}

}  // namespace

Accuracy accuracy_of(const std::vector<const PublishedRow*>& rows, const std::vector<RowPrediction>& predictions) {
  Accuracy a;
  a.rows = static_cast<int>(rows.size());
  std::vector<double> ape;
  double signed_sum = 0;
  ThroughputGroups groups, release_groups;
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowPrediction& p = predictions[i];
    if (!p.refused.empty() || p.step_s <= 0) {
      ++a.refused[p.refused.empty() ? "not simulated" : p.refused];
      continue;
    }
    ++a.simulated;
    if (p.oom) ++a.oom;
    const double measured = p.measured_step_s;
    const double e = p.step_s / measured - 1;
    ape.push_back(std::fabs(e));
    signed_sum += e;
    // Throughput per GPU: tokens per step over (step time x GPUs); the tokens cancel within a group
    // only when they are the same, so compare tokens/s/GPU.
    double gbs = 0, seq = 0, gpus = 0;
    try {
      gbs = std::stod(rows[i]->cells.at("global_batch"));
      seq = rows[i]->cells.count("seq_len") ? std::stod(rows[i]->cells.at("seq_len")) : 0;
      gpus = std::stod(rows[i]->cells.at("gpus"));
    } catch (const std::exception&) {
      continue;
    }
    if (seq <= 0) continue;
    for (auto* by : {&groups, &release_groups}) {
      auto& g = (*by)[by == &groups ? rows[i]->group() : rows[i]->release_group()];
      g.first.push_back(gbs * seq / (p.step_s * gpus));
      g.second.push_back(gbs * seq / (measured * gpus));
    }
  }
  if (!ape.empty()) {
    double sum = 0;
    for (double v : ape) sum += v;
    a.mape = sum / ape.size();
    a.signed_mean = signed_sum / ape.size();
    std::vector<double> sorted = ape;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    a.median_ape = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }
  pooled_tau(groups, &a.tau, &a.tau_pairs);
  pooled_tau(release_groups, &a.release_tau, &a.release_tau_pairs);
  return a;
}

HeldOutPredictions calibrated_held_out(const std::vector<const PublishedRow*>& rows,
                                       const std::vector<RowPrediction>& predictions, double fraction, int repeats) {
  HeldOutPredictions out;
  std::vector<size_t> usable;
  for (size_t i = 0; i < rows.size(); ++i)
    if (predictions[i].refused.empty() && predictions[i].trace && predictions[i].measured_step_s > 0) usable.push_back(i);
  if (usable.size() < 2) return out;
  const size_t drawn = std::max<size_t>(1, size_t(std::lround(fraction * double(usable.size()))));
  CalibrationOptions options;
  options.held_out = false;
  for (int rep = 0; rep < repeats; ++rep) {
    std::vector<size_t> order = usable;
    std::shuffle(order.begin(), order.end(), std::mt19937(1000 + rep));
    std::map<std::string, std::vector<CalibrationRun>> by_gpu;
    for (size_t k = 0; k < drawn && k < order.size(); ++k) {
      const size_t i = order[k];
      by_gpu[rows[i]->gpu].push_back({"line " + std::to_string(rows[i]->line), *predictions[i].trace,
                                      predictions[i].measured_step_s});
    }
    std::map<std::string, json> constants;
    for (const auto& [gpu, runs] : by_gpu) {
      if (runs.size() < 2) continue;
      try {
        constants[gpu] = calibrate(runs, options).constants();
        ++out.fitted_gpus;
      } catch (const UserError&) {
        // the drawn rows are one configuration: this GPU stays uncalibrated in this draw
      }
    }
    for (size_t k = drawn; k < order.size(); ++k) {
      const size_t i = order[k];
      RowPrediction p = predictions[i];
      auto c = constants.find(rows[i]->gpu);
      if (c != constants.end()) {
        std::vector<CalibrationRun> one = {{"", *p.trace, p.measured_step_s}};
        p.step_s = calibrated_step_times(one, c->second).front();
      }
      out.rows.push_back(rows[i]);
      out.predictions.push_back(std::move(p));
    }
    ++out.draws;
  }
  return out;
}

}  // namespace cotune::core::perf
