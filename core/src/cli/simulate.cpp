// `cotune simulate`: times one configuration of a space (llm by default) with the performance model and
// prints the breakdown (or JSON), or checks a CSV of configurations in one go (--batch).
#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/io/output_file.hpp>
#include <cotune/core/studyfile/json_document.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <cotune/support/likely_meant.hpp>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <tuple>
#include <sstream>
#include <string>

#include "cli/command.hpp"
#include "cli/execution_summary.hpp"
#include "cli/simulate_batch.hpp"

namespace cotune::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

// Reads a JSON file given to a flag: size-limited, and checked here (position of a syntax error,
// duplicate keys, nesting depth) before the space parses it.
std::string read_json_text(const std::string& path, const char* flag) {
  std::string text = core::read_text_file(path, std::string(flag) + " file");
  core::parse_json_document(text, path);
  return text;
}

const char* const kGroupNames[COTUNE_GROUP_COUNT] = {"other", "tp", "cp", "ep", "pp", "dp", "emb"};
constexpr double GiB = 1073741824.0;

void print_execution(const ExecutionSummary& s) {
  if (!s.gemm_share.empty()) {
    std::vector<std::pair<double, std::string>> shares;
    for (const auto& [name, share] : s.gemm_share) shares.push_back({share, name});
    std::sort(shares.rbegin(), shares.rend());
    std::string line;
    for (const auto& [share, name] : shares) {
      if (!line.empty()) line += ", ";
      line += name;
      if (shares.size() > 1) line += " " + std::to_string(std::lround(100 * share)) + " %";
      if (name == "fp8")
        line += " (" + (s.fp8_recipe.empty() ? std::string() : "recipe " + s.fp8_recipe + ", ") + "scaled " + s.fp8_scaling + ")";
    }
    std::printf("GEMMs           %s%s\n", line.c_str(), shares.size() > 1 ? " of GEMM FLOPs" : "");
  }
  if (!s.tp_comm.empty())
    std::printf("tp comm         %s\n", s.tp_comm == "overlapped" ? "overlapped with the GEMMs it feeds or follows"
                                                                  : "on the compute stream (not overlapped)");
  if (!s.tp_comm_note.empty()) std::printf("                note: %s\n", s.tp_comm_note.c_str());
}

json result_json(const std::string& status, const std::string& reason, const json& config, const cotune_trace& t,
                 const cotune_sim_result& r) {
  json exposed = json::object();
  for (int g = 0; g < COTUNE_GROUP_COUNT; ++g)
    if (r.exposed_comm_s[g] > 0) exposed[kGroupNames[g]] = r.exposed_comm_s[g];
  json j = {{"schema_version", 1},
            {"status", status},
            {"config", config},
            {"gpu", std::string(t.hardware.gpu_name.data, t.hardware.gpu_name.len)},
            {"gpus", t.gpus},
            {"step_time_s", r.step_time_s},
            {"tokens_per_s", r.tokens_per_s},
            {"tflops_per_gpu", r.tflops_per_gpu},
            {"mfu", r.mfu},
            {"peak_mem_gib", r.peak_memory_bytes / GiB},
            {"hbm_gib", t.hardware.hbm_bytes / GiB},
            {"breakdown",
             {{"compute_s", r.compute_s},
              {"bubble_s", r.bubble_s},
              {"optimizer_s", r.optimizer_s},
              {"launch_bound_s", r.launch_bound_s},
              {"exposed_comm_s", exposed},
              {"memory_gib",
               {{"weights", t.memory.weights / GiB},
                {"gradients", t.memory.gradients / GiB},
                {"optimizer", t.memory.optimizer / GiB},
                {"activations", t.memory.activations / GiB},
                {"buffers", t.memory.buffers / GiB}}}}}};
  if (r.cost_per_mtokens > 0) j["cost_per_mtokens"] = r.cost_per_mtokens;
  if (!reason.empty()) j["reason"] = reason;
  return j;
}

void print_text(const std::string& status, const std::string& reason, const std::string& config, const cotune_trace& t,
                const cotune_sim_result& r, const ExecutionSummary& execution) {
  const double step = r.step_time_s;
  auto line = [step](const char* name, double s) {
    std::printf("  %-22s %12.4f s  %5.1f %%\n", name, s, step > 0 ? 100 * s / step : 0);
  };
  std::printf("configuration   %s\n", config.c_str());
  std::printf("hardware        %g x %.*s (%d per node)\n", t.gpus, static_cast<int>(t.hardware.gpu_name.len),
              t.hardware.gpu_name.data, t.hardware.gpus_per_node);
  std::printf("status          %s%s%s\n", status.c_str(), reason.empty() ? "" : ": ", reason.c_str());
  std::printf("step time       %.4f s\n", step);
  std::printf("tokens/s        %.6g\n", r.tokens_per_s);
  std::printf("TFLOP/s per GPU %.1f\n", r.tflops_per_gpu);
  std::printf("MFU             %.1f %%\n", 100 * r.mfu);
  if (r.cost_per_mtokens > 0) std::printf("cost            %.4f per million tokens\n", r.cost_per_mtokens);
  std::printf("peak memory     %.1f GiB of %.1f GiB (weights %.1f, gradients %.1f, optimizer %.1f, activations %.1f, "
              "buffers %.1f)\n",
              r.peak_memory_bytes / GiB, t.hardware.hbm_bytes / GiB, t.memory.weights / GiB, t.memory.gradients / GiB,
              t.memory.optimizer / GiB, t.memory.activations / GiB, t.memory.buffers / GiB);
  print_execution(execution);
  std::printf("time per step:\n");
  line("compute", r.compute_s);
  line("pipeline bubble", r.bubble_s);
  line("optimizer", r.optimizer_s);
  if (r.launch_bound_s > 0) line("waiting for the host", r.launch_bound_s);
  for (int g = 0; g < COTUNE_GROUP_COUNT; ++g) {
    if (r.exposed_comm_s[g] <= 0) continue;
    std::string name = std::string("exposed ") + kGroupNames[g] + " comm";
    line(name.c_str(), r.exposed_comm_s[g]);
  }
}

// One line of the heaviest-ops list: an op label's time per step in one phase, on the compute
// stream (the step waits for it: compute, optimizer, or communication the compute stream blocks on)
// or on a stream of its own (overlapped communication, before overlap).
struct OpTotal {
  std::string label, phase;
  bool overlapped = false;
  double seconds = 0, kernels = 0;
};

// The `n` heaviest op totals of the trace (the busiest pipeline rank's), heaviest first (ties by
// label, then phase); `compute_total` gets the compute stream's time per step.
std::vector<OpTotal> heaviest_ops(const cotune_trace& t, size_t n, double* compute_total) {
  static const char* const kPhases[] = {"forward", "backward", "step"};
  std::map<std::tuple<std::string, int32_t, bool>, OpTotal> sums;
  *compute_total = 0;
  const cotune_hardware hw = core::perf::effective_hardware(t.hardware);
  for (size_t i = 0; i < t.num_ops; ++i) {
    const auto& op = *reinterpret_cast<const cotune_op*>(reinterpret_cast<const char*>(t.ops) + i * t.op_stride);
    const double per_step = op.phase == COTUNE_PHASE_STEP ? 1.0 : t.micro_batches;
    const double seconds = core::perf::op_time_effective(op, hw) * op.count * per_step;
    const bool overlapped = op.stream != COTUNE_STREAM_COMPUTE;
    const std::string label(op.label.data, op.label.len);
    OpTotal& s = sums[{label, op.phase, overlapped}];
    s.label = label;
    s.phase = op.phase >= 0 && op.phase <= 2 ? kPhases[op.phase] : "?";
    s.overlapped = overlapped;
    s.seconds += seconds;
    s.kernels += core::perf::op_kernels(op) * op.count * per_step;
    if (!overlapped) *compute_total += seconds;
  }
  std::vector<OpTotal> rows;
  for (auto& [key, s] : sums) rows.push_back(std::move(s));
  std::stable_sort(rows.begin(), rows.end(), [](const OpTotal& a, const OpTotal& b) { return a.seconds > b.seconds; });
  if (rows.size() > n) rows.resize(n);
  return rows;
}

json heaviest_ops_json(const cotune_trace& t, size_t n) {
  double total = 0;
  json ops = json::array();
  for (const OpTotal& o : heaviest_ops(t, n, &total)) {
    json j = {{"label", o.label}, {"phase", o.phase}, {"stream", o.overlapped ? "overlapped" : "compute"},
              {"seconds_per_step", o.seconds}, {"kernels_per_step", o.kernels}};
    if (!o.overlapped && total > 0) j["share_of_compute_stream"] = o.seconds / total;
    ops.push_back(j);
  }
  return {{"compute_stream_s", total}, {"heaviest", ops}};
}

void print_heaviest_ops(const cotune_trace& t, size_t n) {
  double total = 0;
  const std::vector<OpTotal> rows = heaviest_ops(t, n, &total);
  // Milliseconds for steps under a second (a recommendation model's), seconds otherwise.
  const bool ms = total < 1;
  const double unit = ms ? 1e3 : 1;
  std::printf("heaviest ops per step, of the busiest pipeline rank (the compute stream: %.4f %s, compute,\n"
              "optimizer and the communication it waits for; overlapped: communication on a stream of its own):\n",
              total * unit, ms ? "ms" : "s");
  std::printf("  %-30s %-8s %-10s %12s  %7s  %12s\n", "label", "phase", "stream", ms ? "ms" : "seconds", "share",
              "kernels");
  for (const OpTotal& o : rows) {
    char share[16] = "      -";
    if (!o.overlapped && total > 0) std::snprintf(share, sizeof share, "%5.1f %%", 100 * o.seconds / total);
    std::printf("  %-30s %-8s %-10s %12.4f  %7s  %12.0f\n", o.label.c_str(), o.phase.c_str(),
                o.overlapped ? "overlapped" : "compute", o.seconds * unit, share, o.kernels);
  }
}

// A calibration without an entry for the simulated GPU changes nothing: say so rather than print
// the catalogue's answer as if it were calibrated.
void warn_if_uncalibrated(const json& calibration, const cotune_trace& trace, const std::string& path) {
  if (calibration.is_null()) return;
  const std::string gap =
      core::perf::calibration_gap(calibration, std::string(trace.hardware.gpu_name.data, trace.hardware.gpu_name.len));
  if (!gap.empty())
    std::fprintf(stderr, "cotune simulate: warning: --calibration '%s' %s; the catalogue's are used\n", path.c_str(),
                 gap.c_str());
}

// The constants a calibration sets for the trace's GPU ({} when it has none for it): what the
// answer was calibrated with, printed beside it. The host applies every entry whose key names the
// GPU, in the file's order; so are they merged here.
json applied_constants(const json& calibration, const cotune_trace& trace) {
  json merged = json::object();
  if (calibration.is_null()) return merged;
  const std::string gpu(trace.hardware.gpu_name.data, trace.hardware.gpu_name.len);
  for (auto it = calibration.begin(); it != calibration.end(); ++it)
    if (core::perf::calibration_key_names(it.key(), gpu) && it.value().is_object()) merged.merge_patch(it.value());
  return merged;
}

int run_simulate(int argc, char** argv) {
  std::string workload_path, config_path, batch_path, out_path, calibration_path, space_options = "{}",
              space_name = core::kDefaultSpace, format;
  long long ops = 0;
  po::options_description desc(
      "usage: cotune simulate --workload W.json --config C.json [--space S] [--space-options JSON] [--format F]\n"
      "                       [--json] [--ops N] [--calibration CAL.json]\n"
      "       cotune simulate --batch IN.csv [--space S] [--out OUT.csv] [--calibration CAL.json]\n\n"
      "Times one configuration of a space (llm by default) with the analytic performance model and\n"
      "prints the breakdown, or simulates every row of a CSV in the space's table schema (the llm\n"
      "space's columns: docs/simulate.md; '-' reads stdin). The space must lower configurations to\n"
      "step traces.\n"
      "--calibration applies the constants `cotune calibrate` fitted (docs/calibration.md).\n"
      "--format (a batch row's format column) times it as that framework runs it, with its rules, as a\n"
      "study's \"format\" does (docs/exports.md); the launch arguments themselves come from `cotune\n"
      "export` of a study.\n"
      "Exit status: 0 ok, 1 when the configuration (or any batch row) is not ok, 2 bad input.\n\noptions");
  desc.add_options()
      ("help,h", "this help")
      ("workload", po::value(&workload_path), "workload JSON file (model, training, cluster; docs/workloads.md)")
      ("config", po::value(&config_path), "configuration JSON file ({\"tp\": 8, \"pp\": 4, ...}); absent keys take "
                                          "defaults")
      ("space", po::value(&space_name), "the space (default llm); --batch needs one with a table schema")
      ("space-options", po::value(&space_options)->default_value("{}"), "JSON options of the space")
      ("json", "print the result as JSON")
      ("ops", po::value(&ops), "also list the N heaviest ops of the step (time per step by label and phase; with\n"
                                "--json, as \"ops\")")
      ("batch", po::value(&batch_path), "CSV of workloads and configurations, one per row")
      ("out", po::value(&out_path), "write the batch result here instead of stdout")
      ("calibration", po::value(&calibration_path), "a calibration file (cotune calibrate) to apply")
      ("format", po::value(&format), "the framework it runs with, as a study's \"format\": megatron, torchtitan, nemo,\n"
                                     "deepspeed, optionally @version (with --batch: a format column)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw core::UserError(std::string(e.what()) + " (see 'cotune simulate --help')");
  }
  if (vm.count("ops") && ops < 1)
    throw core::UserError("--ops: expected a count of at least 1, got " + std::to_string(ops));
  if (vm.count("json") && !batch_path.empty())
    throw core::UserError("--json prints one configuration's result; --batch writes CSV (drop --json, or give "
                          "--workload and --config)");
  if (vm.count("ops") && !batch_path.empty())
    throw core::UserError("--ops lists the ops of one configuration; drop it with --batch (or give --workload and "
                          "--config)");

  core::Registry registry;
  registry.load_default();
  json calibration;
  if (!calibration_path.empty()) calibration = core::perf::read_calibration_file(calibration_path);

  if (!batch_path.empty()) {
    if (!workload_path.empty() || !config_path.empty())
      throw core::UserError("--batch takes its workloads and configurations from the CSV; drop --workload/--config");
    if (!format.empty())
      throw core::UserError("--format: with --batch each row names its framework in a format column (docs/simulate.md)");
    if (!vm["space-options"].defaulted())
      throw core::UserError("--space-options: with --batch each row's layout is its own space (its cells); drop it");
    std::ifstream file;
    if (batch_path != "-") {
      file.open(batch_path, std::ios::binary);
      if (!file) throw core::UserError("--batch '" + batch_path + "': cannot open it");
    }
    std::istream& in = batch_path == "-" ? std::cin : file;
    // --out is written beside itself and renamed once the batch is done: a refused input leaves no
    // empty file behind, and an earlier file at the path stays as it was. A device or a FIFO
    // (/dev/null) is written into: renamed over, it would be replaced by a regular file.
    const bool in_place = !out_path.empty() && core::writes_in_place(out_path);
    const std::string partial = in_place ? out_path : out_path + ".partial";
    std::ofstream outfile;
    if (!out_path.empty()) {
      outfile.open(partial, std::ios::binary | std::ios::trunc);
      if (!outfile) throw core::UserError("--out '" + out_path + "': cannot write it");
    }
    std::ostream& out = out_path.empty() ? std::cout : outfile;
    size_t bad = 0;
    try {
      const core::TableSchema schema = core::TableSchema::of(registry, space_name);
      if ((schema.info().capabilities & COTUNE_CAP_LOWER_TRACE) == 0)
        throw core::UserError("--space '" + space_name + "': the space does not lower configurations to step traces, "
                              "so the performance model cannot time them");
      bad = simulate_batch(registry, schema, in, batch_path, out, calibration.is_null() ? nullptr : &calibration);
      const std::string gpus = core::perf::calibrated_gpus(calibration);
      if (!gpus.empty())
        std::fprintf(stderr, "simulate --batch: rows on %s timed with the constants of '%s'; other GPUs with the "
                     "catalogue's\n", gpus.c_str(), calibration_path.c_str());
      out.flush();
      if (!out)
        throw core::UserError(out_path.empty() ? std::string("cannot write the result to standard output (closed early?)")
                                               : "--out '" + out_path + "': cannot write it");
    } catch (...) {
      if (!out_path.empty()) {
        outfile.close();
        if (!in_place) std::remove(partial.c_str());
      }
      throw;
    }
    if (!out_path.empty()) {
      outfile.close();
      if (!in_place && std::rename(partial.c_str(), out_path.c_str()) != 0) {
        std::remove(partial.c_str());
        throw core::UserError("--out '" + out_path + "': cannot write it");
      }
    }
    if (bad > 0 && !out_path.empty())
      std::fprintf(stderr, "simulate --batch: %zu row(s) not ok (status and reason in '%s')\n", bad, out_path.c_str());
    return bad == 0 ? 0 : 1;
  }

  if (workload_path.empty() || config_path.empty())
    throw core::UserError("give --workload and --config, or --batch (see 'cotune simulate --help')");
  if (!out_path.empty())
    throw core::UserError("--out writes a --batch result; one configuration's result is printed (redirect it, with "
                          "--json for a file to read back)");
  std::string workload = read_json_text(workload_path, "--workload");
  if (!calibration.is_null()) {
    json w = json::parse(workload);
    core::perf::apply_calibration(w, calibration, "--workload '" + workload_path + "'");
    workload = w.dump();
  }
  const std::string config_text = read_json_text(config_path, "--config");
  std::unique_ptr<core::Space> space;
  std::vector<double> values;
  try {
    space = registry.make_space(space_name, workload, space_options);
  } catch (const core::PluginError& e) {
    // The space names the input at fault: its options, or (by default) the workload.
    const std::string what = e.what();
    const bool options = what.find("space options/") != std::string::npos;
    throw core::UserError((options ? std::string("--space-options") : "--workload '" + workload_path + "'") + ": " + what);
  }
  const std::string target = core::set_launch_format(*space, format, "--format");
  // What a user typed: a key that names no parameter is a typo, not a default, and a categorical
  // value is one of its labels (the space's own parse() may be laxer).
  const json typed = json::parse(config_text, nullptr, false);
  if (typed.is_object())
    for (auto it = typed.begin(); it != typed.end(); ++it) {
      const auto& params = space->params();
      auto p = std::find_if(params.begin(), params.end(), [&](const core::Param& q) { return q.name == it.key(); });
      std::string names;
      for (const core::Param& q : params) names += (names.empty() ? "" : ", ") + q.name;
      if (p == params.end())
        throw core::UserError("--config '" + config_path + "': /" + it.key() + ": not a parameter of the space '" +
                              space_name + "'" + support::did_you_mean_listed(it.key(), names) + " (its parameters: " +
                              names + ")");
      if (p->type == COTUNE_PARAM_CATEGORICAL && !it.value().is_string()) {
        std::string choices;
        for (const std::string& c : p->choices) choices += (choices.empty() ? "" : ", ") + c;
        throw core::UserError("--config '" + config_path + "': /" + it.key() + ": expected one of " + choices + ", got " +
                              it.value().dump());
      }
    }
  try {
    values = space->parse(config_text);
  } catch (const core::PluginError& e) {
    throw core::UserError("--config '" + config_path + "': " + e.what());
  }
  if (!space->can_lower())
    throw core::UserError("--space '" + space_name + "': the space does not lower configurations to step traces, so the "
                          "performance model cannot time them");
  const std::string reason = space->explain(values.data());
  const bool oom = reason.rfind("out of memory", 0) == 0;
  if (!reason.empty() && !oom) throw core::UserError("--config '" + config_path + "' is invalid with --workload '" + workload_path + "': " + reason);

  const cotune_trace* lowered = nullptr;
  try {
    lowered = &space->lower(values.data());
  } catch (const core::PluginError& e) {
    throw core::UserError("--config '" + config_path + "': the space '" + space_name +
                          "' could not lower it to a step trace: " + e.what());
  }
  const cotune_trace& trace = *lowered;
  warn_if_uncalibrated(calibration, trace, calibration_path);
  cotune_sim_result r{};
  r.struct_size = sizeof r;
  core::perf::simulate(trace, &r);
  const std::string status = oom ? "oom" : "ok";
  const std::string rendered = space->render(values.data(), COTUNE_RENDER_JSON);
  const json constants = applied_constants(calibration, trace);
  const ExecutionSummary execution = summarize_execution(trace, json::parse(workload, nullptr, false));
  if (vm.count("json")) {
    json j = result_json(status, reason, json::parse(rendered), trace, r);
    j["execution"] = execution_json(execution);
    if (ops > 0) j["ops"] = heaviest_ops_json(trace, size_t(ops));
    if (!target.empty()) j["format"] = target;
    if (!constants.empty()) j["calibration"] = {{"file", calibration_path}, {"constants", constants}};
    std::cout << j.dump(2) << "\n";
  } else {
    if (!target.empty()) std::printf("format          %s (timed as that framework runs it)\n", target.c_str());
    if (!constants.empty())
      std::printf("calibration     %s: %s\n", calibration_path.c_str(), constants.dump().c_str());
    print_text(status, reason, rendered, trace, r, execution);
    if (ops > 0) print_heaviest_ops(trace, size_t(ops));
  }
  return oom ? 1 : 0;
}

}  // namespace

COTUNE_COMMAND("simulate", "time a configuration (or a CSV of them) with the performance model", run_simulate);

}  // namespace cotune::cli
