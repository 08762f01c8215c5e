// Predictor quality on the co-design space of Llama-3 70B on 512 H100 (examples/studies/
// llama3-70b-512xh100.json): measurements are the analytic performance model's tokens/s with 5%
// log-normal noise, over a pool of distinct valid configurations of the llm space. For 50, 100, 200
// and 500 training rows, krr and mlp, with the analytic prior, the roofline prior and none, it prints
// Kendall's tau (and Spearman, MAPE) on the held-out rest of the pool, through `predictor eval`'s
// engine (predictor_eval.hpp) and the real plugins. The model alone (no data) is the first line.
//
//   build-history/bin/predictor_quality_bench [--pool 1200] [--repeats-krr 5] [--repeats-mlp 3]
//                                             [--sizes 50,100,200,500] [--noise 0.05] [--seed 1]
// (--repeats-krr 0 or --repeats-mlp 0 leaves that predictor out.)
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/history/predictor_eval.hpp>
#include <cotune/core/history/ranking_metrics.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace cotune::core;

namespace {

struct Settings {
  size_t pool = 1200;
  size_t repeats_krr = 5;
  size_t repeats_mlp = 3;
  std::vector<size_t> sizes = {50, 100, 200, 500};
  double noise = 0.05;
  std::uint64_t seed = 1;
};

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--pool") s.pool = std::stoul(v);
    else if (k == "--repeats-krr") s.repeats_krr = std::stoul(v);
    else if (k == "--repeats-mlp") s.repeats_mlp = std::stoul(v);
    else if (k == "--noise") s.noise = std::stod(v);
    else if (k == "--seed") s.seed = std::stoull(v);
    else if (k == "--sizes") {
      s.sizes.clear();
      std::stringstream in(v);
      for (std::string x; std::getline(in, x, ',');) s.sizes.push_back(std::stoul(x));
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return s;
}

double model_tokens_per_s(const Space& space, const double* config) {
  cotune_sim_result r{};
  r.struct_size = sizeof r;
  perf::simulate(space.lower(config), &r);
  return r.tokens_per_s;
}

}  // namespace

int main(int argc, char** argv) {
  const Settings s = parse(argc, argv);
  const StudySpec spec = load_study_file(std::string(COTUNE_SOURCE_DIR) + "/examples/studies/llama3-70b-512xh100.json");
  Registry registry;
  for (const char* lib : {"space-llm", "predictor-krr", "predictor-mlp"})
    registry.load_file(std::string(COTUNE_PLUGIN_DIR) + "/libcotune-" + lib + ".so");
  std::unique_ptr<Space> space = make_study_space(registry, spec);

  // A pool of distinct valid configurations with noisy measurements.
  const size_t p = space->num_params();
  std::vector<double> configs(20 * s.pool * p);
  const size_t got = space->sample(s.seed, 20 * s.pool, configs.data());
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<double> noise(0.0, s.noise);
  std::vector<EvalSample> pool;
  std::vector<double> estimates;
  std::set<std::string> seen;
  for (size_t i = 0; i < got && pool.size() < s.pool; ++i) {
    const double* c = configs.data() + i * p;
    if (!space->valid(c) || !seen.insert(space->key(c)).second) continue;
    const double truth = model_tokens_per_s(*space, c);
    if (!(truth > 0)) continue;
    EvalSample e;
    e.space = space.get();
    e.config.assign(c, c + p);
    e.measured = truth * std::exp(noise(rng));
    pool.push_back(std::move(e));
    estimates.push_back(truth);
  }
  std::vector<double> measured;
  for (const EvalSample& e : pool) measured.push_back(e.measured);
  std::printf("Llama-3 70B on 512 H100, tokens_per_s with %.0f%% noise: pool of %zu distinct valid configurations\n",
              100 * s.noise, pool.size());
  std::printf("the model alone (no data): kendall_tau %.3f, spearman_rho %.3f\n\n", kendall_tau(estimates, measured),
              spearman_rho(estimates, measured));
  std::printf("| predictor | prior | train rows | repeats | kendall_tau | spearman_rho | mape %% | seconds |\n");
  std::printf("| --- | --- | ---: | ---: | --- | --- | --- | ---: |\n");
  for (const char* predictor : {"krr", "mlp"}) {
    if ((std::string(predictor) == "mlp" ? s.repeats_mlp : s.repeats_krr) == 0) continue;  // 0: skip it
    for (Prior prior : {Prior::kAnalytic, Prior::kRoofline, Prior::kNone}) {
      for (size_t n : s.sizes) {
        if (n + 2 > pool.size()) continue;
        EvalOptions o;
        o.predictor = predictor;
        o.prior = prior;
        o.target = "tokens_per_s";
        o.train_rows = n;
        o.repeats = std::string(predictor) == "mlp" ? s.repeats_mlp : s.repeats_krr;
        o.seed = s.seed;
        const auto t0 = std::chrono::steady_clock::now();
        const EvalResult r = evaluate_predictor(registry, pool, o);
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("| %s | %s | %zu | %zu | %.3f +- %.3f | %.3f +- %.3f | %.1f | %.1f |\n", predictor,
                    std::string(to_string(prior)).c_str(), n, o.repeats, r.kendall_tau.mean, r.kendall_tau.std,
                    r.spearman_rho.mean, r.spearman_rho.std, r.mape.mean, secs);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
