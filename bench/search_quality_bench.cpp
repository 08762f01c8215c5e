// Search quality of the study loop (issue 6): for each example workload, the true optimum is found by
// simulating every valid configuration without noise; then each searcher runs the real loop (sim
// executor at 5% noise, krr with and without the analytic prior) until the best measured
// configuration is truly within 1% of the optimum. Reported: median and 90th percentile of the
// trials that took, over seeds, against random search. Random search is replayed directly on the
// enumerated space (uniform draws without replacement, the same noise model as the sim executor),
// because it needs thousands of trials where the loop's refits would only add time.
// Then Google Benchmark times the host's own work per proposal with 1,000 measured trials: refit
// the surrogate (krr + prior) and ask the searcher for one configuration.
//
// Options (before the Google Benchmark flags): --seeds N (default 3; the issue asks for 20),
// --cap N (trials per run before giving up, default 60), --workloads a,b (names of
// examples/studies/*.json without .json), --searchers a,b (default: every searcher found but random).
#include <cotune/core/objective.hpp>
#include <cotune/core/perfmodel.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/search_context.hpp>
#include <cotune/core/store.hpp>
#include <cotune/core/study_file.hpp>
#include <cotune/core/study_runner.hpp>
#include <cotune/core/study_setup.hpp>
#include <cotune/core/surrogate.hpp>

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace {

using namespace cotune::core;
namespace fs = std::filesystem;
using nlohmann::json;

struct Settings {
  int seeds = 3;
  int cap = 60;
  std::vector<std::string> workloads = {"llama3-70b-512xh100", "gpt3-175b-1024xa100", "mixtral-8x7b-64xh100"};
  std::vector<std::string> searchers;  // empty: all but random
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The true (noise-free) value of the objective metric for every valid configuration.
struct Landscape {
  std::unordered_map<std::string, double> truth;  // Space::key -> metric
  double optimum = 0;
  Direction direction = Direction::maximize;
  bool within(double v) const {
    return direction == Direction::maximize ? v >= optimum * 0.99 : v <= optimum * 1.01;
  }
};

Landscape enumerate(const Space& space, const ObjectiveSpec& objective) {
  Landscape l;
  l.direction = objective.direction;
  const size_t p = space.num_params();
  std::vector<std::vector<double>> domains;
  for (const Param& param : space.params()) domains.push_back(param.domain());
  std::vector<size_t> index(p, 0);
  const size_t batch = 4096;
  std::vector<double> rows;
  auto flush = [&] {
    size_t n = rows.size() / p;
    std::vector<int32_t> valid(n);
    space.check(rows.data(), n, valid.data());
    for (size_t i = 0; i < n; ++i) {
      if (!valid[i]) continue;
      const double* c = rows.data() + i * p;
      const cotune_trace& trace = space.lower(c);
      cotune_sim_result r{};
      r.struct_size = sizeof r;
      perf::simulate(trace, &r);
      if (!r.fits) continue;
      auto v = model_metric(r, trace, objective.metric);
      if (!v) continue;
      bool feasible = true;  // the study's constraints, on the model's (noise-free) metrics
      for (const Constraint& k : objective.constraints) {
        auto m = model_metric(r, trace, k.metric);
        feasible = feasible && m && !(k.max && *m > *k.max) && !(k.min && *m < *k.min);
      }
      if (!feasible) continue;
      l.truth.emplace(space.key(c), *v);
    }
    rows.clear();
  };
  for (;;) {
    for (size_t j = 0; j < p; ++j) rows.push_back(domains[j][index[j]]);
    if (rows.size() / p == batch) flush();
    size_t j = 0;
    while (j < p && ++index[j] == domains[j].size()) index[j++] = 0;
    if (j == p) break;
  }
  flush();
  bool first = true;
  for (const auto& [key, v] : l.truth)
    if (first || better(v, l.optimum, l.direction)) l.optimum = v, first = false;
  return l;
}

// Trials until the best measured configuration is within 1% of the optimum: by its true
// (noise-free) value, and by its measured value. -1: not within the cap.
struct Reached {
  int truly = -1;
  int measured = -1;
};

// Random search replayed on the landscape: draws without replacement, measured with the sim
// executor's noise model.
Reached random_search_trials(const Landscape& l, uint64_t seed, int cap) {
  Reached out;
  std::mt19937_64 rng(seed);
  std::vector<double> flat;
  for (const auto& entry : l.truth) flat.push_back(entry.second);
  std::sort(flat.begin(), flat.end());  // an order that does not depend on hashing
  std::vector<size_t> order(flat.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::normal_distribution<double> noise(0, 1);
  std::optional<double> best_measured;
  double best_truth = 0;
  for (int t = 0; t < cap && t < static_cast<int>(order.size()); ++t) {
    double truth = flat[order[t]];
    double factor = std::exp(0.05 * noise(rng));
    double measured = l.direction == Direction::maximize ? truth / factor : truth * factor;
    if (!best_measured || better(measured, *best_measured, l.direction)) best_measured = measured, best_truth = truth;
    if (out.measured < 0 && l.within(*best_measured)) out.measured = t + 1;
    if (out.truly < 0 && l.within(best_truth)) out.truly = t + 1;
    if (out.truly > 0 && out.measured > 0) break;
  }
  return out;
}

// The real loop with one searcher.
Reached loop_trials(const StudySpec& base, const std::string& searcher, bool prior, uint64_t seed, int cap,
                const Landscape& l, const std::string& store_path) {
  StudySpec spec = base;
  json doc = json::parse(spec.text);
  doc["name"] = base.name + "-" + searcher + (prior ? "-prior" : "-noprior") + "-" + std::to_string(seed);
  doc["searcher"] = searcher;
  doc["predictor"] = {{"name", "krr"}, {"prior", prior ? "analytic" : "none"}};
  doc["executor"] = {{"name", "sim"}, {"options", {{"noise", 0.05}, {"seed", seed}}}};
  doc["budget"] = {{"trials", cap}};
  doc["seed"] = seed;
  doc["workload"] = base.workload;
  doc.erase("format");
  spec = parse_study_file(doc.dump(), base.file, "/");

  std::atomic<int> stop{0};
  Reached reached;
  int count = 0;
  std::optional<double> best_measured;
  double best_truth = 0;
  const std::string& metric = spec.objectives.front().metric;
  RunOptions options;
  options.store_path = store_path;
  options.display = RunOptions::Display::quiet;
  options.stop = &stop;
  Registry registry;
  load_study_plugins(registry, spec);
  std::unique_ptr<Space> space = make_study_space(registry, spec);
  options.on_trial_committed = [&](const TrialRecord& t) {
    ++count;
    // Only feasible trials count (the store keeps an objective for those alone).
    if (t.status != TrialStatus::ok || !t.metrics_json || !t.objective) return;
    auto measured = metric_value(*t.metrics_json, metric);
    if (!measured) return;
    if (!best_measured || better(*measured, *best_measured, l.direction)) {
      best_measured = measured;
      std::vector<double> c = space->parse(t.config_json);
      auto it = l.truth.find(space->key(c.data()));
      best_truth = it != l.truth.end() ? it->second : 0;
    }
    if (reached.measured < 0 && l.within(*best_measured)) reached.measured = count;
    if (reached.truly < 0 && l.within(best_truth)) reached.truly = count;
    if (reached.truly > 0 && reached.measured > 0) stop = 2;  // the answers are in: cancel the rest
  };
  run_study(spec, options);
  return reached;
}

std::string percentiles(std::vector<int> trials, int cap) {
  for (int& t : trials)
    if (t < 0) t = cap + 1;  // not reached within the cap
  std::sort(trials.begin(), trials.end());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(trials.size()))) - 1;
    int v = trials[std::min(i, trials.size() - 1)];
    return v > cap ? ">" + std::to_string(cap) : std::to_string(v);
  };
  return at(0.5) + " / " + at(0.9);
}

void search_quality(const Settings& s) {
  std::string store_dir = fs::temp_directory_path() / ("cotune-search-bench-" + std::to_string(getpid()));
  fs::create_directories(store_dir);
  std::printf("Search quality: trials until the best measured configuration is within 1%% of the optimum,\n"
              "by its true (noise-free) value and by its measured value\n");
  std::printf("(median / p90 over %d seeds; sim executor, 5%% noise; '>N': not within the %d-trial cap)\n\n", s.seeds,
              s.cap);
  for (const std::string& w : s.workloads) {
    StudySpec base = load_study_file(std::string(COTUNE_SOURCE_DIR) + "/examples/studies/" + w + ".json");
    Registry registry;
    load_study_plugins(registry, base);
    std::unique_ptr<Space> space = make_study_space(registry, base);
    Landscape l = enumerate(*space, base.objectives.front());
    std::printf("%s: %zu valid configurations, optimum %s = %.6g\n", w.c_str(), l.truth.size(),
                base.objectives.front().metric.c_str(), l.optimum);
    std::vector<std::string> searchers = s.searchers;
    if (searchers.empty())
      for (const ComponentRef& c : registry.components())
        if (c.info.kind == COTUNE_KIND_SEARCHER && c.info.name != "random") searchers.push_back(c.info.name);
    const int random_cap = 100000;
    auto report = [&](const std::string& who, const std::string& predictor, const std::vector<Reached>& r, int cap) {
      std::vector<int> truly, measured;
      for (const Reached& x : r) truly.push_back(x.truly), measured.push_back(x.measured);
      std::printf("  %-12s %-10s true value: %-14s measured value: %s\n", who.c_str(), predictor.c_str(),
                  percentiles(truly, cap).c_str(), percentiles(measured, cap).c_str());
      std::fflush(stdout);
    };
    std::vector<Reached> random;
    for (int seed = 1; seed <= s.seeds; ++seed) random.push_back(random_search_trials(l, seed, random_cap));
    report("random", "-", random, random_cap);
    for (const std::string& name : searchers)
      for (bool prior : {true, false}) {
        std::vector<Reached> trials;
        for (int seed = 1; seed <= s.seeds; ++seed)
          trials.push_back(loop_trials(base, name, prior, seed, s.cap, l, store_dir + "/" + w + ".db"));
        report(name, prior ? "krr+prior" : "krr", trials, s.cap);
      }
  }
  fs::remove_all(store_dir);
  std::printf("\n");
}

// Host overhead per proposal with 1,000 measured trials, in its two parts: refitting the surrogate
// (krr + prior: lowering and simulating every trial for the prior feature, then the krr fit), which
// the loop does when new results came in, and one proposal of the reinforce searcher through the
// host's search context (scores from the fitted surrogate).
void BM_HostOverheadPerProposal(benchmark::State& state) {
  StudySpec spec =
      load_study_file(std::string(COTUNE_SOURCE_DIR) + "/examples/studies/llama3-70b-512xh100.json");
  Registry registry;
  load_study_plugins(registry, spec);
  std::unique_ptr<Space> space = make_study_space(registry, spec);
  auto predictor = registry.make_predictor("krr", surrogate_predictor_options("{}", "bench"));
  auto searcher = registry.make_searcher("reinforce", "{}", *space, 1);
  const size_t p = space->num_params();
  const size_t n = 1000;
  std::vector<double> configs(n * p);
  size_t got = space->sample(42, n, configs.data());
  std::vector<double> values(got);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0, 1);
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < got; ++i) {
    const cotune_trace& trace = space->lower(configs.data() + i * p);
    cotune_sim_result r{};
    r.struct_size = sizeof r;
    perf::simulate(trace, &r);
    values[i] = r.tokens_per_s * std::exp(0.05 * noise(rng));
    seen.insert(space->key(configs.data() + i * p));
  }
  Surrogate surrogate(*space, *predictor, "tokens_per_s", true, configs.data());
  surrogate.fit(configs.data(), got, values.data());
  std::vector<double> out(p);
  const bool refit = state.range(0) == 1;
  for (auto _ : state) {
    if (refit) {
      surrogate.fit(configs.data(), got, values.data());
    } else {
      SearchContext context(*space, surrogate, Direction::maximize, seen);
      benchmark::DoNotOptimize(searcher->propose(context.get(), 1, out.data()));
    }
  }
  state.SetLabel(std::string(refit ? "refit krr+prior" : "propose (reinforce)") + ", " + std::to_string(got) +
                 " measured trials");
}
BENCHMARK(BM_HostOverheadPerProposal)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seeds") s.seeds = std::max(1, std::atoi(value("--seeds").c_str()));
    else if (a == "--cap") s.cap = std::max(1, std::atoi(value("--cap").c_str()));
    else if (a == "--workloads") s.workloads = split(value("--workloads"));
    else if (a == "--searchers") s.searchers = split(value("--searchers"));
    else if (a == "--no-search") s.seeds = 0;
    else rest.push_back(argv[i]);
  }
  if (s.seeds > 0) search_quality(s);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
