// Evidence for the recsys space (issue 10): known behaviours of recommendation-model training
// reproduced by the planner + lowering + performance model, each as rows of simulated figures,
// then Google Benchmark times the planner (check() = plan one configuration) for the ads-like
// preset, 500 tables on 128 GPUs.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

using cotune::core::Registry;
using cotune::core::Space;
using nlohmann::json;

Registry& registry() {
  static Registry reg = [] {
    Registry r;
    if (!r.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-recsys.so")) std::fprintf(stderr, "cannot load the recsys plugin\n");
    return r;
  }();
  return reg;
}

json cluster(double nodes) { return {{"gpu", "h100-sxm"}, {"nodes", nodes}, {"gpus_per_node", 8}, {"host_gib_per_node", 2048}}; }

json criteo(double nodes, double batch = 65536) {
  return {{"model", {{"preset", "criteo-terabyte"}}},
          {"training", {{"global_batch", batch}, {"dtype", "tf32"}}},
          {"cluster", cluster(nodes)}};
}

cotune_sim_result simulate(const Space& s, const std::vector<double>& c) {
  cotune_sim_result r{};
  r.struct_size = COTUNE_STRUCT_SIZE(cotune_sim_result, cost_per_mtokens);
  cotune::core::perf::simulate(s.lower(c.data()), &r);
  return r;
}

double feature(const Space& s, const std::vector<double>& c, const std::string& name) {
  std::vector<double> f(s.feature_names().size());
  s.featurize(c.data(), 1, f.data());
  for (size_t i = 0; i < f.size(); ++i)
    if (s.feature_names()[i] == name) return f[i];
  return 0;
}

void header(const char* title) {
  std::printf("\n%s\n", title);
  std::printf("| configuration | step ms | samples/s | exposed emb comm ms | imbalance | peak GiB |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
}

void row(const Space& s, const char* label, const json& config) {
  const std::vector<double> c = s.parse(config.dump());
  const std::string why = s.explain(c.data());
  if (!why.empty()) {
    std::printf("| %s | invalid: %s | | | | |\n", label, why.c_str());
    return;
  }
  const cotune_sim_result r = simulate(s, c);
  std::printf("| %s | %.2f | %.0f | %.2f | %.2f | %.1f |\n", label, r.step_time_s * 1e3, r.tokens_per_s,
              r.exposed_comm_s[COTUNE_GROUP_EMB] * 1e3, feature(s, c, "imbalance"), r.peak_memory_bytes / 1073741824.0);
}

void known_behaviours() {
  {
    header("1. Replicating tiny tables beats sharding them (Criteo Terabyte, 16 H100, row-wise above 1e7 rows, batch 512/GPU)");
    auto s = registry().make_space("recsys", criteo(2).dump(), "{}");
    const json base = {{"large_table_sharding", "row_wise"}, {"large_table_rows", 1e7}, {"batch_per_gpu", 512}};
    for (double mib : {0.0, 1.0, 16.0}) {
      json c = base;
      c["replicate_below_mib"] = mib;
      row(*s, ("replicate_below_mib " + std::to_string(int(mib))).c_str(), c);
    }
  }
  {
    header("2. Row-wise beats table-wise for a table larger than one GPU's share (1 hot table of pooling 64 + 31 of pooling 2, 16 H100)");
    json tables = json::array();
    tables.push_back({{"name", "hot"}, {"rows", 20000000}, {"dim", 128}, {"pooling", 64}});
    for (int i = 0; i < 31; ++i) tables.push_back({{"name", "t" + std::to_string(i)}, {"rows", 2000000}, {"dim", 128}, {"pooling", 2}});
    const json w = {{"model", {{"tables", tables}, {"dense_features", 13}, {"bottom_mlp", {512, 256, 128}},
                               {"top_mlp", {1024, 512, 1}}, {"interaction", "dot"}}},
                    {"training", {{"global_batch", 65536}, {"dtype", "tf32"}}},
                    {"cluster", cluster(2)}};
    auto s = registry().make_space("recsys", w.dump(), "{}");
    for (const char* sh : {"table_wise", "row_wise", "table_row_wise", "column_wise"})
      row(*s, (std::string("large tables (> 1e7 rows) ") + sh).c_str(),
          {{"large_table_sharding", sh}, {"large_table_rows", 1e7}, {"replicate_below_mib", 0}, {"batch_per_gpu", 512}});
  }
  {
    header("3. fp16 all-to-all helps when communication dominates (Criteo, row-wise, batch 512/GPU)");
    for (double nodes : {1.0, 16.0}) {
      auto s = registry().make_space("recsys", criteo(nodes, 512 * 8 * nodes).dump(), "{}");
      for (const char* p : {"fp32", "fp16"})
        row(*s, (std::to_string(int(nodes * 8)) + " GPUs, a2a " + p).c_str(),
            {{"large_table_sharding", "row_wise"}, {"batch_per_gpu", 512}, {"a2a_precision", p}});
    }
  }
  {
    header("4. Prefetching the sparse all-to-all hides it when compute is long enough (ads-500, 128 H100, fp16 storage)");
    const json w = {{"model", {{"preset", "ads-500"}}},
                    {"training", {{"global_batch", 131072}, {"dtype", "bf16"}}},
                    {"cluster", cluster(16)}};
    auto s = registry().make_space("recsys", w.dump(), "{}");
    for (const char* sh : {"row_wise", "table_wise"})
      for (double b : {128.0, 1024.0})
        for (const char* p : {"plain", "prefetch_sparse"})
          row(*s, (std::string(sh) + " above 1e7 rows, batch_per_gpu " + std::to_string(int(b)) + ", " + p).c_str(),
              {{"large_table_sharding", sh}, {"large_table_rows", 1e7}, {"emb_precision", "fp16"},
               {"a2a_precision", "fp16"}, {"batch_per_gpu", b}, {"pipeline", p}});
  }
}

// Planning one configuration of the ads-like preset (500 tables) on 128 GPUs.
void BM_Plan500Tables128Gpus(benchmark::State& state, const char* sharding) {
  const json w = {{"model", {{"preset", "ads-500"}}},
                  {"training", {{"global_batch", 131072}, {"dtype", "bf16"}}},
                  {"cluster", cluster(16)}};
  auto s = registry().make_space("recsys", w.dump(), "{}");
  const std::vector<double> c = s->parse(json({{"large_table_sharding", sharding}, {"large_table_rows", 1e7},
                                               {"emb_precision", "fp16"}, {"batch_per_gpu", 1024}})
                                             .dump());
  int32_t valid = 0;
  for (auto _ : state) {
    s->check(c.data(), 1, &valid);
    benchmark::DoNotOptimize(valid);
  }
  state.counters["valid"] = valid;
}
BENCHMARK_CAPTURE(BM_Plan500Tables128Gpus, table_wise, "table_wise")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Plan500Tables128Gpus, row_wise, "row_wise")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Plan500Tables128Gpus, column_wise, "column_wise")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Plan500Tables128Gpus, table_row_wise, "table_row_wise")->Unit(benchmark::kMicrosecond);

// Planning + lowering + simulating (what the sim executor costs per trial).
void BM_LowerAndSimulate500Tables(benchmark::State& state) {
  const json w = {{"model", {{"preset", "ads-500"}}},
                  {"training", {{"global_batch", 131072}, {"dtype", "bf16"}}},
                  {"cluster", cluster(16)}};
  auto s = registry().make_space("recsys", w.dump(), "{}");
  const std::vector<double> c = s->parse(R"({"large_table_sharding": "row_wise", "emb_precision": "fp16", "batch_per_gpu": 1024})");
  for (auto _ : state) benchmark::DoNotOptimize(simulate(*s, c).step_time_s);
}
BENCHMARK(BM_LowerAndSimulate500Tables)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  known_behaviours();
  std::printf("\n");
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
