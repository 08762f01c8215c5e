// A real study with a million finished trials: how long `cotune show` takes on it, how long
// `cotune run` takes to resume it (to its first new proposal and to its end), and how long a
// predictor refit on its history takes (krr with the analytic prior, through the host's Surrogate).
//
//   build/bin/store_scale_bench [TRIALS] [--study FILE] [--count] [--keep] [--postgres URL]
//
// TRIALS defaults to 1000000; `cotune` is looked up next to this program. --study replaces the
// built-in study (an llm space; its budget is set to TRIALS + 3); --count only prints how many valid
// configurations the study's space has; --keep leaves the store and study file in place. --postgres
// also copies the study into that (empty) PostgreSQL database with `cotune store copy` and times the
// same `cotune show` commands there (the server's own CPU is not in the CPU column).
//
// The study is created by `cotune run` itself (stopped with SIGINT after its first trial), then
// filled with distinct valid configurations of its own space -- every one is enumerated, and a
// seeded shuffle picks TRIALS of them -- bulk-loaded in one transaction with synthetic tokens/s.
#include <cotune/core/studyfile/canonical_json.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/studyfile/study_file.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/core/model/surrogate.hpp>

#include <nlohmann/json.hpp>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "store/sqlite.hpp"

#include "spawn_cotune.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace cotune::core;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string g_cotune, g_dir;

// The built-in study: Mixtral 8x7B co-designed over 7 GPU counts (8 to 512, the 64-node cluster)
// and 6 GPU types, expert parallelism included: 2,079,760 valid configurations. (A Llama-3 70B
// co-design with a global batch of 1,024 has only 471,916 over these GPU types: its layouts need
// GPU counts of the form 2^a or 5 * 2^a.)
const char* const kStudy = R"({
  "name": "scale",
  "workload": {"model": {"preset": "mixtral-8x7b"}, "training": {"global_batch": 512},
               "cluster": {"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8}},
  "space": {"name": "llm", "options": {
    "gpus": [8, 16, 32, 64, 128, 256, 512],
    "gpu": ["h100-sxm", "h200", "b200", "a100-80gb", "a100-40gb", "mi300x"]}},
  "predictor": {"name": "krr", "prior": "analytic"}, "searcher": "random",
  "executor": {"name": "sim", "options": {"noise": 0.05}},
  "objective": {"metric": "tokens_per_s", "direction": "maximize"}, "parallel": 1, "seed": 1})";

pid_t spawn(const std::vector<std::string>& args, const std::string& out) {
  return cotune_bench::spawn_cotune(g_cotune, args, out);
}

struct Reaped {
  int code = 0;
  double cpu = 0;      // user + system seconds
  double rss_mb = 0;   // peak resident set
};

Reaped reap(pid_t pid) {
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  Reaped r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
  r.rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  return r;
}

// CPU seconds (user + system) a running child has used so far, from /proc/PID/stat.
double cpu_so_far(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  std::istringstream rest(line.substr(line.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::int64_t max_seq(const std::string& store, std::int64_t study) {
  sqlite::Database db(store, SQLITE_OPEN_READONLY);
  sqlite3_busy_timeout(db.handle(), 60000);  // cotune run may be writing
  auto q = db.prepare("SELECT COALESCE(MAX(seq), 0) FROM trials WHERE study_id = ?1");
  q->bind(1, study);
  q->step();
  return q->int64(0);
}

void timed_show(const std::vector<std::string>& args, const std::string& label) {
  auto start = Clock::now();
  Reaped r = reap(spawn(args, g_dir + "/show.out"));
  double wall = seconds_since(start);
  std::printf("%-48s wall %7.2f s  CPU %7.2f s  peak RSS %6.0f MB  (exit %d, %.1f MB of output)\n", label.c_str(),
              wall, r.cpu, r.rss_mb, r.code, static_cast<double>(fs::file_size(g_dir + "/show.out")) / 1e6);
}

// Every valid configuration of an llm space, in a seeded random order. The layouts are enumerated
// with tp*pp*dp*cp == gpus (the space's first constraint, which prunes the product of the domains
// by orders of magnitude); the space itself checks every candidate.
std::vector<double> all_valid_configs(const Space& space, uint64_t seed) {
  const size_t p = space.num_params();
  auto index = [&](const char* name) {
    for (size_t i = 0; i < p; ++i)
      if (space.params()[i].name == name) return i;
    throw std::runtime_error(std::string("the space has no parameter ") + name + " (an llm space is expected)");
  };
  const size_t tp = index("tp"), pp = index("pp"), dp = index("dp"), cp = index("cp"), gpus = index("gpus");
  std::vector<std::vector<double>> domain(p);
  for (size_t i = 0; i < p; ++i) domain[i] = space.params()[i].domain();
  std::vector<size_t> rest;  // the parameters outside the layout, enumerated in full
  for (size_t i = 0; i < p; ++i)
    if (i != tp && i != pp && i != dp && i != cp && i != gpus) rest.push_back(i);

  std::vector<double> valid, batch;
  std::vector<int32_t> ok;
  auto flush = [&] {
    const size_t n = batch.size() / p;
    ok.assign(n, 0);
    space.check(batch.data(), n, ok.data());
    for (size_t i = 0; i < n; ++i)
      if (ok[i]) valid.insert(valid.end(), batch.begin() + i * p, batch.begin() + (i + 1) * p);
    batch.clear();
  };
  std::vector<double> c(p);
  std::vector<size_t> at(rest.size());
  for (double g : domain[gpus])
    for (double t : domain[tp])
      for (double q : domain[pp])
        for (double k : domain[cp]) {
          const double d = g / (t * q * k);
          if (d != std::floor(d) || std::find(domain[dp].begin(), domain[dp].end(), d) == domain[dp].end()) continue;
          c[gpus] = g, c[tp] = t, c[pp] = q, c[cp] = k, c[dp] = d;
          std::fill(at.begin(), at.end(), 0);
          for (;;) {  // odometer over the other parameters
            for (size_t r = 0; r < rest.size(); ++r) c[rest[r]] = domain[rest[r]][at[r]];
            batch.insert(batch.end(), c.begin(), c.end());
            if (batch.size() >= 65536 * p) flush();
            size_t r = 0;
            while (r < rest.size() && ++at[r] == domain[rest[r]].size()) at[r++] = 0;
            if (r == rest.size()) break;
          }
        }
  flush();
  // Fisher-Yates over rows, so that any prefix is a uniform sample of the space.
  std::mt19937_64 rng(seed);
  const size_t n = valid.size() / p;
  for (size_t i = n; i > 1; --i) {
    const size_t j = std::uniform_int_distribution<size_t>(0, i - 1)(rng);
    std::swap_ranges(valid.begin() + (i - 1) * p, valid.begin() + i * p, valid.begin() + j * p);
  }
  return valid;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t trials = 1000000;
  std::string given_study;
  bool count_only = false, keep = false;
  std::string postgres;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--count") count_only = true;
    else if (a == "--keep") keep = true;
    else if (a == "--study" && i + 1 < argc) given_study = argv[++i];
    else if (a == "--postgres" && i + 1 < argc) postgres = argv[++i];
    else if (!a.empty() && a[0] != '-') trials = std::atoll(a.c_str());
    else {
      std::fprintf(stderr, "usage: store_scale_bench [TRIALS] [--study FILE] [--count] [--keep] [--postgres URL]\n");
      return 2;
    }
  }
  g_cotune = (fs::canonical("/proc/self/exe").parent_path() / "cotune").string();
  std::string tmpl = (fs::temp_directory_path() / "cotune-scale-bench-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return 1;
  g_dir = tmpl;
  const std::string store = g_dir + "/cotune.db", study_file = g_dir + "/study.json";
  nlohmann::json doc = given_study.empty() ? nlohmann::json::parse(kStudy)
                                           : nlohmann::json::parse(std::ifstream(given_study));
  doc["budget"] = {{"trials", trials + 3}};
  std::ofstream(study_file) << doc.dump(2);

  StudySpec spec = load_study_file(study_file);
  Registry registry;
  load_study_plugins(registry, spec);
  std::unique_ptr<Space> space = make_study_space(registry, spec);
  const size_t p = space->num_params();
  auto enum_start = Clock::now();
  std::vector<double> all = all_valid_configs(*space, 7);
  const size_t space_size = all.size() / p;
  std::printf("study '%s': %zu valid configurations in its space (enumerated in %.1f s)\n", spec.name.c_str(),
              space_size, seconds_since(enum_start));
  if (count_only || static_cast<std::int64_t>(space_size) < trials + 3) {
    if (!count_only) std::printf("the space is smaller than %lld trials + 3 new ones; stopping\n", static_cast<long long>(trials));
    fs::remove_all(g_dir);
    return count_only ? 0 : 1;
  }

  // 1. The study, created by cotune itself.
  pid_t first = spawn({"run", study_file, "--store", store, "-q"}, g_dir + "/first.out");
  std::int64_t study_id = 0;
  for (;;) {
    if (fs::exists(store)) {
      Store s(store);
      if (auto st = s.find_study(spec.name)) {
        study_id = st->id;
        if (max_seq(store, study_id) >= 1) break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(first, SIGINT);
  reap(first);

  // 2. Distinct valid configurations from the study's own space (a shuffled enumeration, minus what
  //    cotune already measured), bulk-loaded with synthetic values.
  std::vector<double> configs;  // kept for the refit
  std::vector<double> values;
  auto load_start = Clock::now();
  std::int64_t seq = 0;
  {
    sqlite::Database db(store, SQLITE_OPEN_READWRITE);
    std::unordered_set<std::string> seen;
    for (const TrialRecord& t : Store(store).trials(study_id)) seen.insert(t.config_key);
    seq = max_seq(store, study_id);
    db.exec("PRAGMA synchronous = NORMAL; BEGIN IMMEDIATE");
    auto insert = db.prepare(
        "INSERT INTO trials (study_id, seq, config_key, config_json, status, metrics_json, objective, "
        "executor, attempts, created_at, started_at, finished_at) "
        "VALUES (?1, ?2, ?3, ?4, 'ok', ?5, ?6, 'sim', 1, ?7, ?7, ?8)");
    configs.reserve(static_cast<size_t>(trials) * p);
    values.reserve(static_cast<size_t>(trials));
    for (size_t i = 0; i < space_size && seq < trials; ++i) {
      const double* c = all.data() + i * p;
      const std::string config_json = space->render(c, COTUNE_RENDER_JSON);
      std::string key = config_key(nlohmann::json::parse(config_json));
      if (!seen.insert(key).second) continue;
      ++seq;
      // Synthetic but deterministic and varied: a value per trial, not a model of the configuration.
      const double tokens = 1e5 * (1.0 + static_cast<double>(seq % 977) / 977.0);
      insert->bind(1, study_id);
      insert->bind(2, seq);
      insert->bind(3, key);
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
    db.exec("COMMIT");
  }
  std::vector<double>().swap(all);
  std::printf("study '%s': %lld finished trials (bulk load %.1f s), store %.0f MB\n", spec.name.c_str(),
              static_cast<long long>(seq), seconds_since(load_start), static_cast<double>(fs::file_size(store)) / 1e6);
  const std::int64_t loaded = max_seq(store, study_id);

  // 3. Readers.
  timed_show({"show", "--store", store}, "cotune show (list of studies)");
  timed_show({"show", spec.name, "--store", store, "--limit", "20"}, "cotune show STUDY --limit 20");
  timed_show({"show", spec.name, "--store", store, "--limit", "0"}, "cotune show STUDY --limit 0 (every trial)");
  if (!postgres.empty()) {
    timed_show({"store", "copy", store, postgres}, "cotune store copy (SQLite -> PostgreSQL)");
    timed_show({"show", "--store", postgres}, "PostgreSQL: cotune show (list of studies)");
    timed_show({"show", spec.name, "--store", postgres, "--limit", "20"}, "PostgreSQL: cotune show STUDY --limit 20");
    timed_show({"show", spec.name, "--store", postgres, "--limit", "0"},
               "PostgreSQL: cotune show STUDY --limit 0 (every trial)");
  }

  // 4. Resume: the time to its first new proposal (a new trial record), then to its end (3 new trials).
  auto start = Clock::now();
  pid_t resume = spawn({"run", study_file, "--store", store}, g_dir + "/resume.out");
  bool ended = false;
  while (max_seq(store, study_id) <= loaded) {
    if (waitpid(resume, nullptr, WNOHANG | WNOWAIT) == resume) {
      ended = true;  // ended without proposing anything
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double first_wall = seconds_since(start);
  const double first_cpu = ended ? 0 : cpu_so_far(resume);
  Reaped r = reap(resume);
  const double end_wall = seconds_since(start);
  if (!ended)
    std::printf("%-48s wall %7.2f s  CPU %7.2f s\n", "cotune run: resume to its first new proposal", first_wall, first_cpu);
  else std::printf("cotune run proposed nothing new\n");
  std::printf("%-48s wall %7.2f s  CPU %7.2f s  peak RSS %6.0f MB  (exit %d, %lld trials now)\n",
              "cotune run: resume to its end", end_wall, r.cpu, r.rss_mb, r.code,
              static_cast<long long>(max_seq(store, study_id)));

  // 5. A predictor refit on the whole history.
  std::unique_ptr<Predictor> predictor = registry.make_predictor("krr", surrogate_predictor_options("", "/predictor/options"));
  Surrogate surrogate(*space, *predictor, "tokens_per_s", Prior::kAnalytic, configs.data());
  auto fit_start = Clock::now();
  std::clock_t fit_cpu = std::clock();
  surrogate.fit(configs.data(), values.size(), values.data());
  std::printf("%-48s wall %7.2f s  CPU %7.2f s  (%zu rows given, %zu fitted)\n", "refit krr + analytic prior on the history",
              seconds_since(fit_start), static_cast<double>(std::clock() - fit_cpu) / CLOCKS_PER_SEC, values.size(),
              surrogate.fitted_rows());
  if (keep) std::printf("kept: %s (store cotune.db, study study.json)\n", g_dir.c_str());
  else fs::remove_all(g_dir);
  return 0;
}
