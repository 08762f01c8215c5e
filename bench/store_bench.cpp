// The study store: how fast finished trials are recorded (one commit per call, fsync'd with
// synchronous=FULL, and with NORMAL for comparison), and how fast a study of 1,000,000 trials is
// read back (all trials, seen config keys, listing, best, counts).
//
//   build/bench/store_bench [--benchmark_filter=...]
// The 1M-trial store is bulk-loaded once, in one transaction, under $TMPDIR (removed at exit).
#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/store/store.hpp>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "store/sqlite.hpp"

namespace {

namespace fs = std::filesystem;
using cotune::core::Direction;
using cotune::core::NewStudy;
using cotune::core::NewTrial;
using cotune::core::Store;
using cotune::core::TrialOutcome;
using cotune::core::TrialStatus;

constexpr std::int64_t kLargeStudyTrials = 1000000;

// A scratch directory that lives as long as the program.
const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string pattern = (fs::temp_directory_path() / "cotune-store-bench-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    std::atexit([] { fs::remove_all(scratch_dir()); });
    return pattern;
  }();
  return dir;
}

NewStudy bench_study(const std::string& name) {
  NewStudy s;
  s.name = name;
  s.study_json = "{}";
  s.study_hash = cotune::core::sha256_hex(name);
  s.workload_key = cotune::core::workload_key(nlohmann::json{{"model", "llama-70b"}}, "llm");
  s.space = "llm";
  s.objective_json = R"([{"metric":"tokens_per_s","direction":"maximize","constraints":[]}])";
  s.direction = Direction::kMaximize;
  return s;
}

nlohmann::json config_of(std::int64_t i) {
  return {{"tp", 1 << (i % 4)}, {"pp", 1 + i % 8}, {"mbs", 1 + i % 4}, {"recompute", i % 2 ? "full" : "selective"},
          {"zero", i % 3}, {"id", i}};
}

std::string metrics_of(std::int64_t i) {
  return nlohmann::json{{"tokens_per_s", 1000.0 + i % 977}, {"step_time_s", 1.5 + (i % 13) * 0.01},
                        {"peak_mem_gb", 40.0 + i % 40}}
      .dump();
}

// Records finished trials the way the study loop does: add (pending), then finish: two commits.
void BM_RecordFinishedTrial(benchmark::State& state) {
  Store::Options options;
  options.sync = state.range(0) ? Store::Sync::kFull : Store::Sync::kNormal;
  std::string path = scratch_dir() + "/record-" + std::to_string(state.range(0)) + ".db";
  fs::remove(path);
  Store store(path, options);
  std::int64_t study = store.create_study(bench_study("record")).id;
  std::int64_t i = 0;
  for (auto _ : state) {
    nlohmann::json config = config_of(i);
    NewTrial t;
    t.config_key = cotune::core::config_key(config);
    t.config_json = config.dump();
    t.executor = "sim";
    std::int64_t id = store.add_trial(study, t)->id;
    TrialOutcome o;
    o.metrics_json = metrics_of(i);
    o.objective = 1000.0 + i % 977;
    store.finish_trial(id, o);
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(state.range(0) ? "synchronous=FULL" : "synchronous=NORMAL");
}
BENCHMARK(BM_RecordFinishedTrial)->Arg(1)->Arg(0)->Unit(benchmark::kMicrosecond)->MinTime(3.0);

// The store with one study of kLargeStudyTrials finished trials, loaded once.
struct LargeStore {
  std::string path;
  std::int64_t study = 0;
  double load_seconds = 0;

  LargeStore() : path(scratch_dir() + "/large.db") {
    { study = Store(path).create_study(bench_study("large")).id; }
    auto start = std::chrono::steady_clock::now();
    cotune::core::sqlite::Database db(path, SQLITE_OPEN_READWRITE);
    db.exec("PRAGMA synchronous = NORMAL; BEGIN IMMEDIATE");
    auto insert = db.prepare(
        "INSERT INTO trials (study_id, seq, config_key, config_json, status, metrics_json, objective, predicted, "
        "executor, external_id, attempts, created_at, started_at, finished_at) "
        "VALUES (?1, ?2, ?3, ?4, 'ok', ?5, ?6, ?7, 'sim', ?8, 1, ?9, ?9, ?10)");
    double t0 = 1.7e9;
    for (std::int64_t i = 0; i < kLargeStudyTrials; ++i) {
      nlohmann::json config = config_of(i);
      insert->bind(1, study);
      insert->bind(2, i + 1);
      insert->bind(3, cotune::core::config_key(config));
      insert->bind(4, config.dump());
      insert->bind(5, metrics_of(i));
      insert->bind(6, 1000.0 + i % 977);
      insert->bind(7, 990.0 + i % 977);
      insert->bind(8, "job-" + std::to_string(i));
      insert->bind(9, t0 + i);
      insert->bind(10, t0 + i + 0.5);
      insert->step();
      insert->reset();
    }
    db.exec("COMMIT");
    load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "bulk-loaded %lld trials in %.2f s (%.0f trials/s, one transaction); store file %.0f MB\n",
                 static_cast<long long>(kLargeStudyTrials), load_seconds, kLargeStudyTrials / load_seconds,
                 static_cast<double>(fs::file_size(path)) / 1e6);
  }
};

const LargeStore& large_store() {
  static const LargeStore store;
  return store;
}

void BM_ReadAllTrials(benchmark::State& state) {
  const LargeStore& large = large_store();
  Store store(large.path);
  for (auto _ : state) {
    auto trials = store.trials(large.study);
    if (static_cast<std::int64_t>(trials.size()) != kLargeStudyTrials) state.SkipWithError("lost trials");
    benchmark::DoNotOptimize(trials.data());
  }
  state.SetItemsProcessed(state.iterations() * kLargeStudyTrials);
}
BENCHMARK(BM_ReadAllTrials)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_SeenConfigKeys(benchmark::State& state) {
  const LargeStore& large = large_store();
  Store store(large.path);
  for (auto _ : state) {
    auto keys = store.seen_config_keys(large.study);
    if (static_cast<std::int64_t>(keys.size()) != kLargeStudyTrials) state.SkipWithError("lost keys");
  }
  state.SetItemsProcessed(state.iterations() * kLargeStudyTrials);
}
BENCHMARK(BM_SeenConfigKeys)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_ListStudies(benchmark::State& state) {
  const LargeStore& large = large_store();
  Store store(large.path);
  for (auto _ : state) benchmark::DoNotOptimize(store.list_studies());
}
BENCHMARK(BM_ListStudies)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_BestTrial(benchmark::State& state) {
  const LargeStore& large = large_store();
  Store store(large.path);
  for (auto _ : state) benchmark::DoNotOptimize(store.best_trial(large.study));
}
BENCHMARK(BM_BestTrial)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_InFlightTrials(benchmark::State& state) {
  const LargeStore& large = large_store();
  Store store(large.path);
  for (auto _ : state)
    benchmark::DoNotOptimize(store.trials_by_status(large.study, {TrialStatus::kPending, TrialStatus::kRunning}));
}
BENCHMARK(BM_InFlightTrials)->Unit(benchmark::kMicrosecond)->Iterations(20);

// One more finished trial in a study that already has 1M: the unique index and MAX(seq) at scale.
void BM_RecordIntoLargeStudy(benchmark::State& state) {
  const LargeStore& large = large_store();
  Store store(large.path);
  std::int64_t i = kLargeStudyTrials;
  for (auto _ : state) {
    nlohmann::json config = config_of(i);
    NewTrial t;
    t.config_key = cotune::core::config_key(config);
    t.config_json = config.dump();
    t.executor = "sim";
    std::int64_t id = store.add_trial(large.study, t)->id;
    TrialOutcome o;
    o.metrics_json = metrics_of(i);
    o.objective = 1.0;
    store.finish_trial(id, o);
    ++i;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordIntoLargeStudy)->Unit(benchmark::kMicrosecond)->Iterations(200);

}  // namespace

BENCHMARK_MAIN();
