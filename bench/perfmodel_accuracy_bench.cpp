// Accuracy of the performance model on published measurements: Megatron-LM SC'21 Table 1 and
// Korthikanti et al. MLSys'23 Table 5 row by row, then every table of DATA_DIR/published/ per slice
// (GPU x dtype x dense/MoE): rows simulated, refused (with the reason counted), predicted out of
// memory, MAPE, median APE and signed mean error of the step time, and Kendall's tau of throughput
// within each model/GPU/dtype group, and the MAPE after calibrating on 5 % and on 20 % of each
// table's rows, judged on the rest (mean of 5 seeded draws; docs/benchmarks/perfmodel.md). Last,
// the configurations published more than once (the same row but its software version): how far
// their measurements spread, the error floor of any answer that does not know the version.
//   build/bin/perfmodel_accuracy_bench [DATA_DIR] [--rows] [--table NAME] [--workloads DIR]
// --workloads writes each simulated row's inputs as DIR/TABLE.LINE.workload.json, .config.json and
// .options.json, for `cotune simulate --workload W --config C --space-options "$(cat O)"` to break
// its step time down.
#include <cotune/core/registry.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "published/published_runs.hpp"
#include "published/published_table.hpp"

namespace {

using cotune::core::perf::Accuracy;
using cotune::core::perf::PublishedRow;
using cotune::core::perf::PublishedTable;
using cotune::core::perf::RowPrediction;

void write_row_inputs(const std::string& stem, const RowPrediction& p) {
  std::ofstream(stem + ".workload.json") << p.workload << "\n";
  std::ofstream(stem + ".config.json") << p.config << "\n";
  std::ofstream(stem + ".options.json") << p.options << "\n";
}

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100 * v);
  return buf;
}

std::string tau_text(double tau, int pairs) {
  if (!std::isfinite(tau)) return "-";
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.2f (%d)", tau, pairs);
  return buf;
}

void print_header() {
  std::printf("| slice | rows | simulated | refused | OOM flagged | MAPE | median APE | signed mean | tau (pairs) | "
              "tau in a release (pairs) | MAPE cal. 5%% | MAPE cal. 20%% |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
}

struct Scored {
  std::vector<const PublishedRow*> rows;
  std::vector<RowPrediction> predictions;
  void add(const PublishedRow* r, const RowPrediction& p) {
    rows.push_back(r);
    predictions.push_back(p);
  }
};

// Calibrated on `fraction` of the table's rows, judged on the rest of this slice's rows.
std::string calibrated_mape(const Scored& table, const std::string& slice, double fraction) {
  constexpr int kRepeats = 5;
  const auto held = cotune::core::perf::calibrated_held_out(table.rows, table.predictions, fraction, kRepeats);
  Scored in_slice;
  for (size_t i = 0; i < held.rows.size(); ++i)
    if (slice.empty() || held.rows[i]->slice() == slice) in_slice.add(held.rows[i], held.predictions[i]);
  const Accuracy a = cotune::core::perf::accuracy_of(in_slice.rows, in_slice.predictions);
  return a.simulated ? pct(a.mape) : "-";
}

void print_line(const std::string& name, const Accuracy& a, const Scored* table = nullptr, const std::string& slice = "") {
  int refused = 0;
  for (const auto& [why, n] : a.refused) refused += n;
  const std::string cal5 = table ? calibrated_mape(*table, slice, 0.05) : "-";
  const std::string cal20 = table ? calibrated_mape(*table, slice, 0.20) : "-";
  std::printf("| %s | %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n", name.c_str(), a.rows, a.simulated,
              refused, a.oom, a.simulated ? pct(a.mape).c_str() : "-", a.simulated ? pct(a.median_ape).c_str() : "-",
              a.simulated ? pct(a.signed_mean).c_str() : "-", tau_text(a.tau, a.tau_pairs).c_str(),
              tau_text(a.release_tau, a.release_tau_pairs).c_str(), cal5.c_str(), cal20.c_str());
}

void old_tables(const cotune::core::Registry& registry, const std::string& dir) {
  for (const auto& t : cotune::core::perf::check_published_runs(registry, dir)) {
    std::printf("\n## %s (%s)\n\n", t.table.c_str(), t.metric.c_str());
    std::printf("| row | measured | predicted | error | configuration simulated |\n|---|---:|---:|---:|---|\n");
    for (const auto& r : t.rows)
      std::printf("| %s | %.2f | %.2f | %+.1f%% | `%s` |\n", r.label.c_str(), r.measured, r.predicted,
                  100 * r.error(), r.config.c_str());
    std::printf("\nMAPE %.1f%%; pairs more than 5%% apart ordered right: %d of %d\n", 100 * t.mape, t.pairs_ordered,
                t.pairs);
  }
}

}  // namespace

// Rows that publish the same configuration (model, GPU, dtype, every cell) measured with
// different software versions: the spread of their step times, and the MAPE of the best answer
// that cannot tell them apart (each group's median) next to the model's on the same rows.
void print_repeats(const Scored& everything) {
  struct Group {
    std::string slice;
    std::vector<double> measured, predicted;
  };
  std::map<std::string, Group> groups;
  for (size_t i = 0; i < everything.rows.size(); ++i) {
    const PublishedRow& r = *everything.rows[i];
    const RowPrediction& p = everything.predictions[i];
    if (!p.refused.empty() || p.measured_step_s <= 0) continue;
    // A variant of the model or its run (model_variant: "+ torch.compile", "AsyncTP") is another
    // configuration, not another release of the same one.
    std::string key = r.model + "|" + r.variant + "|" + r.gpu + "|" + r.dtype;
    // The precision note's words vary by release ("FP8", "FP8-CS"); the recipe they name does not.
    for (const auto& [column, value] : r.cells)
      if (column != "dtype_detail") key += "|" + column + "=" + value;
    const nlohmann::json workload = nlohmann::json::parse(p.workload, nullptr, false);
    if (workload.is_object()) key += "|" + workload["training"].value("fp8_recipe", std::string());
    Group& g = groups[key];
    g.slice = r.moe ? "moe" : "dense";
    g.measured.push_back(p.measured_step_s);
    g.predicted.push_back(p.step_s);
  }
  struct Sum {
    int groups = 0, rows = 0;
    std::vector<double> spreads;
    double floor = 0, model = 0;
  };
  std::map<std::string, Sum> by;
  for (auto& [key, g] : groups) {
    if (g.measured.size() < 2) continue;
    std::vector<double> sorted = g.measured;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    for (const std::string& slice : {g.slice, std::string("**all**")}) {
      Sum& s = by[slice];
      ++s.groups;
      s.spreads.push_back(sorted.back() / sorted.front() - 1);
      for (size_t i = 0; i < n; ++i) {
        ++s.rows;
        s.floor += std::fabs(median / g.measured[i] - 1);
        s.model += std::fabs(g.predicted[i] / g.measured[i] - 1);
      }
    }
  }
  std::printf("\n## Configurations published more than once (another software version)\n\n"
              "| slice | configurations | rows | median spread | largest spread | MAPE of the best version-blind answer | "
              "the model's MAPE on these rows |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (auto& [slice, s] : by) {
    std::sort(s.spreads.begin(), s.spreads.end());
    const size_t n = s.spreads.size();
    const double median = n % 2 ? s.spreads[n / 2] : (s.spreads[n / 2 - 1] + s.spreads[n / 2]) / 2;
    std::printf("| %s | %d | %d | %s | %s | %s | %s |\n", slice.c_str(), s.groups, s.rows, pct(median).c_str(),
                pct(s.spreads.back()).c_str(), pct(s.floor / s.rows).c_str(), pct(s.model / s.rows).c_str());
  }
}

int main(int argc, char** argv) {
  try {
    std::string dir = COTUNE_SHARED_DIR "/data";
    std::string only;
    bool rows = false;
    std::string workloads_dir;  // --workloads DIR: each simulated row's inputs (above)
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--rows") == 0) rows = true;
      else if (std::strcmp(argv[i], "--table") == 0 && i + 1 < argc) only = argv[++i];
      else if (std::strcmp(argv[i], "--workloads") == 0 && i + 1 < argc) workloads_dir = argv[++i];
      else dir = argv[i];
    }
    cotune::core::Registry registry;
    if (!registry.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-llm.so")) {
      std::fprintf(stderr, "cannot load the llm space from %s\n", COTUNE_PLUGIN_DIR);
      return 1;
    }
    if (only.empty()) old_tables(registry, dir);

    std::map<std::string, Scored> all_slices;
    const std::vector<PublishedTable> tables = cotune::core::perf::read_published_tables(dir + "/published");
    // --table takes the name as the headings print it (published/NAME), the file's (NAME.csv) or NAME.
    if (only.rfind("published/", 0) == 0) only = only.substr(std::strlen("published/"));
    if (only.size() > 4 && only.compare(only.size() - 4, 4, ".csv") == 0) only.resize(only.size() - 4);
    if (!only.empty() && std::none_of(tables.begin(), tables.end(), [&](const PublishedTable& t) { return t.name == only; })) {
      std::string names;
      for (const PublishedTable& t : tables) names += (names.empty() ? "" : ", ") + t.name;
      std::fprintf(stderr, "--table %s: no such table under %s/published (there: %s)\n", only.c_str(), dir.c_str(),
                   names.c_str());
      return 2;
    }
    for (const PublishedTable& t : tables) {
      if (!only.empty() && t.name != only) continue;
      Scored table;
      std::map<std::string, Scored> slices;
      for (const PublishedRow& r : t.rows) {
        const RowPrediction p = cotune::core::perf::predict_published_row(registry, r);
        if (!workloads_dir.empty() && p.refused.empty())
          write_row_inputs(workloads_dir + "/" + t.name + "." + std::to_string(r.line), p);
        table.add(&r, p);
        slices[r.slice()].add(&r, p);
        all_slices[r.slice()].add(&r, p);
      }
      std::printf("\n## published/%s (%zu rows; TFLOP/s counted with %s)\n\n", t.name.c_str(), t.rows.size(),
                  t.convention_note.c_str());
      print_header();
      for (const auto& [name, s] : slices)
        print_line(name, cotune::core::perf::accuracy_of(s.rows, s.predictions), &table, name);
      const Accuracy whole = cotune::core::perf::accuracy_of(table.rows, table.predictions);
      print_line("**all**", whole, &table);
      if (!whole.refused.empty()) {
        std::printf("\nRefused:\n");
        for (const auto& [why, n] : whole.refused) std::printf("- %d: %s\n", n, why.c_str());
      }
      if (rows) {
        std::printf("\n| line | model | slice | measured step s | predicted | error | configuration |\n"
                    "|---:|---|---|---:|---:|---:|---|\n");
        for (size_t i = 0; i < table.rows.size(); ++i) {
          const PublishedRow& r = *table.rows[i];
          const RowPrediction& p = table.predictions[i];
          if (!p.refused.empty()) continue;
          std::printf("| %zu | %s | %s | %.3f | %.3f | %+.1f%%%s | `%s` |\n", r.line, r.model.c_str(),
                      r.slice().c_str(), p.measured_step_s, p.step_s, 100 * (p.step_s / p.measured_step_s - 1),
                      p.oom ? " (OOM)" : "", p.config.c_str());
        }
      }
    }
    std::printf("\n## All published tables, per slice\n\n");
    print_header();
    Scored everything;
    for (const auto& [name, s] : all_slices) {
      print_line(name, cotune::core::perf::accuracy_of(s.rows, s.predictions));
      for (size_t i = 0; i < s.rows.size(); ++i) everything.add(s.rows[i], s.predictions[i]);
    }
    print_line("**all**", cotune::core::perf::accuracy_of(everything.rows, everything.predictions));
    print_repeats(everything);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
