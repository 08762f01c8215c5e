// Finished trials per second of one study run by 1, 2 and 4 `cotune run --worker` processes on a
// PostgreSQL store, and by one on an SQLite file, with the sim executor (a trial costs the study
// loop and the store, not a job).
//
//   build/bin/store_workers_bench POSTGRES_URL [TRIALS]
//
// TRIALS defaults to 400. Each measurement is a new study (a fresh name, a workload of its own: no
// row learns from another's trials as history) in the given database; the SQLite file goes into a
// temporary directory. `cotune` is looked up next to this program. The
// time is from starting the workers to the last one's exit; the CPU is the workers' user + system.
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spawn_cotune.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string g_cotune, g_dir;

const char* const kStudy = R"({
  "workload": {"model": {"preset": "llama3-70b"}, "training": {"global_batch": 1024},
               "cluster": {"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8}},
  "searcher": "random", "executor": {"name": "sim", "options": {"noise": 0.05}},
  "objective": {"metric": "tokens_per_s", "direction": "maximize"}, "parallel": 4, "seed": 1})";

pid_t spawn(const std::vector<std::string>& args, const std::string& out) {
  return cotune_bench::spawn_cotune(g_cotune, args, out, g_dir);
}

// Runs `workers` workers on a new study of `trials` in `store`; prints one row.
bool measure(const std::string& label, const std::string& store, int workers, long trials, int round) {
  nlohmann::json doc = nlohmann::json::parse(kStudy);
  const std::string name = "bench-" + std::to_string(round) + "-" + std::to_string(::getpid());
  doc["name"] = name;
  doc["budget"] = {{"trials", trials}};
  // A workload of its own (the price is part of the workload, not of its speed): the trials of an
  // earlier row would otherwise be this study's history and seed its predictor, so that each row
  // refits on more rows than the one before.
  doc["workload"]["cluster"]["price_per_gpu_hour"] = 2.0 + 0.01 * round + 1e-5 * (::getpid() % 1000);
  const std::string file = g_dir + "/" + name + ".json";
  std::ofstream(file) << doc.dump(2);
  const auto start = Clock::now();
  std::vector<pid_t> pids;
  for (int i = 0; i < workers; ++i)
    pids.push_back(spawn({"run", file, "--store", store, "--worker", "--quiet"}, g_dir + "/" + name + "." + std::to_string(i)));
  double cpu = 0;
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    rusage ru{};
    wait4(pid, &status, 0, &ru);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    cpu += ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  if (!ok) {
    std::fprintf(stderr, "%s: a worker failed; see %s/%s.*.err\n", label.c_str(), g_dir.c_str(), name.c_str());
    return false;
  }
  std::printf("| %s | %d | %ld | %.2f s | %.2f s | %.1f |\n", label.c_str(), workers, trials, wall, cpu,
              static_cast<double>(trials) / wall);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: store_workers_bench POSTGRES_URL [TRIALS]\n");
    return 2;
  }
  const std::string url = argv[1];
  const long trials = argc > 2 ? std::atol(argv[2]) : 400;
  g_cotune = (fs::canonical("/proc/self/exe").parent_path() / "cotune").string();
  std::string tmpl = (fs::temp_directory_path() / "cotune-workers-bench-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return 1;
  g_dir = tmpl;
  std::printf("| store | workers | trials | wall | CPU (all workers) | finished trials/s |\n| --- | --- | --- | --- | --- | --- |\n");
  bool ok = measure("SQLite", g_dir + "/cotune.db", 1, trials, 0);
  int round = 1;
  for (int workers : {1, 2, 4}) ok = measure("PostgreSQL", url, workers, trials, round++) && ok;
  if (ok) fs::remove_all(g_dir);
  return ok ? 0 : 1;
}
