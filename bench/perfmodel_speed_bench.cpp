// Speed of the performance model: lowering (through the llm space plugin's ABI) plus timing of one
// configuration of Llama-3 70B on 512 H100 (target: 200,000 per second on one core), and the
// enumeration and simulation of every valid configuration of that space.
//   build-perf/bench/perfmodel_speed_bench            (Google Benchmark flags accepted)
#include <benchmark/benchmark.h>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

namespace {

const char* kWorkload = R"({"model": {"preset": "llama3-70b"},
  "training": {"global_batch": 1024, "dtype": "bf16"},
  "cluster": {"gpu": "h100-sxm", "nodes": 64}})";

struct Fixture {
  cotune::core::Registry registry;
  std::unique_ptr<cotune::core::Space> space;
  std::vector<double> samples;  // valid configurations, row-major
  size_t n = 0;
  Fixture() {
    registry.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-llm.so");
    space = registry.make_space("llm", kWorkload);
    samples.resize(1024 * space->num_params());
    n = space->sample(42, 1024, samples.data());
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

cotune_sim_result empty_result() {
  cotune_sim_result r{};
  r.struct_size = COTUNE_STRUCT_SIZE(cotune_sim_result, cost_per_mtokens);
  return r;
}

void BM_LowerAndSimulate(benchmark::State& state) {
  Fixture& f = fixture();
  const size_t p = f.space->num_params();
  cotune_sim_result r = empty_result();
  size_t i = 0;
  for (auto _ : state) {
    const cotune_trace& t = f.space->lower(f.samples.data() + (i++ % f.n) * p);
    cotune::core::perf::simulate(t, &r);
    benchmark::DoNotOptimize(r.step_time_s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LowerAndSimulate);

void BM_Lower(benchmark::State& state) {
  Fixture& f = fixture();
  const size_t p = f.space->num_params();
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(f.space->lower(f.samples.data() + (i++ % f.n) * p).num_ops);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Lower);

void BM_Simulate(benchmark::State& state) {
  Fixture& f = fixture();
  const cotune_trace& t = f.space->lower(f.samples.data());
  cotune_sim_result r = empty_result();
  for (auto _ : state) {
    cotune::core::perf::simulate(t, &r);
    benchmark::DoNotOptimize(r.step_time_s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Simulate);

// Every configuration of the space's domains: check in batches, then lower and time the valid ones.
void enumerate_space() {
  Fixture& f = fixture();
  const auto& params = f.space->params();
  const size_t p = params.size();
  std::vector<std::vector<double>> domains;
  double size = 1;
  for (const auto& prm : params) {
    domains.push_back(prm.domain());
    size *= domains.back().size();
  }
  const auto start = std::chrono::steady_clock::now();
  const size_t batch = 4096;
  std::vector<double> configs(batch * p);
  std::vector<int32_t> valid(batch);
  std::vector<size_t> index(p, 0);
  size_t total = 0, n_valid = 0, fill = 0;
  double best = 0;
  cotune_sim_result r = empty_result();
  auto flush = [&]() {
    f.space->check(configs.data(), fill, valid.data());
    for (size_t i = 0; i < fill; ++i) {
      if (!valid[i]) continue;
      ++n_valid;
      cotune::core::perf::simulate(f.space->lower(configs.data() + i * p), &r);
      if (r.tokens_per_s > best) best = r.tokens_per_s;
    }
    fill = 0;
  };
  for (bool done = false; !done;) {
    for (size_t k = 0; k < p; ++k) configs[fill * p + k] = domains[k][index[k]];
    ++fill, ++total;
    if (fill == batch) flush();
    size_t k = 0;
    while (k < p && ++index[k] == domains[k].size()) index[k++] = 0;
    done = k == p;
  }
  flush();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("enumeration: %zu configurations (%.0f expected), %zu valid, checked all and simulated the valid ones "
              "in %.2f s (%.0f configurations/s); best %.0f tokens/s\n",
              total, size, n_valid, secs, total / secs, best);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (fixture().n == 0) {
    std::fprintf(stderr, "no valid configuration sampled: is the llm space plugin built?\n");
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  enumerate_space();
  return 0;
}
