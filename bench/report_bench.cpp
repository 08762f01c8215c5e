// The HTML report of a 10,000-trial study: generation time and file size (targets: < 2 s, < 5 MB).
// The study is filled once through the real Store API with configurations sampled by the real llm
// space and measured by the performance model, then the report is generated through the same call
// `cotune report` makes.
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/report/study_html.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <unistd.h>
#include <nlohmann/json.hpp>

namespace {
using namespace cotune::core;
namespace fs = std::filesystem;

constexpr int kTrials = 10000;

struct BenchStudy {
  std::string dir, store_path;
  int trials = 0;

  BenchStudy() {
    dir = (fs::temp_directory_path() / ("cotune-report-bench-" + std::to_string(::getpid()))).string();
    fs::create_directories(dir);
    store_path = dir + "/cotune.db";
    setenv("COTUNE_PLUGIN_PATH", COTUNE_PLUGIN_DIR, 1);
    nlohmann::json doc = {
        {"name", "bench"},
        {"workload", nlohmann::json::parse(R"({"model": {"preset": "llama3-70b"}, "training": {"global_batch": 1024},
                                               "cluster": {"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8}})")},
        {"space", "llm"},
        {"predictor", {{"name", "krr"}}},
        {"searcher", "random"},
        {"executor", "sim"},
        {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
        {"budget", {{"trials", kTrials}}},
        {"format", "megatron"}};
    StudySpec spec = parse_study_file(doc.dump(), dir + "/study.json", dir);
    Store::Options so;
    so.sync = Store::Sync::kNormal;  // building the fixture, not measuring the store
    Store store(store_path, so);
    NewStudy n;
    n.name = spec.name;
    n.study_json = stored_study_json(spec);
    n.study_hash = spec.hash;
    n.workload_key = spec.workload_key();
    n.space = spec.space.name;
    n.objective_json = spec.objectives_json().dump();
    n.direction = spec.objectives.front().direction;
    StudyRecord study = store.create_study(n);
    Registry registry;
    load_study_plugins(registry, spec);
    std::unique_ptr<Space> space = make_study_space(registry, spec);
    const size_t d = space->num_params(), want = 4 * kTrials;
    std::vector<double> configs(want * d);
    const size_t got = space->sample(11, want, configs.data());
    for (size_t i = 0; i < got && trials < kTrials; ++i) {
      const double* c = &configs[i * d];
      NewTrial t;
      t.config_key = space->key(c);
      t.config_json = space->render(c, COTUNE_RENDER_JSON);
      t.status = TrialStatus::kRunning;
      t.executor = "sim";
      const cotune_trace& trace = space->lower(c);
      cotune_sim_result r{};
      r.struct_size = sizeof r;
      perf::simulate(trace, &r);
      t.predicted = r.tokens_per_s * (0.9 + 0.2 * static_cast<double>(i % 7) / 6);
      std::optional<TrialId> id = store.add_trial(study.id, t);
      if (!id) continue;
      ++trials;
      TrialOutcome out;
      if (!r.fits) {
        out.status = TrialStatus::kOom;
        out.error = "peak memory exceeds the GPU";
      } else {
        out.metrics_json = nlohmann::json{{"step_time_s", r.step_time_s},
                                          {"tokens_per_s", r.tokens_per_s},
                                          {"mfu", r.mfu},
                                          {"peak_mem_gib", r.peak_memory_bytes / 1073741824.0}}
                               .dump();
        out.objective = r.tokens_per_s;
      }
      store.finish_trial(id->id, out);
    }
  }
  ~BenchStudy() { fs::remove_all(dir); }
};

BenchStudy& bench_study() {
  static BenchStudy s;
  return s;
}

void BM_ReportOf10kTrialStudy(benchmark::State& state) {
  BenchStudy& s = bench_study();
  Store store(s.store_path);
  size_t bytes = 0;
  for (auto _ : state) {
    std::string html = report::study_report_html(store, "bench");
    bytes = html.size();
    benchmark::DoNotOptimize(html.data());
  }
  state.counters["trials"] = s.trials;
  state.counters["html_MB"] = static_cast<double>(bytes) / 1e6;
}
BENCHMARK(BM_ReportOf10kTrialStudy)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
