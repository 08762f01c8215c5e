// Predictor costs through the real plugin libraries: krr and mlp fit on 1,000 rows of 20 features
// and their batch predict throughput; krr also at 5,000 rows (Nystrom basis). Each benchmark reports
// the held-out R^2 as a counter, so a faster but worse model shows.
//
//   build-pred/bin/predictor_bench --benchmark_counters_tabular=true
#include <cotune/core/abi/components.hpp>
#include <cotune/core/registry.hpp>

#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr size_t kFeatures = 20;

cotune::core::Registry& registry() {
  static cotune::core::Registry r = [] {
    cotune::core::Registry reg;
    reg.load_file(COTUNE_PLUGIN_DIR "/libcotune-predictor-krr.so");
    reg.load_file(COTUNE_PLUGIN_DIR "/libcotune-predictor-mlp.so");
    return reg;
  }();
  return r;
}

struct Data {
  size_t n = 0;
  std::vector<double> x, y;
};

// A smooth positive response over 20 features in [0, 1], in the spirit of a throughput surface:
// a few strong effects, interactions and many weak ones.
Data make_data(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Data d;
  d.n = n;
  d.x.resize(n * kFeatures);
  for (double& v : d.x) v = u(rng);
  for (size_t i = 0; i < n; ++i) {
    const double* r = &d.x[i * kFeatures];
    double s = 1.5 * std::sin(3 * r[0]) + r[1] * r[2] - 0.8 * (r[3] - 0.5) * (r[3] - 0.5);
    for (size_t k = 4; k < kFeatures; ++k) s += 0.1 * std::cos(2 * r[k]);
    d.y.push_back(std::exp(s));
  }
  return d;
}

double r_squared(const std::vector<double>& truth, const std::vector<double>& predicted) {
  double mean = 0, ss_res = 0, ss_tot = 0;
  for (double v : truth) mean += v / double(truth.size());
  for (size_t i = 0; i < truth.size(); ++i) {
    ss_res += (truth[i] - predicted[i]) * (truth[i] - predicted[i]);
    ss_tot += (truth[i] - mean) * (truth[i] - mean);
  }
  return 1 - ss_res / ss_tot;
}

double held_out_r2(const cotune::core::Predictor& p) {
  static const Data test = make_data(2000, 99);
  std::vector<double> out(test.n);
  p.predict(test.x.data(), test.n, kFeatures, out.data());
  return r_squared(test.y, out);
}

void fit(benchmark::State& state, const std::string& name, const std::string& options) {
  const Data train = make_data(size_t(state.range(0)), 1);
  std::unique_ptr<cotune::core::Predictor> p;
  for (auto _ : state) {
    p = registry().make_predictor(name, options);
    p->fit(train.x.data(), train.n, kFeatures, train.y.data());
  }
  state.counters["r2"] = held_out_r2(*p);
}

void predict(benchmark::State& state, const std::string& name, const std::string& options) {
  const Data train = make_data(size_t(state.range(0)), 1);
  auto p = registry().make_predictor(name, options);
  p->fit(train.x.data(), train.n, kFeatures, train.y.data());
  const Data query = make_data(10000, 2);
  std::vector<double> mean(query.n), sd(query.n);
  for (auto _ : state) {
    p->predict(query.x.data(), query.n, kFeatures, mean.data(), sd.data());
    benchmark::DoNotOptimize(mean.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(query.n));
  state.counters["r2"] = held_out_r2(*p);
}

void BM_KrrFit(benchmark::State& s) { fit(s, "krr", "{}"); }
void BM_KrrPredict(benchmark::State& s) { predict(s, "krr", "{}"); }
void BM_MlpFit(benchmark::State& s) { fit(s, "mlp", "{}"); }
void BM_MlpPredict(benchmark::State& s) { predict(s, "mlp", "{}"); }

BENCHMARK(BM_KrrFit)->Arg(1000)->Arg(5000)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_KrrPredict)->Arg(1000)->Arg(5000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MlpFit)->Arg(1000)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_MlpPredict)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
