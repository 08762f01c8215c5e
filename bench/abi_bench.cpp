// The cost of the ABI itself: a batch predict call of 4096 configurations through a trivial
// predictor plugin (per-configuration overhead, target < 20 ns), and loading and validating 20
// plugin libraries (target < 50 ms).
//   build/bench/abi_bench  (or with --benchmark_repetitions=5)
#include <cotune/core/registry.hpp>

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

namespace {
using cotune::core::Registry;

void BM_PredictBatchAcrossAbi(benchmark::State& state) {
  Registry reg;
  if (!reg.load_file(COTUNE_BENCH_PLUGIN_DIR "/libcotune-predictor-bench1.so")) {
    state.SkipWithError("bench plugin missing");
    return;
  }
  auto predictor = reg.make_predictor("org.cotune.bench.p1");
  const size_t n = static_cast<size_t>(state.range(0)), d = 16;
  std::vector<double> x(n * d, 1.0), y(n, 2.0), out(n);
  predictor->fit(x.data(), n, d, y.data());
  for (auto _ : state) {
    predictor->predict(x.data(), n, d, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
  // Seconds per configuration (shown with an SI prefix: "n" is ns), including the plugin's own (trivial) work of writing one double.
  state.counters["ns_per_config"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(n), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PredictBatchAcrossAbi)->Arg(1)->Arg(64)->Arg(4096);

void BM_Load20Plugins(benchmark::State& state) {
  for (auto _ : state) {
    Registry reg;
    reg.load_directories({COTUNE_BENCH_PLUGIN_DIR});
    if (reg.components().size() != 20) {
      state.SkipWithError("expected 20 bench plugins");
      return;
    }
    benchmark::DoNotOptimize(reg.components().data());
    // The libraries unload here; each iteration measures a cold dlopen + validation of all 20.
  }
}
BENCHMARK(BM_Load20Plugins)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
