// The store under faults, through the real `cotune` binary: two studies written at full speed by
// two processes while readers (`cotune show`, `cotune serve`) run, on an SQLite file and on a
// PostgreSQL database; the disk full (a file size limit) and a store file its user cannot write.
// Each must end in a clear error or in success, never in a lost or damaged trial.
#include <cotune/core/store/store.hpp>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "store/sqlite.hpp"
#include "support/cli_process.hpp"
#include "support/postgres_cluster.hpp"

namespace cotune::core {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::count_finished;
using testing::read_file;
using testing::ScratchDir;
using testing::stored_trials;

std::string write_study(const ScratchDir& dir, const std::string& name, int trials) {
  json doc = {{"name", name},
              {"workload", json::parse(R"({"model": {"preset": "llama3-70b"}, "training": {"global_batch": 1024},
                                           "cluster": {"gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8}})")},
              {"searcher", "random"},
              {"executor", {{"name", "sim"}, {"options", {{"noise", 0.05}}}}},
              {"objective", {{"metric", "tokens_per_s"}, {"direction", "maximize"}}},
              {"budget", {{"trials", trials}}},
              {"parallel", 2},
              {"seed", 5}};
  std::string path = dir.file(name + ".json");
  std::ofstream(path) << doc.dump(2);
  return path;
}

// GET `target` from 127.0.0.1:port; returns the status line ("" when the connection failed).
std::string http_status_line(int port, const std::string& target) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    std::string request = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    if (::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return reply.substr(0, reply.find("\r\n"));
}

class StoreFaults : public ::testing::Test {
 protected:
  pid_t spawn(const std::vector<std::string>& args, const std::string& tag,
              const std::function<int()>& setup = {}) {
    return testing::spawn_cotune(dir_.path(), args, dir_.file(tag + ".out"), dir_.file(tag + ".err"), setup);
  }
  int run(const std::vector<std::string>& args, const std::string& tag, const std::function<int()>& setup = {}) {
    return testing::wait_exit(spawn(args, tag, setup));
  }
  std::string err(const std::string& tag) const { return read_file(dir_.file(tag + ".err")); }

  // Runs the study until `n` trials have finished, then stops it with SIGINT (a clean stop).
  void run_partly(const std::string& study, const std::string& name, size_t n) {
    pid_t pid = spawn({"run", study, "--store", store_}, "first");
    while (count_finished(stored_trials(store_, name)) < n) {
      ASSERT_NE(waitpid(pid, nullptr, WNOHANG), pid) << "the study ended early:\n" << err("first");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::kill(pid, SIGINT);
    ASSERT_EQ(testing::wait_exit(pid), 130) << err("first");
  }

  // The store opens, passes SQLite's integrity check, and still holds `before` unchanged.
  void expect_intact(const std::string& name, const std::vector<TrialRecord>& before) {
    {
      sqlite::Database db(store_, SQLITE_OPEN_READONLY);
      EXPECT_EQ(db.query_text("PRAGMA integrity_check"), "ok");
    }
    std::vector<TrialRecord> after = stored_trials(store_, name);
    std::map<std::int64_t, const TrialRecord*> by_seq;
    for (const TrialRecord& t : after) by_seq[t.seq] = &t;
    for (const TrialRecord& t : before) {
      if (!is_finished(t.status)) continue;
      ASSERT_TRUE(by_seq.count(t.seq)) << "trial " << t.seq << " lost";
      EXPECT_EQ(by_seq[t.seq]->config_key, t.config_key);
      EXPECT_EQ(by_seq[t.seq]->finished_at, t.finished_at);
      EXPECT_EQ(by_seq[t.seq]->metrics_json, t.metrics_json);
    }
  }

  ScratchDir dir_{"faults"};
  std::string store_ = dir_.file("cotune.db");
};

// Writers and readers on each backend, named by the parameter.
class StoreFaultsOnBackends : public StoreFaults, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgresql") {
      COTUNE_POSTGRES_DATABASE(store_);
    }
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, StoreFaultsOnBackends, ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST_P(StoreFaultsOnBackends, TwoWritersAndReadersLoseNothingAndNeverSeeALock) {
  const int budget = 100;
  std::string a = write_study(dir_, "writer-a", budget), b = write_study(dir_, "writer-b", budget);
  pid_t wa = spawn({"run", a, "--store", store_}, "a");
  pid_t wb = spawn({"run", b, "--store", store_}, "b");
  // Readers start once both studies are recorded (a reader asking for a study before that is told
  // it does not exist, rightly).
  auto both_recorded = [&] {
    if (!is_postgres_url(store_) && !fs::exists(store_)) return false;
    Store store(store_);
    return store.find_study("writer-a").has_value() && store.find_study("writer-b").has_value();
  };
  while (!both_recorded()) {
    ASSERT_NE(waitpid(wa, nullptr, WNOHANG), wa) << err("a");
    ASSERT_NE(waitpid(wb, nullptr, WNOHANG), wb) << err("b");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  pid_t server = spawn({"serve", "--store", store_, "--listen", "127.0.0.1:0"}, "serve");
  int port = 0;
  for (int i = 0; i < 2000 && port == 0; ++i) {
    std::string line = read_file(dir_.file("serve.out"));
    size_t at = line.find("http://127.0.0.1:");
    if (at != std::string::npos && line.find('/', at + 17) != std::string::npos) port = std::stoi(line.substr(at + 17));
    else std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_NE(port, 0) << err("serve");

  int code_a = -1, code_b = -1, reads = 0;
  while (code_a < 0 || code_b < 0) {
    int status;
    if (code_a < 0 && waitpid(wa, &status, WNOHANG) == wa) code_a = testing::exit_code(status);
    if (code_b < 0 && waitpid(wb, &status, WNOHANG) == wb) code_b = testing::exit_code(status);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"show", "--store", store_}, {"show", "writer-a", "--store", store_}}) {
      EXPECT_EQ(run(args, "show"), 0) << err("show");
      EXPECT_EQ(err("show").find("locked"), std::string::npos) << err("show");
      ++reads;
    }
    EXPECT_EQ(http_status_line(port, "/"), "HTTP/1.1 200 OK");
    EXPECT_EQ(http_status_line(port, "/studies/writer-b"), "HTTP/1.1 200 OK");
    reads += 2;
  }
  ::kill(server, SIGTERM);
  EXPECT_EQ(testing::wait_exit(server), 0) << err("serve");
  EXPECT_EQ(err("serve").find("locked"), std::string::npos) << err("serve");
  for (const char* tag : {"a", "b"}) EXPECT_EQ(err(tag).find("locked"), std::string::npos) << err(tag);
  // A database store is named everywhere with its password redacted.
  for (const char* file : {"serve.out", "serve.err", "show.out", "show.err", "a.out", "a.err", "b.out", "b.err"})
    EXPECT_EQ(read_file(dir_.file(file)).find(testing::PostgresCluster::kPassword), std::string::npos) << file;
  EXPECT_EQ(code_a, 0) << err("a");
  EXPECT_EQ(code_b, 0) << err("b");
  for (const char* name : {"writer-a", "writer-b"}) {
    std::vector<TrialRecord> ts = stored_trials(store_, name);
    EXPECT_EQ(count_finished(ts), static_cast<size_t>(budget)) << name;
    std::set<std::string> keys;
    for (const TrialRecord& t : ts) EXPECT_TRUE(keys.insert(t.config_key).second) << name << " trial " << t.seq;
  }
  std::printf("[ store-faults ] 2 writers x %d trials, %d reads meanwhile\n", budget, reads);
}

TEST_F(StoreFaults, DiskFullStopsWithAClearErrorAndDamagesNothing) {
  const std::string name = "full";
  std::string study = write_study(dir_, name, 200);
  run_partly(study, name, 10);
  std::vector<TrialRecord> before = stored_trials(store_, name);

  // A file size limit a little above the store's size: the WAL (or the store) soon cannot grow,
  // and the write fails with EFBIG as on a full disk (SIGXFSZ ignored, so the write returns the error).
  const rlim_t limit = static_cast<rlim_t>(fs::file_size(store_)) + 64 * 1024;
  auto limited = [limit] {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit r{limit, limit};
    return ::setrlimit(RLIMIT_FSIZE, &r);
  };
  int code = run({"run", study, "--store", store_}, "full", limited);
  EXPECT_EQ(code, 1) << "a clean error exit, not a signal:\n" << err("full");
  EXPECT_NE(err("full").find("store " + store_), std::string::npos) << err("full");
  EXPECT_NE(err("full").find("File too large"), std::string::npos) << err("full");
  EXPECT_LT(count_finished(stored_trials(store_, name)), 200u) << "the limit never bit";
  expect_intact(name, before);

  ASSERT_EQ(run({"run", study, "--store", store_}, "resume"), 0) << err("resume");
  EXPECT_EQ(count_finished(stored_trials(store_, name)), 200u);
  expect_intact(name, before);
}

TEST_F(StoreFaults, ReadOnlyStoreStopsWithAClearErrorAndDamagesNothing) {
  const passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user 'nobody' to run as";
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the command as another user";
  const std::string name = "readonly";
  std::string study = write_study(dir_, name, 200);
  run_partly(study, name, 5);
  std::vector<TrialRecord> before = stored_trials(store_, name);
  // The directory and the study file readable by all, the store writable by its owner (root) only.
  fs::permissions(dir_.path(), fs::perms(0755));
  fs::permissions(study, fs::perms(0644));
  fs::permissions(store_, fs::perms(0644));

  const uid_t uid = nobody->pw_uid;
  const gid_t gid = nobody->pw_gid;
  auto as_nobody = [uid, gid] { return ::setgid(gid) != 0 || ::setuid(uid) != 0 ? 1 : 0; };
  int code = run({"run", study, "--store", store_}, "ro", as_nobody);
  EXPECT_EQ(code, 1) << err("ro");
  EXPECT_NE(err("ro").find("store " + store_), std::string::npos) << err("ro");
  EXPECT_NE(err("ro").find("read"), std::string::npos) << "the cause (read-only):\n" << err("ro");
  expect_intact(name, before);
  EXPECT_EQ(stored_trials(store_, name).size(), before.size()) << "nothing written";
}

}  // namespace
}  // namespace cotune::core
