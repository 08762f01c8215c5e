// The engine of the remote executor: its trials, the links to its agents, and the I/O thread
// that drives them. Trials go to the ready agent with the most free capacity; a trial whose agent
// has been down for failover_ms moves to another agent; after a reconnect each trial is resumed
// by id (attach), and resubmitted when the agent no longer knows it. Results are acknowledged
// only once the host has polled them, so a drop at any point loses nothing.
#ifndef COTUNE_REMOTE_REMOTE_CLIENT_HPP_
#define COTUNE_REMOTE_REMOTE_CLIENT_HPP_

#include "agent_link.hpp"
#include "remote_options.hpp"

#include <cotune/cotune.hpp>

#include <boost/asio.hpp>
#include <nlohmann/json.hpp>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cotune_remote {

// Its implicit move constructor cannot throw (nlohmann::json's is noexcept); clang-tidy 14 follows
// calls into noexcept functions and reports an exception escaping it all the same.
struct RemoteTrial {  // NOLINT(bugprone-exception-escape): see above
  std::string id;
  nlohmann::json submit;  // the submit message, kept for resubmission
  size_t agent = 0;       // index of the agent it is assigned to
  bool sent = false;      // the assigned agent may know it (submitted or attached)
  bool finished = false;
  bool cancel_requested = false;
  bool acked = false;        // the host has the result; the agent may forget it
  bool ack_pending = false;  // acked while the agent was unreachable
  int resubmits = 0;
  cotune::JobResult result;
};

class RemoteClient {
 public:
  explicit RemoteClient(RemoteOptions options);
  ~RemoteClient();
  RemoteClient(const RemoteClient&) = delete;
  RemoteClient& operator=(const RemoteClient&) = delete;

  int capacity() const;
  std::shared_ptr<RemoteTrial> submit(const cotune_trial& trial);
  std::shared_ptr<RemoteTrial> attach(const cotune_trial& trial, std::string_view external_id);
  // Waits up to timeout_ms for the trial to finish and copies its state into `out`.
  void poll(const std::shared_ptr<RemoteTrial>& t, int32_t timeout_ms, cotune::JobResult& out);
  void cancel(const std::shared_ptr<RemoteTrial>& t);
  // The trial's state now, copied under the lock (the I/O thread may be updating it).
  cotune::JobResult snapshot(const std::shared_ptr<RemoteTrial>& t) const;

 private:
  nlohmann::json submit_message(const cotune_trial& trial, const std::string& trial_id) const;
  // I/O thread only, with mu_ held:
  void assign(const std::shared_ptr<RemoteTrial>& t);
  void dispatch(const std::shared_ptr<RemoteTrial>& t);
  void on_ready(AgentLink& link);
  void on_message(AgentLink& link, const nlohmann::json& m);
  void finish(RemoteTrial& t, int32_t status, const std::string& error);
  void check_failover();
  void arm_failover_timer();
  std::string external_id(const RemoteTrial& t) const;

  RemoteOptions options_;
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::vector<std::unique_ptr<AgentLink>> links_;
  std::vector<std::vector<std::string>> orphans_;  // per agent: trials moved away, to cancel there
  boost::asio::steady_timer failover_timer_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<RemoteTrial>> trials_;
  std::thread thread_;
};

}  // namespace cotune_remote

#endif  // COTUNE_REMOTE_REMOTE_CLIENT_HPP_
