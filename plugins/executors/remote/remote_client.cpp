#include "remote_client.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace cotune_remote {
namespace asio = boost::asio;

namespace {
constexpr const char* kId = "org.cotune.executor.remote";
constexpr auto kFailoverCheck = std::chrono::milliseconds(100);

int32_t status_from_name(const std::string& name) {
  static const char* names[] = {"pending", "running", "ok", "failed", "oom", "timeout", "cancelled", "unavailable"};
  for (int32_t s = 0; s < 8; ++s)
    if (name == names[s]) return s;
  return -1;
}

// A configuration as parameter values by name, the form the agent validates.
nlohmann::json config_values(const cotune_trial& trial) {
  nlohmann::json values = nlohmann::json::object();
  for (size_t i = 0; i < trial.num_params; ++i) {
    const cotune_param& p = *trial.params[i];
    const std::string name(cotune::view(p.name));
    const double v = trial.config[i];
    switch (p.type) {
      case COTUNE_PARAM_BOOL: values[name] = v != 0; break;
      case COTUNE_PARAM_CATEGORICAL: {
        const auto index = static_cast<size_t>(v);
        if (v < 0 || index >= p.num_choices || double(index) != v)
          throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "remote executor: parameter '" + name + "' has no choice " + std::to_string(v));
        values[name] = std::string(cotune::view(p.choices[index]));
        break;
      }
      case COTUNE_PARAM_INT: values[name] = static_cast<int64_t>(std::llround(v)); break;
      default: values[name] = v; break;
    }
  }
  return values;
}
}  // namespace

RemoteClient::RemoteClient(RemoteOptions options)
    : options_(std::move(options)), work_(asio::make_work_guard(io_)), failover_timer_(io_) {
  for (size_t i = 0; i < options_.agents.size(); ++i) {
    AgentLink::Callbacks cb;
    cb.ready = [this](AgentLink& l) { on_ready(l); };
    cb.message = [this](AgentLink& l, const nlohmann::json& m) { on_message(l, m); };
    links_.push_back(std::make_unique<AgentLink>(io_, options_.agents[i], options_, i, cb));
  }
  orphans_.resize(links_.size());
  asio::post(io_, [this] {
    for (auto& l : links_) l->start();
    arm_failover_timer();
  });
  thread_ = std::thread([this] { io_.run(); });
}

RemoteClient::~RemoteClient() {
  asio::post(io_, [this] {
    for (auto& l : links_) l->stop();
    failover_timer_.cancel();
  });
  work_.reset();
  io_.stop();
  if (thread_.joinable()) thread_.join();
  links_.clear();
}

int RemoteClient::capacity() const {
  int total = 0;
  for (const auto& a : options_.agents) total += a.capacity;
  return total;
}

std::string RemoteClient::external_id(const RemoteTrial& t) const {
  return options_.agents[t.agent].address + "/" + t.id;
}

nlohmann::json RemoteClient::submit_message(const cotune_trial& trial, const std::string& trial_id) const {
  nlohmann::json workload = nlohmann::json::parse(cotune::view(trial.workload_json), nullptr, false);
  if (cotune::view(trial.workload_json).empty()) workload = nlohmann::json::object();
  if (workload.is_discarded() || !workload.is_object())
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "remote executor: the trial's workload is not a JSON object");
  nlohmann::json values;
  if (trial.num_params > 0 && trial.params != nullptr && trial.config != nullptr) {
    values = config_values(trial);
  } else {
    values = nlohmann::json::parse(cotune::view(trial.config_json), nullptr, false);
    if (values.is_discarded() || !values.is_object())
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "remote executor: the trial has no parameters and its config_json is not an object");
  }
  return {{"type", "submit"}, {"trial_id", trial_id}, {"space", options_.space}, {"workload", workload}, {"config", values}};
}

std::shared_ptr<RemoteTrial> RemoteClient::submit(const cotune_trial& trial) {
  const std::string id(cotune::view(trial.trial_id));
  if (id.empty() || id.size() > 256)
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "remote executor: trial id must be 1 to 256 bytes");
  auto t = std::make_shared<RemoteTrial>();
  t->id = id;
  t->submit = submit_message(trial, id);
  t->result.status = COTUNE_STATUS_PENDING;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = trials_.find(id);
    if (it != trials_.end() && !it->second->acked)
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "remote executor: trial '" + id + "' is already in flight");
    trials_[id] = t;
  }
  asio::post(io_, [this, t] {
    std::lock_guard<std::mutex> lock(mu_);
    assign(t);
  });
  return t;
}

std::shared_ptr<RemoteTrial> RemoteClient::attach(const cotune_trial& trial, std::string_view external_id) {
  const auto slash = external_id.find('/');
  if (slash == std::string_view::npos || slash + 1 == external_id.size())
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT,
                        "remote executor: external id '" + std::string(external_id) + "' is not \"host:port/trial-id\"");
  const std::string address(external_id.substr(0, slash));
  const std::string id(external_id.substr(slash + 1));
  size_t agent = links_.size();
  for (size_t i = 0; i < options_.agents.size(); ++i)
    if (options_.agents[i].address == address) agent = i;
  if (agent == links_.size())
    throw cotune::Error(COTUNE_ERR_NOT_FOUND, "remote executor: agent '" + address + "' (from external id '" +
                                                  std::string(external_id) + "') is not among its agents");
  auto t = std::make_shared<RemoteTrial>();
  t->id = id;
  t->submit = submit_message(trial, id);
  t->agent = agent;
  t->sent = true;  // the agent may know it: ask before running it again
  t->result.status = COTUNE_STATUS_RUNNING;
  t->result.external_id = options_.agents[agent].address + "/" + id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    trials_[id] = t;
  }
  asio::post(io_, [this, t] {
    std::lock_guard<std::mutex> lock(mu_);
    if (links_[t->agent]->ready()) links_[t->agent]->send({{"type", "attach"}, {"trial_id", t->id}});
  });
  return t;
}

void RemoteClient::poll(const std::shared_ptr<RemoteTrial>& t, int32_t timeout_ms, cotune::JobResult& out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (timeout_ms > 0) cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return t->finished; });
  out = t->result;
  if (t->finished && !t->acked) {
    // The host has the result now: the agent may forget it.
    t->acked = true;
    asio::post(io_, [this, t] {
      std::lock_guard<std::mutex> l(mu_);
      if (t->sent && !links_[t->agent]->send({{"type", "ack"}, {"trial_id", t->id}})) {
        t->ack_pending = true;  // sent by on_ready, then forgotten
        return;
      }
      auto it = trials_.find(t->id);
      if (it != trials_.end() && it->second == t) trials_.erase(it);
    });
  }
}

cotune::JobResult RemoteClient::snapshot(const std::shared_ptr<RemoteTrial>& t) const {
  std::lock_guard<std::mutex> lock(mu_);
  return t->result;
}

void RemoteClient::cancel(const std::shared_ptr<RemoteTrial>& t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (t->finished || t->cancel_requested) return;
  t->cancel_requested = true;
  asio::post(io_, [this, t] {
    std::lock_guard<std::mutex> l(mu_);
    if (t->finished) return;
    if (!t->sent) return finish(*t, COTUNE_STATUS_CANCELLED, "cancelled before it reached an agent");
    links_[t->agent]->send({{"type", "cancel"}, {"trial_id", t->id}});
  });
}

void RemoteClient::finish(RemoteTrial& t, int32_t status, const std::string& error) {
  t.result.status = status;
  t.result.error = error;
  t.finished = true;
  cv_.notify_all();
}

void RemoteClient::assign(const std::shared_ptr<RemoteTrial>& t) {
  if (t->finished) return;
  if (t->cancel_requested) return finish(*t, COTUNE_STATUS_CANCELLED, "cancelled before it reached an agent");
  // The ready agent with the lowest load relative to its capacity; any agent when none is ready.
  std::vector<int> load(links_.size(), 0);
  for (auto& [id, other] : trials_)
    if (!other->finished && other.get() != t.get() && other->sent) ++load[other->agent];
  size_t best = links_.size();
  double best_score = 0;
  for (int pass = 0; pass < 2 && best == links_.size(); ++pass) {
    for (size_t i = 0; i < links_.size(); ++i) {
      if (pass == 0 && !links_[i]->ready()) continue;
      const double score = double(load[i]) / options_.agents[i].capacity;
      if (best == links_.size() || score < best_score) {
        best = i;
        best_score = score;
      }
    }
  }
  t->agent = best;
  t->result.external_id = external_id(*t);
  dispatch(t);
}

void RemoteClient::dispatch(const std::shared_ptr<RemoteTrial>& t) {
  AgentLink& link = *links_[t->agent];
  if (link.send(t->submit)) t->sent = true;
  // Otherwise it goes out when the link is ready (on_ready) or moves on failover.
}

void RemoteClient::on_ready(AgentLink& link) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& id : orphans_[link.index()]) link.send({{"type", "cancel"}, {"trial_id", id}});
  orphans_[link.index()].clear();
  for (auto it = trials_.begin(); it != trials_.end();) {
    RemoteTrial& t = *it->second;
    if (t.agent == link.index() && t.finished && t.ack_pending && link.send({{"type", "ack"}, {"trial_id", t.id}}))
      it = trials_.erase(it);
    else
      ++it;
  }
  for (auto& [id, t] : trials_) {
    if (t->agent != link.index() || t->finished) continue;
    if (!t->sent) {
      dispatch(t);
    } else {
      // Resume by id: the agent answers with the trial's state, or "unknown" if it lost it.
      link.send({{"type", "attach"}, {"trial_id", t->id}});
      if (t->cancel_requested) link.send({{"type", "cancel"}, {"trial_id", t->id}});
    }
  }
}

void RemoteClient::on_message(AgentLink& link, const nlohmann::json& m) {
  const std::string type = m.value("type", std::string());
  if (type == "pong" || type == "welcome") return;
  const std::string id = m.value("trial_id", std::string());
  std::lock_guard<std::mutex> lock(mu_);
  auto it = trials_.find(id);
  RemoteTrial* t = it == trials_.end() ? nullptr : it->second.get();
  const bool ours = t != nullptr && t->agent == link.index() && t->sent;
  if (type == "result") {
    // Not ours (moved away, or already delivered): let the agent forget it.
    if (!ours || t->finished) {
      if (t == nullptr || t->agent != link.index() || t->acked) link.send({{"type", "ack"}, {"trial_id", id}});
      return;
    }
    const int32_t status = status_from_name(m.value("status", std::string()));
    if (status < COTUNE_STATUS_OK) {
      cotune::log(COTUNE_LOG_WARN, kId, "agent " + link.config().address + " sent a result with a bad status for '" + id + "'");
      return;
    }
    t->result.attempts = m.value("attempts", 1) + t->resubmits;
    t->result.metrics_json = m.contains("metrics") && m["metrics"].is_object() ? m["metrics"].dump() : "{}";
    t->result.log_path = m.value("log_path", std::string());
    finish(*t, status, m.value("error", std::string()));
    return;
  }
  if (!ours || t->finished) return;
  if (type == "status") {
    const int32_t status = status_from_name(m.value("status", std::string()));
    if (status == COTUNE_STATUS_PENDING || status == COTUNE_STATUS_RUNNING) t->result.status = status;
  } else if (type == "rejected") {
    const std::string reason = m.value("reason", std::string("no reason given"));
    if (m.value("retry", false)) {
      // The agent is shutting down: try the others (or this one again once it is back).
      cotune::log(COTUNE_LOG_INFO, kId, "agent " + link.config().address + " turned '" + id + "' away: " + reason);
      t->sent = false;
      assign(it->second);
    } else {
      finish(*t, COTUNE_STATUS_FAILED, "agent " + link.config().address + " refused the trial: " + reason);
    }
  } else if (type == "unknown") {
    if (t->cancel_requested) return finish(*t, COTUNE_STATUS_CANCELLED, "cancelled");
    // The agent restarted without the trial (it was running, or never arrived): run it again.
    ++t->resubmits;
    cotune::log(COTUNE_LOG_WARN, kId, "agent " + link.config().address + " does not know trial '" + id +
                                          "' (restarted?); submitting it again");
    link.send(t->submit);
  }
}

void RemoteClient::arm_failover_timer() {
  failover_timer_.expires_after(kFailoverCheck);
  failover_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    check_failover();
    arm_failover_timer();
  });
}

void RemoteClient::check_failover() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = AgentLink::Clock::now();
  bool any_ready = false;
  for (auto& l : links_) any_ready = any_ready || l->ready();
  if (!any_ready) return;  // nowhere to move to
  for (auto& [id, t] : trials_) {
    AgentLink& link = *links_[t->agent];
    if (t->finished || t->cancel_requested || link.ready()) continue;
    if (now - link.down_since() < std::chrono::milliseconds(options_.failover_ms)) continue;
    cotune::log(COTUNE_LOG_WARN, kId, "agent " + link.config().address + " unreachable for " +
                                          std::to_string(options_.failover_ms) + " ms; moving trial '" + id + "'");
    if (t->sent) {
      orphans_[link.index()].push_back(id);  // cancelled there if it comes back
      ++t->resubmits;
    }
    t->sent = false;
    assign(t);
  }
}

}  // namespace cotune_remote
