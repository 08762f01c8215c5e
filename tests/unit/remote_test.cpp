// The remote executor plugin (libcotune-executor-remote.so, loaded through the Registry) against
// real agents on 127.0.0.1: a study's worth of trials over two agents, secrets, TLS with
// certificates made here, failover, an agent killed mid-trial and restarted, and SIGTERM.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include <cotune/core/abi/components.hpp>
#include <cotune/core/abi/log.hpp>
#include <cotune/core/registry.hpp>

#include "support/agent_harness.hpp"

#include <map>
#include <set>

namespace {
using namespace cotune::testing;
using cotune::core::Executor;
using cotune::core::Registry;
using cotune::core::TrialResult;
using nlohmann::json;

// A trial of the testgrid space for the remote executor: its parameters come from a real space.
struct GridTrial {
  std::string id;
  std::vector<double> config;
  cotune_trial trial = cotune::core::empty_trial();
  std::string workload = "{}";
  void bind(const cotune::core::Space& space) {
    trial.trial_id = cotune_str{id.data(), id.size()};
    trial.workload_json = cotune_str{workload.data(), workload.size()};
    trial.params = space.raw_params();
    trial.num_params = space.num_params();
    trial.config = config.data();
  }
};

class RemoteTest : public ::testing::Test {
 protected:
  TempDir dir;
  std::string secret_file = write_file(dir.file("secret"), kSecret + "\n");
  Registry registry;
  std::unique_ptr<cotune::core::Space> space;
  std::mutex log_mu;
  std::vector<std::string> log_lines;

  void SetUp() override {
    ASSERT_TRUE(registry.load_file(std::string(COTUNE_PLUGIN_DIR) + "/libcotune-executor-remote.so"));
    ASSERT_TRUE(registry.load_file(kTestPluginDir + "/libcotune-space-testgrid.so"));
    space = registry.make_space("testgrid", "{}");
    cotune::core::set_log_sink([this](int32_t, std::string_view component, std::string_view message) {
      std::lock_guard<std::mutex> lock(log_mu);
      log_lines.push_back(std::string(component) + ": " + std::string(message));
    });
  }
  void TearDown() override { cotune::core::set_log_sink(nullptr); }

  bool logged(const std::string& needle) {
    std::lock_guard<std::mutex> lock(log_mu);
    for (const auto& l : log_lines)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }

  json agent_entry(uint16_t port, int capacity, const std::string& secret = "") {
    return {{"address", "127.0.0.1:" + std::to_string(port)},
            {"secret_file", secret.empty() ? secret_file : secret},
            {"capacity", capacity}};
  }

  std::unique_ptr<Executor> remote(const json& agents, json extra = json::object()) {
    json o{{"space", "testgrid"}, {"agents", agents}, {"retry_min_ms", 50}, {"retry_max_ms", 400},
           {"connect_timeout_ms", 2000}};
    o.update(extra);
    return registry.make_executor("remote", o.dump());
  }

  std::unique_ptr<GridTrial> grid_trial(const std::string& id, uint64_t seed) {
    auto t = std::make_unique<GridTrial>();
    t->id = id;
    t->config.resize(space->num_params());
    EXPECT_EQ(space->sample(seed, 1, t->config.data()), 1u);
    t->bind(*space);
    return t;
  }

  static double expected_tokens(const GridTrial& t) {
    double sum = 0;
    for (double v : t.config) sum += v;
    return 1000 + sum;
  }

  static TrialResult wait_result(Executor::Job& job, int timeout_ms = 15000) {
    TrialResult r;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    do {
      r = job.poll(100);
    } while (!r.finished() && std::chrono::steady_clock::now() < until);
    return r;
  }
};

TEST_F(RemoteTest, SixteenTrialsOverTwoAgents) {
  const std::string journal_a = dir.file("a.journal"), journal_b = dir.file("b.journal");
  InProcessAgent a(echo_agent_options(secret_file, json{{"delay_ms", 30}, {"journal", journal_a}}.dump()));
  InProcessAgent b(echo_agent_options(secret_file, json{{"delay_ms", 30}, {"journal", journal_b}}.dump()));
  auto exec = remote(json::array({agent_entry(a.port(), 2), agent_entry(b.port(), 2)}));
  EXPECT_EQ(exec->capacity(), 4);

  std::vector<std::unique_ptr<GridTrial>> trials;
  std::map<std::string, std::unique_ptr<Executor::Job>> jobs;
  size_t next = 0, done = 0;
  std::set<std::string> agents_used;
  while (done < 16) {
    while (jobs.size() < 4 && next < 16) {
      trials.push_back(grid_trial("study/" + std::to_string(next), 100 + next));
      jobs[trials.back()->id] = exec->submit(trials.back()->trial);
      ++next;
    }
    for (auto it = jobs.begin(); it != jobs.end();) {
      TrialResult r = it->second->poll(20);
      if (!r.finished()) {
        ++it;
        continue;
      }
      EXPECT_EQ(r.status, COTUNE_STATUS_OK) << it->first << ": " << r.error;
      const GridTrial& t = **std::find_if(trials.begin(), trials.end(), [&](auto& g) { return g->id == it->first; });
      EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["tokens_per_s"].get<double>(), expected_tokens(t));
      agents_used.insert(r.external_id.substr(0, r.external_id.find('/')));
      ++done;
      it = jobs.erase(it);
    }
  }
  EXPECT_EQ(agents_used.size(), 2u) << "both agents took trials";
  for (size_t i = 0; i < 16; ++i) {
    const std::string id = "study/" + std::to_string(i);
    EXPECT_EQ(count_lines(journal_a, id) + count_lines(journal_b, id), 1u) << id << " ran exactly once";
  }
}

TEST_F(RemoteTest, AgentWithAnotherSecretIsNotTrusted) {
  InProcessAgent a(echo_agent_options(secret_file, "{}"));
  const std::string other = write_file(dir.file("other"), "another-secret-entirely-0123456789");
  auto exec = remote(json::array({agent_entry(a.port(), 1, other)}));
  auto t = grid_trial("wrong/1", 1);
  auto job = exec->submit(t->trial);
  EXPECT_FALSE(job->poll(800).finished());
  EXPECT_TRUE(logged("failed to prove it knows the shared secret"));
}

TEST_F(RemoteTest, SecretFileMustBePrivate) {
  const std::string open = write_file(dir.file("open"), kSecret, 0640);
  try {
    remote(json::array({agent_entry(1234, 1, open)}));
    FAIL() << "expected a refusal";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("accessible by group or others"), std::string::npos) << e.what();
  }
}

TEST_F(RemoteTest, SecretFileUnderHomeIsReadAsAShellWould) {
  // The docs' "~/.cotune/secret": no shell expands a study file's JSON, the executor does.
  const char* had = std::getenv("HOME");
  const std::string before = had != nullptr ? had : "";
  std::string home = dir.file("");
  home.pop_back();  // the directory itself, without its trailing '/'
  ::setenv("HOME", home.c_str(), 1);
  std::filesystem::create_directories(dir.file(".cotune"));
  write_file(dir.file(".cotune/secret"), kSecret + "\n");
  std::string refused;
  try {
    remote(json::array({agent_entry(1234, 1, "~/.cotune/secret")}));
  } catch (const std::exception& e) {
    refused = e.what();
  }
  EXPECT_EQ(refused, "");
  // A missing one says why it cannot be read.
  try {
    remote(json::array({agent_entry(1234, 1, "~/.cotune/absent")}));
    refused = "";
  } catch (const std::exception& e) {
    refused = e.what();
  }
  if (had != nullptr) ::setenv("HOME", before.c_str(), 1);
  else ::unsetenv("HOME");
  EXPECT_NE(refused.find(dir.file(".cotune/absent") + "' cannot be read: No such file or directory"), std::string::npos)
      << refused;
}

TEST_F(RemoteTest, AnAgentThatCannotBeReachedIsAWarning) {
  // A wrong port: the first failed connection is a warning (then info lines, and a warning a minute),
  // not only info lines a user never sees.
  uint16_t port = 0;
  {
    InProcessAgent gone(echo_agent_options(secret_file, "{}"));
    port = gone.port();
  }  // closed: nothing listens there now
  std::vector<std::pair<int32_t, std::string>> seen;
  std::mutex mu;
  cotune::core::set_log_sink([&](int32_t level, std::string_view, std::string_view message) {
    std::lock_guard<std::mutex> lock(mu);
    seen.emplace_back(level, std::string(message));
  });
  auto exec = remote(json::array({agent_entry(port, 1)}));
  auto t = grid_trial("nowhere/1", 1);
  auto job = exec->submit(t->trial);
  EXPECT_FALSE(job->poll(600).finished());
  cotune::core::set_log_sink(nullptr);
  int warnings = 0, infos = 0;
  for (const auto& [level, message] : seen) {
    if (message.find("connect failed") == std::string::npos) continue;
    (level == COTUNE_LOG_WARN ? warnings : infos) += 1;
  }
  EXPECT_EQ(warnings, 1);
  EXPECT_GE(infos, 1) << "retries within the minute are info";
}

TEST_F(RemoteTest, TlsWithCertificatesMadeForTheTest) {
  const std::string cert = dir.file("cert.pem"), key = dir.file("key.pem");
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
                          "-addext subjectAltName=IP:127.0.0.1 -keyout '" + key + "' -out '" + cert + "' 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto o = echo_agent_options(secret_file, "{}");
  o.tls_cert = cert;
  o.tls_key = key;
  InProcessAgent a(o);

  json entry = agent_entry(a.port(), 1);
  entry["tls_ca"] = cert;
  auto exec = remote(json::array({entry}));
  auto t = grid_trial("tls/1", 7);
  auto job = exec->submit(t->trial);
  TrialResult r = wait_result(*job);
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["tokens_per_s"].get<double>(), expected_tokens(*t));

  // A plain-text client gets nowhere with a TLS agent.
  RawClient plain(a.port());
  EXPECT_FALSE(plain.handshake(kSecret).welcomed);

  // And a client that does not trust the agent's certificate refuses it.
  const std::string other_cert = dir.file("other.pem"), other_key = dir.file("other.key");
  ASSERT_EQ(std::system(("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
                         "-addext subjectAltName=IP:127.0.0.1 -keyout '" + other_key + "' -out '" + other_cert +
                         "' 2>/dev/null").c_str()), 0);
  entry["tls_ca"] = other_cert;
  auto untrusting = remote(json::array({entry}));
  auto t2 = grid_trial("tls/2", 8);
  auto job2 = untrusting->submit(t2->trial);
  EXPECT_FALSE(job2->poll(800).finished());
  EXPECT_TRUE(logged("TLS handshake failed"));
}

TEST_F(RemoteTest, TrialsMoveOffAnUnreachableAgent) {
  InProcessAgent b(echo_agent_options(secret_file, "{}"));
  // Port 1 on loopback: nobody listens there.
  auto exec = remote(json::array({agent_entry(1, 4), agent_entry(b.port(), 1)}), {{"failover_ms", 200}});
  std::vector<std::unique_ptr<GridTrial>> trials;
  std::vector<std::unique_ptr<Executor::Job>> jobs;
  for (int i = 0; i < 4; ++i) {
    trials.push_back(grid_trial("move/" + std::to_string(i), 20 + i));
    jobs.push_back(exec->submit(trials.back()->trial));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    TrialResult r = wait_result(*jobs[i]);
    EXPECT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
    EXPECT_EQ(r.external_id, "127.0.0.1:" + std::to_string(b.port()) + "/" + trials[i]->id);
  }
}

TEST_F(RemoteTest, AgentKilledMidTrialAndRestartedLosesAndDuplicatesNothing) {
  const std::string journal = dir.file("journal"), log = dir.file("agent.log");
  auto args = [&](uint16_t port) {
    return std::vector<std::string>{"--listen", "127.0.0.1:" + std::to_string(port), "--secret-file", secret_file,
                                    "--executor", "testecho", "--executor-options",
                                    json{{"delay_ms", 1500}, {"journal", journal}}.dump(),
                                    "--plugin-dir", kTestPluginDir, "--state-dir", dir.file("state"),
                                    "--workdir", dir.file("work")};
  };
  auto agent = std::make_unique<AgentProcess>(args(0), log);
  const uint16_t port = agent->port();
  auto exec = remote(json::array({agent_entry(port, 1)}), {{"failover_ms", 60000}});
  auto t = grid_trial("crash/1", 3);
  auto job = exec->submit(t->trial);
  ASSERT_TRUE(wait_until([&] { return count_lines(journal, "crash/1") == 1; }, 10000));
  agent->kill(SIGKILL);
  agent->wait();
  EXPECT_FALSE(job->poll(300).finished());
  agent = std::make_unique<AgentProcess>(args(port), log);

  TrialResult r = wait_result(*job, 20000);
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_EQ(r.attempts, 2) << "the killed run counts as an attempt";
  EXPECT_EQ(count_lines(journal, "crash/1"), 2u) << "retried once, not more";
  EXPECT_TRUE(logged("does not know trial 'crash/1'"));
  // Nothing is left behind: the result was acknowledged and forgotten.
  EXPECT_TRUE(wait_until([&] {
    return std::system(("test -z \"$(ls -A '" + dir.file("state") + "')\"").c_str()) == 0;
  }, 3000));
}

TEST_F(RemoteTest, SigtermLetsRunningTrialsFinish) {
  const std::string log = dir.file("agent.log");
  AgentProcess agent({"--listen", "127.0.0.1:0", "--secret-file", secret_file, "--executor", "testecho",
                      "--executor-options", R"({"delay_ms": 700})", "--plugin-dir", kTestPluginDir, "--workdir",
                      dir.file("work")},
                     log);
  auto exec = remote(json::array({agent_entry(agent.port(), 1)}));
  auto t = grid_trial("term/1", 5);
  auto job = exec->submit(t->trial);
  ASSERT_TRUE(wait_until([&] { return job->poll(0).status == COTUNE_STATUS_RUNNING; }, 5000));
  agent.kill(SIGTERM);
  TrialResult r = wait_result(*job, 10000);
  EXPECT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_EQ(agent.wait(), 0);
}

TEST_F(RemoteTest, ARestartedHostReattachesToARunningTrial) {
  const std::string journal = dir.file("journal");
  InProcessAgent a(echo_agent_options(secret_file, json{{"delay_ms", 600}, {"journal", journal}}.dump()));
  auto t = grid_trial("resume/1", 9);
  std::string external_id;
  {
    auto first = remote(json::array({agent_entry(a.port(), 1)}));
    auto job = first->submit(t->trial);
    ASSERT_TRUE(wait_until([&] { return job->poll(0).status == COTUNE_STATUS_RUNNING; }, 5000));
    external_id = job->poll(0).external_id;
  }  // the host goes away while the trial runs
  EXPECT_EQ(external_id, "127.0.0.1:" + std::to_string(a.port()) + "/resume/1");
  auto second = remote(json::array({agent_entry(a.port(), 1)}));
  auto job = second->attach(t->trial, external_id);
  TrialResult r = wait_result(*job);
  ASSERT_EQ(r.status, COTUNE_STATUS_OK) << r.error;
  EXPECT_DOUBLE_EQ(json::parse(r.metrics_json)["tokens_per_s"].get<double>(), expected_tokens(*t));
  EXPECT_EQ(count_lines(journal, "resume/1"), 1u) << "re-attached, not run again";
}

TEST_F(RemoteTest, BadOptionsAreNamed) {
  try {
    remote(json::array({{{"address", "nohost"}, {"secret_file", secret_file}}}));
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("agents[0].address 'nohost': expected host:port"), std::string::npos) << e.what();
  }
  EXPECT_THROW(registry.make_executor("remote", R"({"agents": []})"), std::exception);
  // An agent on another machine is reached over TLS only.
  try {
    remote(json::array({{{"address", "10.1.2.3:7700"}, {"secret_file", secret_file}}}));
    FAIL() << "a plain connection to another machine was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("agents[0]: the agent at 10.1.2.3 is not on this machine: set \"tls\": true"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
