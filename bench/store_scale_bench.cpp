// A real study with a million finished trials: how long `cotune show` takes on it, how long
// `cotune run` takes to resume it up to its first new proposal, and how long a predictor refit on
// its history takes (krr with the analytic prior, through the host's Surrogate).
//
//   build/bin/store_scale_bench [TRIALS]        (default 1000000; `cotune` is looked up next to it)
//
// The study is created by `cotune run` itself (stopped with SIGINT after its first trial), then
// filled with distinct configurations sampled from its own space (a co-design space over GPU counts
// and types, large enough for a million), bulk-loaded in one transaction.
#include <cotune/core/canonical_json.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store.hpp>
#include <cotune/core/study_file.hpp>
#include <cotune/core/study_setup.hpp>
#include <cotune/core/surrogate.hpp>

#include <nlohmann/json.hpp>
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
#include <thread>
#include <unordered_set>
#include <vector>

#include "store/sqlite.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace cotune::core;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string g_cotune, g_dir;

pid_t spawn(const std::vector<std::string>& args, const std::string& out) {
  std::fflush(stdout);  // or the child would print this process's buffered lines again
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(out.c_str(), "w", stdout) || !freopen((out + ".err").c_str(), "w", stderr)) _exit(127);
    std::vector<char*> argv{g_cotune.data()};
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(g_cotune.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for the child; returns its exit status and its CPU seconds (user + system).
std::pair<int, double> reap(pid_t pid) {
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), cpu};
}

std::int64_t max_seq(const std::string& store, std::int64_t study) {
  sqlite::Database db(store, SQLITE_OPEN_READONLY);
  sqlite3_busy_timeout(db.handle(), 60000);  // cotune run may be writing
  auto q = db.prepare("SELECT COALESCE(MAX(seq), 0) FROM trials WHERE study_id = ?1");
  q->bind(1, study);
  q->step();
  return q->int64(0);
}

void timed_show(const std::vector<std::string>& args, const char* label) {
  auto start = Clock::now();
  auto [code, cpu] = reap(spawn(args, g_dir + "/show.out"));
  double wall = seconds_since(start);
  std::printf("%-44s wall %7.2f s  CPU %7.2f s  (exit %d, %.1f MB of output)\n", label, wall, cpu, code,
              static_cast<double>(fs::file_size(g_dir + "/show.out")) / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t trials = argc > 1 ? std::atoll(argv[1]) : 1000000;
  g_cotune = (fs::canonical("/proc/self/exe").parent_path() / "cotune").string();
  std::string tmpl = (fs::temp_directory_path() / "cotune-scale-bench-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return 1;
  g_dir = tmpl;
  const std::string store = g_dir + "/cotune.db", study_file = g_dir + "/scale.json";
  nlohmann::json doc = nlohmann::json::parse(R"({
    "name": "scale",
    "workload": {"model": {"preset": "llama3-70b"}, "training": {"global_batch": 1024},
                 "cluster": {"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8}},
    "space": {"name": "llm", "options": {
      "gpus": [32, 64, 96, 128, 160, 192, 256, 320, 384, 448, 512, 640, 768, 896, 1024],
      "gpu": ["h100-sxm", "h200", "b200", "a100-80gb", "a100-40gb", "mi300x"]}},
    "predictor": {"name": "krr", "prior": "analytic"}, "searcher": "random",
    "executor": {"name": "sim", "options": {"noise": 0.05}},
    "objective": {"metric": "tokens_per_s", "direction": "maximize"}, "parallel": 1, "seed": 1})");
  doc["budget"] = {{"trials", trials + 3}};
  std::ofstream(study_file) << doc.dump(2);

  // 1. The study, created by cotune itself.
  pid_t first = spawn({"run", study_file, "--store", store, "-q"}, g_dir + "/first.out");
  std::int64_t study_id = 0;
  for (;;) {
    if (fs::exists(store)) {
      Store s(store);
      if (auto st = s.find_study("scale")) {
        study_id = st->id;
        if (max_seq(store, study_id) >= 1) break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(first, SIGINT);
  reap(first);

  // 2. Distinct configurations from the study's own space, bulk-loaded.
  StudySpec spec = load_study_file(study_file);
  Registry registry;
  load_study_plugins(registry, spec);
  std::unique_ptr<Space> space = make_study_space(registry, spec);
  const size_t p = space->num_params();
  std::vector<double> configs;  // kept for the refit
  std::vector<double> values;
  auto load_start = Clock::now();
  {
    sqlite::Database db(store, SQLITE_OPEN_READWRITE);
    std::unordered_set<std::string> seen;
    for (const TrialRecord& t : Store(store).trials(study_id)) seen.insert(space->key(space->parse(t.config_json).data()));
    std::int64_t seq = max_seq(store, study_id);
    db.exec("PRAGMA synchronous = NORMAL; BEGIN IMMEDIATE");
    auto insert = db.prepare(
        "INSERT INTO trials (study_id, seq, config_key, config_json, status, metrics_json, objective, "
        "executor, attempts, created_at, started_at, finished_at) "
        "VALUES (?1, ?2, ?3, ?4, 'ok', ?5, ?6, 'sim', 1, ?7, ?7, ?8)");
    std::vector<double> batch(4096 * p);
    uint64_t round = 0;
    size_t dry_rounds = 0;
    while (seq < trials && dry_rounds < 200) {
      size_t got = space->sample(1000 + round++, 4096, batch.data());
      size_t fresh = 0;
      for (size_t i = 0; i < got && seq < trials; ++i) {
        const double* c = batch.data() + i * p;
        if (!seen.insert(space->key(c)).second) continue;
        ++fresh;
        ++seq;
        const std::string config_json = space->render(c, COTUNE_RENDER_JSON);
        const double tokens = 1e5 * (1.0 + static_cast<double>(seq % 977) / 977.0);
        insert->bind(1, study_id);
        insert->bind(2, seq);
        insert->bind(3, config_key(nlohmann::json::parse(config_json)));
        insert->bind(4, config_json);
        insert->bind(5, nlohmann::json{{"tokens_per_s", tokens}}.dump());
        insert->bind(6, tokens);
        insert->bind(7, 1.7e9 + static_cast<double>(seq));
        insert->bind(8, 1.7e9 + static_cast<double>(seq) + 0.5);
        insert->step();
        insert->reset();
        configs.insert(configs.end(), c, c + p);
        values.push_back(tokens);
      }
      dry_rounds = fresh == 0 ? dry_rounds + 1 : 0;
    }
    db.exec("COMMIT");
    std::printf("study 'scale': %lld finished trials (bulk load %.1f s), store %.0f MB\n",
                static_cast<long long>(seq), seconds_since(load_start), static_cast<double>(fs::file_size(store)) / 1e6);
  }
  const std::int64_t loaded = max_seq(store, study_id);

  // 3. Readers.
  timed_show({"show", "--store", store}, "cotune show (list of studies)");
  timed_show({"show", "scale", "--store", store}, "cotune show scale (one study)");

  // 4. Resume up to the first new proposal (its trial record), then stop it.
  auto start = Clock::now();
  pid_t resume = spawn({"run", study_file, "--store", store}, g_dir + "/resume.out");
  bool proposed = true;
  while (max_seq(store, study_id) <= loaded) {
    if (waitpid(resume, nullptr, WNOHANG) == resume) {
      // Every configuration the searcher can reach is measured: the run ended after its refit and
      // its proposal rounds, which bounds the time to a first proposal from above.
      proposed = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  double resume_wall = seconds_since(start);
  if (proposed) {
    kill(resume, SIGKILL);
    auto [code, cpu] = reap(resume);
    std::printf("%-44s wall %7.2f s  (CPU until killed %.2f s)\n", "cotune run: resume to the first new proposal",
                resume_wall, cpu);
  } else {
    std::printf("%-44s wall %7.2f s  (nothing left to propose: refit, proposal rounds, summary, report)\n",
                "cotune run: resume to its end", resume_wall);
  }

  // 5. A predictor refit on the whole history.
  std::unique_ptr<Predictor> predictor = registry.make_predictor("krr", surrogate_predictor_options("", "/predictor/options"));
  Surrogate surrogate(*space, *predictor, "tokens_per_s", true, configs.data());
  auto fit_start = Clock::now();
  surrogate.fit(configs.data(), values.size(), values.data());
  std::printf("%-44s wall %7.2f s  (%zu rows given, %zu fitted)\n", "refit krr + analytic prior on the history",
              seconds_since(fit_start), values.size(), surrogate.fitted_rows());
  fs::remove_all(g_dir);
  return 0;
}
