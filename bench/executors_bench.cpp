// 100 short trials through the Slurm executor (one job array, and one job per trial) against the
// same trials through the process executor: wall time, cotune's own CPU time (getrusage), and the
// Slurm client calls made per trial (counted by wrappers around the real programs).
//   SLURM_CONF=/tmp/cotune-slurm/slurm.conf build/bin/executors_bench   (after scripts/slurm-local up)
#include <cotune/core/abi/components.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/cotune.hpp>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr int kTrials = 100;

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::string temp_dir() {
  char pattern[] = "/tmp/cotune-exec-bench-XXXXXX";
  return ::mkdtemp(pattern) ? pattern : "";
}

// Wrappers that count each Slurm client call, then run the real program.
std::string counting_bin(const std::string& dir) {
  std::string bin = dir + "/bin";
  (void)std::system(("mkdir -p '" + bin + "'").c_str());
  for (const char* p : {"sbatch", "squeue", "sacct", "scancel", "sinfo"}) {
    std::string real = "/usr/bin/" + std::string(p);
    std::ofstream(bin + "/" + p) << "#!/bin/sh\necho " << p << " >> '" << dir << "/calls'\nexec " << real << " \"$@\"\n";
    (void)std::system(("chmod +x '" + bin + "/" + p + "'").c_str());
  }
  return bin;
}

std::map<std::string, int> count_calls(const std::string& dir) {
  std::map<std::string, int> n;
  std::ifstream in(dir + "/calls");
  for (std::string w; in >> w;) ++n[w];
  return n;
}

// Runs kTrials trivial trials (each writes its result file) through an executor and reports.
void run_trials(benchmark::State& state, const std::string& executor, nlohmann::json options, bool count_slurm) {
  cotune::core::Registry registry;
  if (!registry.load_file(COTUNE_PLUGIN_DIR "/libcotune-executor-" + executor + ".so"))
    return state.SkipWithError(("cannot load the " + executor + " executor").c_str());
  cotune::ParamList params;
  params.add_int_range("step", 0, kTrials, 0);
  for (auto _ : state) {
    std::string dir = temp_dir();
    if (count_slurm) options["slurm_bin"] = counting_bin(dir);
    std::unique_ptr<cotune::core::Executor> ex;
    try {
      ex = registry.make_executor(executor, options.dump());
    } catch (const std::exception& e) {
      return state.SkipWithError(e.what());
    }
    if (count_slurm) (void)std::system(("rm -f '" + dir + "/calls'").c_str());  // count the trials only
    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> ids, workdirs;
    std::vector<double> values;
    for (int i = 0; i < kTrials; ++i) {
      ids.push_back("bench/" + std::to_string(i));
      workdirs.push_back(dir + "/trials/" + std::to_string(i));
      values.push_back(i);
    }
    std::vector<std::unique_ptr<cotune::core::Executor::Job>> jobs;
    for (int i = 0; i < kTrials; ++i) {
      cotune_trial t = cotune::core::empty_trial();
      t.trial_id = cotune::str(ids[i]);
      t.workdir = cotune::str(workdirs[i]);
      t.config_json = cotune::str("{}");
      t.params = params.data();
      t.num_params = params.size();
      t.config = &values[i];
      jobs.push_back(ex->submit(t));
    }
    int ok = 0;
    for (auto& job : jobs) {
      cotune::core::TrialResult r;
      while (!r.finished()) r = job->poll(1000);
      ok += r.status == COTUNE_STATUS_OK;
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = cpu_seconds() - cpu0;
    state.SetIterationTime(wall);
    state.counters["wall_s"] = wall;
    state.counters["cotune_cpu_s"] = cpu;
    state.counters["ok"] = ok;
    if (count_slurm) {
      auto calls = count_calls(dir);
      state.counters["squeue_per_trial"] = double(calls["squeue"]) / kTrials;
      state.counters["sacct_per_trial"] = double(calls["sacct"]) / kTrials;
      state.counters["sbatch_per_trial"] = double(calls["sbatch"]) / kTrials;
    }
    jobs.clear();
    ex.reset();
    (void)std::system(("rm -rf '" + dir + "'").c_str());
  }
}

nlohmann::json trivial_job() {
  return {{"command", {"/bin/sh", "-c", "echo '{{\"step\": '$COTUNE_PARAM_STEP'}}' > \"$COTUNE_RESULT_FILE\""}}};
}

void BM_Process100(benchmark::State& state) {
  nlohmann::json o = trivial_job();
  o["parallel"] = 2;  // the machine's cores, as the Slurm node has
  run_trials(state, "process", o, false);
}

void slurm(benchmark::State& state, bool array) {
  if (std::getenv("SLURM_CONF") == nullptr && std::ifstream("/tmp/cotune-slurm/slurm.conf").good())
    ::setenv("SLURM_CONF", "/tmp/cotune-slurm/slurm.conf", 1);
  if (std::system("command -v sbatch >/dev/null 2>&1") != 0)
    return state.SkipWithError("Slurm is not installed");
  nlohmann::json o = trivial_job();
  o["parallel"] = kTrials;
  o["array"] = array;
  o["partition"] = "debug";
  run_trials(state, "slurm", o, true);
}
void BM_Slurm100_Array(benchmark::State& state) { slurm(state, true); }
void BM_Slurm100_OneJobEach(benchmark::State& state) { slurm(state, false); }

BENCHMARK(BM_Process100)->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_Slurm100_Array)->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_Slurm100_OneJobEach)->Iterations(1)->UseManualTime()->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
