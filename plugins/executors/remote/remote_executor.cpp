// remote: runs trials on other machines through `cotune agent` (docs/remote-protocol.md).
//
// Options: {"space": "llm", "agents": [{"address": "gpu1:7070", "secret_file": "~/.cotune/secret",
//   "capacity": 4, "tls_ca": "ca.pem"}], "failover_ms": 10000, ...} (remote_options.hpp).
#include <cotune/cotune.hpp>

#include "remote_client.hpp"
#include "remote_options.hpp"

#include <memory>
#include <stdexcept>

namespace {

class RemoteExecutor {
 public:
  struct Job {
    std::shared_ptr<cotune_remote::RemoteTrial> trial;
    cotune::JobResult result;  // what the last poll returned; its strings live until the next
  };

  explicit RemoteExecutor(std::string_view options_json) : client_(parse(options_json)) {}

  int32_t capacity() { return client_.capacity(); }

  std::unique_ptr<Job> submit(const cotune_trial& trial) {
    auto job = std::make_unique<Job>();
    job->trial = client_.submit(trial);
    job->result = client_.snapshot(job->trial);
    return job;
  }

  std::unique_ptr<Job> attach(const cotune_trial& trial, std::string_view external_id) {
    auto job = std::make_unique<Job>();
    job->trial = client_.attach(trial, external_id);
    return job;
  }

  const cotune::JobResult& poll(Job& job, int32_t timeout_ms) {
    client_.poll(job.trial, timeout_ms, job.result);
    return job.result;
  }

  void cancel(Job& job) { client_.cancel(job.trial); }

 private:
  static cotune_remote::RemoteOptions parse(std::string_view json) {
    try {
      return cotune_remote::parse_remote_options(json);
    } catch (const std::invalid_argument& e) {
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, e.what());
    }
  }

  cotune_remote::RemoteClient client_;
};

}  // namespace

COTUNE_PLUGIN(cotune::executor<RemoteExecutor>(
    {"org.cotune.executor.remote", "remote",
     "Runs trials on other machines through authenticated `cotune agent` servers.", "1.0.0", COTUNE_CAP_THREAD_SAFE}))
