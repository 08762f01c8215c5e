// Remote execution over loopback: round trips per second for trivial trials (the testecho fixture
// executor, no delay) through the remote executor plugin, with and without TLS; the agent's
// throughput with 100 concurrent client connections; and the memory of an idle agent and of one
// holding 100 authenticated connections (the real `cotune agent` process, VmRSS).
#include <benchmark/benchmark.h>

#include <cotune/core/abi/components.hpp>
#include <cotune/core/registry.hpp>

// The harness is shared with the tests, which get these from CMake; the bench derives them from
// the plugin directory (<build>/lib/cotune/plugins).
#define COTUNE_BINARY_DIR COTUNE_PLUGIN_DIR "/../../.."
#define COTUNE_CLI COTUNE_PLUGIN_DIR "/../../../bin/cotune"
#include "../tests/support/agent_harness.hpp"

#include <fstream>
#include <memory>

namespace {
using namespace cotune::testing;
using nlohmann::json;

struct Fixture {
  TempDir dir;
  std::string secret_file = write_file(dir.file("secret"), kSecret);
  cotune::core::Registry registry;
  std::unique_ptr<cotune::core::Space> space;
  Fixture() {
    registry.load_file(std::string(COTUNE_PLUGIN_DIR) + "/libcotune-executor-remote.so");
    registry.load_file(kTestPluginDir + "/libcotune-space-testgrid.so");
    space = registry.make_space("testgrid", "{}");
  }
};

void round_trips(benchmark::State& state, bool tls) {
  Fixture f;
  auto o = echo_agent_options(f.secret_file, "{}");
  json entry;
  if (tls) {
    const std::string cert = f.dir.file("cert.pem"), key = f.dir.file("key.pem");
    std::system(("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext "
                 "subjectAltName=IP:127.0.0.1 -keyout '" + key + "' -out '" + cert + "' 2>/dev/null").c_str());
    o.tls_cert = cert;
    o.tls_key = key;
    entry["tls_ca"] = cert;
  }
  InProcessAgent agent(o);
  entry["address"] = "127.0.0.1:" + std::to_string(agent.port());
  entry["secret_file"] = f.secret_file;
  auto exec = f.registry.make_executor("remote", json{{"space", "testgrid"}, {"agents", json::array({entry})}}.dump());
  std::vector<double> config(f.space->num_params());
  f.space->sample(1, 1, config.data());
  std::string workload = "{}";
  size_t n = 0;
  for (auto _ : state) {
    const std::string id = "bench/" + std::to_string(n++);
    cotune_trial t = cotune::core::empty_trial();
    t.trial_id = cotune_str{id.data(), id.size()};
    t.workload_json = cotune_str{workload.data(), workload.size()};
    t.params = f.space->raw_params();
    t.num_params = f.space->num_params();
    t.config = config.data();
    auto job = exec->submit(t);
    cotune::core::TrialResult r;
    do {
      r = job->poll(1000);
    } while (!r.finished());
    if (r.status != COTUNE_STATUS_OK) state.SkipWithError(r.error.c_str());
  }
  state.SetItemsProcessed(static_cast<int64_t>(n));
}

void BM_RoundTripPlain(benchmark::State& state) { round_trips(state, false); }
void BM_RoundTripTls(benchmark::State& state) { round_trips(state, true); }
BENCHMARK(BM_RoundTripPlain)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_RoundTripTls)->Unit(benchmark::kMicrosecond)->UseRealTime()->MinTime(2.0);

// 100 authenticated raw clients each submit one trivial trial per iteration and wait for its result.
void BM_RoundTrip100Connections(benchmark::State& state) {
  Fixture f;
  auto o = echo_agent_options(f.secret_file, "{}");
  o.max_parallel = 100;
  InProcessAgent agent(o);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 100; ++i) {
    clients.push_back(std::make_unique<RawClient>(agent.port()));
    if (!clients.back()->handshake(kSecret).welcomed) state.SkipWithError("handshake failed");
  }
  size_t n = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < clients.size(); ++i)
      clients[i]->send(submit_message("c" + std::to_string(i) + "/" + std::to_string(n), grid_config()));
    for (size_t i = 0; i < clients.size(); ++i) {
      auto r = clients[i]->read_type("result", 10000);
      if (!r) {
        state.SkipWithError("no result");
        break;
      }
      clients[i]->send({{"type", "ack"}, {"trial_id", (*r)["trial_id"]}});
    }
    ++n;
  }
  state.SetItemsProcessed(static_cast<int64_t>(n * clients.size()));
}
BENCHMARK(BM_RoundTrip100Connections)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// Resident memory of the real agent process, idle and with 100 authenticated connections.
void BM_AgentMemory(benchmark::State& state) {
  Fixture f;
  AgentProcess agent({"--listen", "127.0.0.1:0", "--secret-file", f.secret_file, "--executor", "testecho",
                      "--plugin-dir", kTestPluginDir},
                     f.dir.file("agent.log"));
  long idle = 0, busy = 0;
  for (auto _ : state) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    idle = rss_kib(agent.pid());
    std::vector<std::unique_ptr<RawClient>> clients;
    for (int i = 0; i < 100; ++i) {
      clients.push_back(std::make_unique<RawClient>(agent.port()));
      clients.back()->handshake(kSecret);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    busy = rss_kib(agent.pid());
  }
  state.counters["idle_rss_KiB"] = static_cast<double>(idle);
  state.counters["rss_100_connections_KiB"] = static_cast<double>(busy);
}
BENCHMARK(BM_AgentMemory)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
