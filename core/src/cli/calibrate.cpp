// `cotune calibrate`: fits the performance model's constants to measured runs (--runs RUNS.csv) or
// to microbenchmarks of the local GPU (--gpu --base NAME), and writes the calibration file that
// `simulate --calibration`, study files ("calibration") and `predictor eval --calibration` apply.
#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/registry.hpp>

#include <cotune/support/likely_meant.hpp>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <cstdio>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <cotune/core/history/csv.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include "cli/calibrate.hpp"
#include "cli/command.hpp"

namespace cotune::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// The summary goes to stdout when the file goes to --out, to stderr when the file goes to stdout.
// A calibrated model this far off on its own runs (MAPE) has not found the machine: the runs' units
// or columns are most likely wrong.
constexpr double kImplausibleError = 0.5;
// How far a fitted efficiency may move from the catalogue's before the summary doubts the runs.
constexpr double kImplausibleFactor = 2;

void print_result(std::FILE* to, const core::perf::CalibrationResult& r, bool held_out_asked) {
  std::fprintf(to, "\n%s: %zu runs\n", r.gpu.c_str(), r.runs);
  std::fprintf(to, "  %-30s %12s %12s   %s\n", "constant", "before", "fitted", "1-sigma range");
  for (const auto& f : r.fitted)
    std::fprintf(to, "  %-30s %12.4g %12.4g   [%.4g, %.4g]\n", f.name.c_str(), f.before, f.value, f.low, f.high);
  for (const auto& f : r.fitted)
    if (f.at_limit)
      std::fprintf(to, "  warning: %s stopped at the end of its range (%.4g): the runs ask more of it than the model "
                       "can give; check what they say (recompute, sp, how a TFLOP/s column was converted) before "
                       "using the fit\n", f.name.c_str(), f.value);
  // An efficiency is a share of a peak that machines and framework versions move by tens of per
  // cent, not by factors: a fit that moves one by more than kImplausibleFactor is more often a
  // column of the runs misread or left unstated than the hardware.
  for (const auto& f : r.fitted)
    if (!f.at_limit && f.name.find("efficiency") != std::string::npos && f.before > 0 && f.value > 0 &&
        std::max(f.value / f.before, f.before / f.value) > kImplausibleFactor)
      std::fprintf(to, "  warning: %s moved by a factor of %.1f from the catalogue's (%.4g -> %.4g), more than "
                       "machines and framework versions differ by; check what the runs say (recompute, zero or "
                       "fsdp, micro_batch, a per-GPU throughput, the step time's unit) before using the fit\n",
                   f.name.c_str(), std::max(f.value / f.before, f.before / f.value), f.before, f.value);
  for (const std::string& n : r.not_fitted) std::fprintf(to, "  not fitted: %s\n", n.c_str());
  if (r.selection_error.size() > 1) {
    std::fprintf(to, "  cross-validated error fitting the 0, 1, 2, ... most telling constants:");
    for (double e : r.selection_error) std::fprintf(to, " %.1f%%", 100 * (std::exp(e) - 1));
    std::fprintf(to, " (exp of the mean |log ratio| of model to measured, less 1; the fewest within one standard error "
                     "of the lowest are fitted)\n");
  }
  std::fprintf(to, "  step-time error on these runs: MAPE %.1f%% -> %.1f%%, median %.1f%% -> %.1f%%\n",
               100 * r.before.mape, 100 * r.after.mape, 100 * r.before.median_ape, 100 * r.after.median_ape);
  if (r.folds > 0)
    std::fprintf(to, "  held out (%zu-fold: each fold predicted by a fit on the others): MAPE %.1f%%, median %.1f%%\n",
                 r.folds, 100 * r.held_out.mape, 100 * r.held_out.median_ape);
  else if (held_out_asked)
    std::fprintf(to, "  held out: none (%zu runs are too few to hold any out and fit on the rest)\n", r.runs);
  // A fit this far off explains nothing: the runs most likely say something else than they mean.
  if (r.after.mape > kImplausibleError)
    std::fprintf(to, "  warning: after the fit the model is still %.0f%% off on these runs: check the measured "
                     "column's unit (step_time_s in seconds, step_time_ms in milliseconds), the GPU column and the "
                     "layout columns before using the file\n", 100 * r.after.mape);
}

// --json: the fit of one GPU type as data (the same figures print_result prints).
json result_json(const core::perf::CalibrationResult& r) {
  json fitted = json::array();
  for (const auto& f : r.fitted)
    fitted.push_back({{"name", f.name}, {"before", f.before}, {"value", f.value}, {"low", f.low}, {"high", f.high},
                      {"at_limit", f.at_limit}});
  auto errors = [](const core::perf::ErrorFigures& e) { return json{{"mape", e.mape}, {"median_ape", e.median_ape}}; };
  json j = {{"gpu", r.gpu},       {"runs", r.runs},           {"fitted", fitted},
            {"not_fitted", r.not_fitted}, {"before", errors(r.before)}, {"after", errors(r.after)},
            {"selection_error", r.selection_error}};
  if (r.folds > 0) j["held_out"] = errors(r.held_out), j["folds"] = r.folds;
  return j;
}

// `fits_nothing`: no GPU type's fit changed a constant (the catalogue's values predicted the runs as
// well as any fit did): the file is written, and said to change nothing when applied.
void write_file(const json& file, const std::string& path, bool fits_nothing = false) {
  const std::string text = file.dump(2) + "\n";
  if (path.empty()) {
    std::cout << text;
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!(f << text)) throw core::UserError("calibrate: --out '" + path + "': cannot write it");
  if (fits_nothing)
    std::printf("\nwrote %s: it sets no constant (no fit predicted these runs, held out, better than the catalogue's "
                "values), so applying it changes no answer; more runs, or runs that differ in what the constants "
                "time (sizes, layouts, GPU counts), can tell a constant apart\n", path.c_str());
  else
    std::printf("\nwrote %s (apply it with simulate --calibration, a study's \"calibration\" or predictor eval "
                "--calibration)\n", path.c_str());
}

// Each run's measured step time beside the model's, with the catalogue's constants and with the
// fitted ones (the catalogue's where its GPU type was not calibrated): a CSV, one row per run.
void write_rows(const std::string& path, const CalibrationRuns& runs, const std::vector<core::perf::CalibrationResult>& results) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw core::UserError("calibrate: --rows '" + path + "': cannot write it");
  f << "run,gpu,measured_step_time_s,model_step_time_s,calibrated_step_time_s,model_error,calibrated_error,"
       "configuration\n";
  for (const auto& [gpu, gpu_runs] : runs.by_gpu) {
    json constants = json::object();
    for (const core::perf::CalibrationResult& r : results)
      if (r.gpu == gpu || core::perf::calibration_key_names(gpu, r.gpu)) constants = r.constants();
    const std::vector<double> model = core::perf::calibrated_step_times(gpu_runs, json::object());
    const std::vector<double> fitted = core::perf::calibrated_step_times(gpu_runs, constants);
    const std::vector<std::string>& configurations = runs.configurations.at(gpu);
    for (size_t i = 0; i < gpu_runs.size(); ++i) {
      const double m = gpu_runs[i].measured_step_s;
      f << core::csv_quote(gpu_runs[i].label) << "," << gpu << "," << m << "," << model[i] << "," << fitted[i] << ","
        << model[i] / m - 1 << "," << fitted[i] / m - 1 << "," << core::csv_quote(configurations[i]) << "\n";
    }
  }
  if (!f.flush()) throw core::UserError("calibrate: --rows '" + path + "': cannot write it");
}

int run_calibrate(int argc, char** argv) {
  std::string runs_path, base, out_path, rows_path, fit, executor_options = "{}", space = core::kDefaultSpace;
  std::vector<std::string> maps;
  long long folds = 5;
  double prior_sigma = 0.5;
  po::options_description desc(
      "usage: cotune calibrate --runs RUNS.csv [--space S] [--out CAL.json] [--fit NAMES | --all-constants]\n"
      "                        [--folds K] [--prior-sigma S] [--map 'COLUMN=NAME']... [--rows ROWS.csv] [--json]\n"
      "       cotune calibrate --gpu --base NAME [--out CAL.json] [--executor-options JSON]\n\n"
      "Fits the performance model's hardware and software constants and writes a calibration file.\n"
      "--runs: RUNS.csv has the columns of `cotune simulate --batch` (docs/simulate.md) and a measured\n"
      "step_time_s (or step_time_ms, iteration_time_s, tokens_per_s, tokens_per_s_per_gpu, or a column\n"
      "--map names), read as cotune import reads it; the constants of each GPU type\n"
      "are fitted on its rows by robust least squares on the log step time, each kept near its catalogue\n"
      "value unless the runs say otherwise. It prints each constant with its uncertainty, the error before\n"
      "and after on the runs and a k-fold held-out error, and refuses runs that cannot determine what is\n"
      "asked (naming them; other GPU types are still fitted). Rows the space cannot simulate, or with no\n"
      "measurement, are left out and named. --gpu: microbenchmarks on the local GPU through the cuda executor.\n"
      "Constants: gemm_efficiency_max, gemm_half_efficiency_gflops, gemm_efficiency_fp8, gemm_efficiency_fp4,\n"
      "grouped_gemm_efficiency, block_scaled_gemm_efficiency, attention_efficiency, memory_efficiency,\n"
      "kernel_launch_us, host_launch_us,\n"
      "network_efficiency.{node,cluster,island}, latency_us.{node,cluster,island} (docs/calibration.md).\n"
      "Exit status: 0 ok; 1 no usable GPU or a failed measurement, or runs or GPU types left out (named;\n"
      "the file holds the rest); 2 bad input, or nothing could be fitted.\n\noptions");
  desc.add_options()
      ("help,h", "this help")
      ("runs", po::value(&runs_path), "measured runs to fit on (CSV)")
      ("space", po::value(&space), "the space of the runs: one with a table schema that lowers to step traces "
                                   "(default llm)")
      ("gpu", "calibrate on the local GPU instead (microbenchmarks)")
      ("base", po::value(&base), "with --gpu: the catalogue GPU whose peaks, memory and network the measurement refines")
      ("out", po::value(&out_path), "write the calibration file here (default: stdout)")
      ("rows", po::value(&rows_path), "with --runs: also write each run's measured step time beside the model's, "
                                      "before and after the fit, as CSV (run, gpu, measured_step_time_s, "
                                      "model_step_time_s, calibrated_step_time_s, model_error, calibrated_error, "
                                      "configuration: the layout as JSON)")
      ("map", po::value(&maps)->composing(), "with --runs: \"source column=canonical name\" (repeatable), as "
                                             "cotune import takes it")
      ("fit", po::value(&fit), "comma-separated constants to fit (default: the most telling constants, as many as "
                               "lower the cross-validated error)")
      ("all-constants", "without --fit: every constant the runs determine, not only those that lower the "
                        "cross-validated error")
      ("folds", po::value(&folds)->default_value(5), "folds of the held-out error (0: none)")
      ("prior-sigma", po::value(&prior_sigma)->default_value(0.5),
       "how far (natural log) a constant may stray from its catalogue value at one sigma")
      ("executor-options", po::value(&executor_options)->default_value("{}"),
       "with --gpu: JSON options of the cuda executor (device, warmup, repeats)")
      ("json", "with --runs: write one JSON document, the calibration and each fit's figures, instead of the "
               "summary (docs/calibration.md); --out still gets the calibration file");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw core::UserError(std::string(e.what()) + " (see 'cotune calibrate --help')");
  }
  const bool gpu = vm.count("gpu") > 0;
  if (gpu && !runs_path.empty())
    throw core::UserError(
        "calibrate: give --runs RUNS.csv (measured runs) or --gpu --base NAME (the local GPU), not both");
  if (!gpu && runs_path.empty())
    throw core::UserError("calibrate: give --runs RUNS.csv (measured runs) or --gpu --base NAME (the local GPU)");
  // An option of the other mode would be ignored: say so instead.
  const auto refuse_with = [&](const char* option, bool given, const char* mode) {
    if (given)
      throw core::UserError(std::string("calibrate: ") + option + " goes with " + mode +
                            " (see 'cotune calibrate --help')");
  };
  if (gpu) {
    refuse_with("--map", !maps.empty(), "--runs");
    refuse_with("--fit", vm.count("fit") > 0, "--runs");
    refuse_with("--all-constants", vm.count("all-constants") > 0, "--runs");
    refuse_with("--json", vm.count("json") > 0, "--runs");
    refuse_with("--folds", !vm["folds"].defaulted(), "--runs");
    refuse_with("--prior-sigma", !vm["prior-sigma"].defaulted(), "--runs");
    refuse_with("--space", vm.count("space") > 0, "--runs");
  } else {
    refuse_with("--base", vm.count("base") > 0, "--gpu");
    refuse_with("--executor-options", !vm["executor-options"].defaulted(), "--gpu");
  }
  if (vm.count("fit") && vm.count("all-constants"))
    throw core::UserError("calibrate: --fit names the constants to fit and --all-constants fits every one the runs "
                          "determine: give one of them");
  if (!(prior_sigma > 0)) throw core::UserError("calibrate: --prior-sigma must be > 0");
  if (folds < 0 || folds == 1)
    throw core::UserError("calibrate: --folds: expected 0 (no held-out error) or at least 2 folds, got " +
                          std::to_string(folds));

  if (gpu) {
    if (base.empty()) throw core::UserError("calibrate: --gpu needs --base NAME (a catalogue GPU, e.g. h100-sxm)");
    if (!rows_path.empty()) throw core::UserError("calibrate: --rows goes with --runs (the runs to compare with the model)");
    json measured;
    const int status = calibrate_on_gpu(base, executor_options, &measured);
    if (status != 0) return status;
    json entry = measured;
    entry["runs"] = 0;
    write_file({{"cotune_calibration", 1}, {"source", "cotune calibrate --gpu --base " + base}, {"gpus", {{base, entry}}}},
               out_path);
    return 0;
  }

  // A misspelt constant is the option's fault, not the runs': say so before reading them.
  for (const std::string& name : split_list(fit))
    if (core::perf::calibration_constant_index(name) < 0) {
      std::vector<std::string> names;
      for (const auto& c : core::perf::calibration_constants()) names.push_back(c.name);
      throw core::UserError("calibrate: --fit: unknown constant '" + name + "'" +
                            support::did_you_mean(name, names) + " (see 'cotune calibrate --help')");
    }
  core::Registry registry;
  registry.load_default();
  std::vector<std::pair<std::string, std::string>> mapping;
  for (const std::string& m : maps) mapping.push_back(core::parse_column_mapping(m));
  const CalibrationRuns runs =
      read_calibration_runs(registry, core::TableSchema::of(registry, space), runs_path, mapping);
  for (const std::string& w : runs.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  core::perf::CalibrationOptions options;
  options.fit = split_list(fit);
  options.folds = static_cast<size_t>(folds);
  options.listed_runs = std::numeric_limits<size_t>::max();  // a refusal names every run at fault
  options.held_out = folds >= 2;
  options.prior_sigma = prior_sigma;
  options.select = vm.count("all-constants") == 0;
  const bool as_json = vm.count("json") > 0;
  std::FILE* summary = out_path.empty() ? stderr : stdout;
  if (!as_json)
    for (const core::RejectionGroup& g : core::rejection_groups(runs.skipped))
      std::fprintf(stderr, "%s: %s: %s; %s\n", runs_path.c_str(), g.where.c_str(), g.reason.c_str(),
                   g.rows == 1 ? "the run is left out" : "the runs are left out");
  // Each GPU type is fitted on its own runs; one whose runs cannot determine a constant is refused
  // (naming them) and the others are still fitted and written.
  std::vector<core::perf::CalibrationResult> results;
  std::vector<std::pair<std::string, std::string>> refused;  // GPU type, why
  for (const auto& [name, gpu_runs] : runs.by_gpu) {
    try {
      results.push_back(core::perf::calibrate(gpu_runs, options));
    } catch (const core::UserError& e) {
      // The runs are named, unless the reason names those at fault already.
      const std::string why = e.what();
      std::string lines;
      for (const core::perf::CalibrationRun& r : gpu_runs) lines += (lines.empty() ? "" : ", ") + r.label;
      const bool names_runs = std::any_of(gpu_runs.begin(), gpu_runs.end(), [&](const core::perf::CalibrationRun& r) {
        return why.find(r.label + ",") != std::string::npos || why.find(r.label + ")") != std::string::npos ||
               why.find(r.label + " ") != std::string::npos;
      });
      refused.emplace_back(name, names_runs ? why : why + " (" + lines + ")");
      if (!as_json) std::fprintf(stderr, "%s (%s): not calibrated: %s\n", runs_path.c_str(), name.c_str(),
                                 refused.back().second.c_str());
      continue;
    }
    if (!as_json) print_result(summary, results.back(), options.held_out);
  }
  if (results.empty()) {
    // Each GPU type's refusal is printed above: the error only sums them up.
    if (!as_json && !refused.empty())
      throw core::UserError(runs_path + ": nothing calibrated (" + std::to_string(refused.size()) +
                            " GPU type(s) refused, above)");
    std::string why;
    for (const auto& [name, reason] : refused) why += (why.empty() ? "" : "; ") + runs_path + " (" + name + "): " + reason;
    if (why.empty()) {
      why = runs_path + ": no usable run";
      for (size_t i = 0; i < runs.skipped.size() && i < 3; ++i)
        why += std::string(i ? "; " : " (") + "line " + std::to_string(runs.skipped[i].line) + ": " + runs.skipped[i].reason;
      if (!runs.skipped.empty()) why += runs.skipped.size() > 3 ? "; ...)" : ")";
    }
    throw core::UserError(why);
  }
  if (!rows_path.empty()) write_rows(rows_path, runs, results);
  const json file = core::perf::calibration_file(results, runs_path);
  // Exit status 1: the file holds what could be fitted, and some runs or GPU types were left out.
  const int status = runs.skipped.empty() && refused.empty() ? 0 : 1;
  if (as_json) {
    json fits = json::array(), left_out = json::array(), not_calibrated = json::array();
    for (const auto& r : results) fits.push_back(result_json(r));
    for (const core::RejectedRow& s : runs.skipped) left_out.push_back({{"line", s.line}, {"reason", s.reason}});
    for (const auto& [name, reason] : refused) not_calibrated.push_back({{"gpu", name}, {"reason", reason}});
    if (!out_path.empty()) {
      std::ofstream f(out_path, std::ios::binary | std::ios::trunc);
      if (!(f << file.dump(2) << "\n")) throw core::UserError("calibrate: --out '" + out_path + "': cannot write it");
    }
    std::cout << json{{"schema_version", 1}, {"calibration", file}, {"fits", fits}, {"left_out", left_out},
                      {"not_calibrated", not_calibrated}}
                     .dump(2)
              << "\n";
    return status;
  }
  const bool fits_nothing = std::none_of(results.begin(), results.end(), [](const core::perf::CalibrationResult& r) {
    return !r.fitted.empty();
  });
  write_file(file, out_path, fits_nothing);
  if (status != 0) {
    std::string what;
    if (!runs.skipped.empty()) what = std::to_string(runs.skipped.size()) + " run(s) left out";
    if (!refused.empty())
      what += (what.empty() ? "" : " and ") + std::to_string(refused.size()) + " GPU type(s) not calibrated";
    std::fprintf(stderr, "calibrate: %s (above); the file holds the rest\n", what.c_str());
  }
  return status;
}

}  // namespace

COTUNE_COMMAND("calibrate", "fit the performance model's constants to measured runs or to the local GPU",
               run_calibrate);

}  // namespace cotune::cli
