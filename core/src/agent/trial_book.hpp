// The agent's trials: validates submissions against the space, queues them up to max_parallel,
// runs them with the local executor, and holds each finished result (on disk when a state
// directory is set) until a client acknowledges it. Used from the agent's one I/O thread.
#ifndef COTUNE_AGENT_TRIAL_BOOK_HPP_
#define COTUNE_AGENT_TRIAL_BOOK_HPP_

#include <cotune/core/abi/components.hpp>
#include <cotune/core/registry.hpp>

#include <boost/filesystem/path.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cotune::core::agent {

class TrialBook {
 public:
  struct Options {
    int max_parallel = 1;
    std::string state_dir;  // "" keeps results in memory only
    std::string workdir;    // parent of the per-trial directories
    // Trials held at once: queued, running, or finished and not yet acknowledged. A client that
    // never acknowledges cannot grow the agent's memory and state directory without bound.
    size_t max_trials = 10000;
    bool keep_trial_dirs = false;  // false: a trial's directory goes when its result is acknowledged
  };
  // (subscriber, message) for every status change of a trial with a subscriber.
  using Notify = std::function<void(uint64_t subscriber, const nlohmann::json& message)>;
  using Log = std::function<void(const std::string&)>;

  TrialBook(const Registry& registry, std::unique_ptr<Executor> executor, Options options, Log log);
  ~TrialBook();

  void set_notify(Notify notify) { notify_ = std::move(notify); }
  int capacity() const;

  // Whether a trial with this id can be submitted now: it is known already, or fewer than
  // max_trials are held. When not, the client should acknowledge results and retry.
  bool has_room_for(const std::string& trial_id) const;
  size_t max_trials() const { return options_.max_trials; }

  // Validates and queues a trial. Returns the refusal reason, or empty when accepted. A trial id
  // that is already known is accepted without running it again (a resubmission after a drop).
  std::string submit(const std::string& trial_id, const std::string& space,
                     const nlohmann::json& workload, const nlohmann::json& values);
  // Sends this trial's updates to `subscriber` from now on; returns its current state as a
  // message ("status" or "result"), or nullopt when the trial is unknown.
  std::optional<nlohmann::json> subscribe(const std::string& trial_id, uint64_t subscriber);
  // Stops notifying `subscriber` (its connection closed); results stay held.
  void unsubscribe(uint64_t subscriber);
  // Cancels a queued or running trial; false when unknown or already finished.
  bool cancel(const std::string& trial_id);
  // Forgets a finished trial; false when it is unknown or not finished.
  bool acknowledge(const std::string& trial_id);

  // Starts queued trials while there is capacity, and polls running ones.
  void tick();
  void cancel_all();
  // Trials queued or running.
  size_t active() const;
  size_t held() const;

 private:
  struct Trial;
  Trial* find(const std::string& trial_id);
  void start(Trial& t);
  void poll_running();
  void start_queued();
  void finish(Trial& t, TrialResult result);
  void persist(const Trial& t);
  void unpersist(const std::string& trial_id);
  void load_persisted();
  std::string trial_file(const std::string& trial_id) const;
  boost::filesystem::path trial_dir(const std::string& trial_id) const;
  nlohmann::json message(const Trial& t) const;
  Space& space_for(const std::string& name, const std::string& workload_text);

  const Registry& registry_;
  std::unique_ptr<Executor> executor_;
  Options options_;
  Log log_;
  Notify notify_;
  std::map<std::string, std::unique_ptr<Trial>> trials_;
  std::vector<std::string> queue_;  // trial ids waiting for a slot, oldest first
  std::map<std::string, std::unique_ptr<Space>> spaces_;  // by space name + workload text
};

}  // namespace cotune::core::agent

#endif  // COTUNE_AGENT_TRIAL_BOOK_HPP_
