#include "agent/trial_book.hpp"

#include <cotune/core/agent/auth.hpp>
#include <cotune/core/agent/frame.hpp>

#include "agent/config_values.hpp"

#include <boost/filesystem.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cotune::core::agent {
namespace fs = boost::filesystem;

namespace {
constexpr size_t kMaxCachedSpaces = 8;

std::string read_file(const fs::path& p) {
  std::ifstream in(p.string(), std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}
}  // namespace

struct TrialBook::Trial {
  std::string id;
  std::string space;
  std::string workload;  // compact JSON text
  std::vector<double> config;
  TrialResult result;  // status PENDING while queued, RUNNING while running
  std::unique_ptr<Executor::Job> job;
  uint64_t subscriber = 0;  // 0: none
};

TrialBook::TrialBook(const Registry& registry, std::unique_ptr<Executor> executor, Options options, Log log)
    : registry_(registry), executor_(std::move(executor)), options_(std::move(options)), log_(std::move(log)) {
  if (options_.max_parallel < 1) throw std::invalid_argument("max_parallel must be at least 1");
  if (!options_.state_dir.empty()) {
    fs::create_directories(options_.state_dir);
    load_persisted();
  }
}

TrialBook::~TrialBook() {
  // Jobs must go before the executor that made them.
  for (auto& [id, t] : trials_) t->job.reset();
}

int TrialBook::capacity() const { return std::min(options_.max_parallel, executor_->capacity()); }

TrialBook::Trial* TrialBook::find(const std::string& trial_id) {
  auto it = trials_.find(trial_id);
  return it == trials_.end() ? nullptr : it->second.get();
}

Space& TrialBook::space_for(const std::string& name, const std::string& workload_text) {
  const std::string key = name + '\n' + workload_text;
  auto it = spaces_.find(key);
  if (it != spaces_.end()) return *it->second;
  // Clients choose the workload, so the cache is bounded: drop one when full.
  if (spaces_.size() >= kMaxCachedSpaces) spaces_.erase(spaces_.begin());
  auto space = registry_.make_space(name, workload_text);
  return *spaces_.emplace(key, std::move(space)).first->second;
}

bool TrialBook::has_room_for(const std::string& trial_id) const {
  return trials_.count(trial_id) > 0 || trials_.size() < options_.max_trials;
}

std::string TrialBook::submit(const std::string& trial_id, const std::string& space,
                              const nlohmann::json& workload, const nlohmann::json& values) {
  if (find(trial_id) != nullptr) return {};
  if (!has_room_for(trial_id))
    return "the agent holds " + std::to_string(trials_.size()) + " trials (queued, running, or finished and not "
           "acknowledged), its limit (--max-trials)";
  auto t = std::make_unique<Trial>();
  t->id = trial_id;
  t->space = space;
  t->workload = workload.dump();
  try {
    Space& s = space_for(space, t->workload);
    t->config = config_from_values(s.params(), values);
    if (!s.valid(t->config.data())) {
      const std::string why = s.explain(t->config.data());
      return "configuration is not valid in space '" + space + "'" + (why.empty() ? "" : ": " + why);
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  t->result.status = COTUNE_STATUS_PENDING;
  queue_.push_back(trial_id);
  trials_.emplace(trial_id, std::move(t));
  return {};
}

void TrialBook::start(Trial& t) {
  try {
    Space& s = space_for(t.space, t.workload);
    const std::string config_json = s.render(t.config.data(), COTUNE_RENDER_JSON);
    const fs::path dir = trial_dir(t.id);
    fs::create_directories(dir);
    const std::string& workdir = dir.native();
    cotune_trial trial = empty_trial();
    trial.trial_id = cotune_str{t.id.data(), t.id.size()};
    trial.config_json = cotune_str{config_json.data(), config_json.size()};
    trial.workload_json = cotune_str{t.workload.data(), t.workload.size()};
    trial.workdir = cotune_str{workdir.data(), workdir.size()};
    trial.params = s.raw_params();
    trial.num_params = s.num_params();
    trial.config = t.config.data();
    if (s.can_lower()) trial.trace = &s.lower(t.config.data());
    t.job = executor_->submit(trial);
    t.result.status = COTUNE_STATUS_RUNNING;
    log_("trial '" + t.id + "' started");
    if (t.subscriber != 0 && notify_) notify_(t.subscriber, message(t));
  } catch (const std::exception& e) {
    TrialResult failed;
    failed.status = COTUNE_STATUS_FAILED;
    failed.attempts = 1;
    failed.error = std::string("agent could not start the trial: ") + e.what();
    finish(t, failed);
  }
}

void TrialBook::finish(Trial& t, TrialResult result) {
  t.job.reset();
  t.result = std::move(result);
  persist(t);
  log_("trial '" + t.id + "' finished: " + status_name(t.result.status));
  if (t.subscriber != 0 && notify_) notify_(t.subscriber, message(t));
}

void TrialBook::poll_running() {
  for (auto& [id, t] : trials_) {
    if (!t->job) continue;
    TrialResult r;
    try {
      r = t->job->poll(0);
    } catch (const std::exception& e) {
      r.status = COTUNE_STATUS_FAILED;
      r.error = std::string("executor poll failed: ") + e.what();
    }
    if (r.finished()) finish(*t, std::move(r));
  }
}

void TrialBook::start_queued() {
  size_t running = 0;
  for (auto& [id, t] : trials_) running += t->job ? 1 : 0;
  const size_t cap = static_cast<size_t>(std::max(1, capacity()));
  while (running < cap && !queue_.empty()) {
    Trial* t = find(queue_.front());
    queue_.erase(queue_.begin());
    if (t == nullptr || t->result.status != COTUNE_STATUS_PENDING) continue;
    start(*t);
    running += t->job ? 1 : 0;
  }
}

void TrialBook::tick() {
  // Poll, refill the freed slots, and poll again so that a trial the executor finishes at once
  // (a simulator) is answered in the same tick.
  poll_running();
  if (queue_.empty()) return;
  start_queued();
  poll_running();
  start_queued();
}

std::optional<nlohmann::json> TrialBook::subscribe(const std::string& trial_id, uint64_t subscriber) {
  Trial* t = find(trial_id);
  if (t == nullptr) return std::nullopt;
  t->subscriber = subscriber;
  return message(*t);
}

void TrialBook::unsubscribe(uint64_t subscriber) {
  for (auto& [id, t] : trials_)
    if (t->subscriber == subscriber) t->subscriber = 0;
}

bool TrialBook::cancel(const std::string& trial_id) {
  Trial* t = find(trial_id);
  if (t == nullptr || t->result.finished()) return false;
  if (t->job) {
    t->job->cancel();  // the next poll reports CANCELLED (or what it reached first)
    return true;
  }
  queue_.erase(std::remove(queue_.begin(), queue_.end(), trial_id), queue_.end());
  TrialResult r;
  r.status = COTUNE_STATUS_CANCELLED;
  r.error = "cancelled before it started";
  finish(*t, r);
  return true;
}

void TrialBook::cancel_all() {
  std::vector<std::string> ids;
  for (auto& [id, t] : trials_)
    if (!t->result.finished()) ids.push_back(id);
  for (const auto& id : ids) cancel(id);
}

bool TrialBook::acknowledge(const std::string& trial_id) {
  Trial* t = find(trial_id);
  if (t == nullptr || !t->result.finished()) return false;
  unpersist(trial_id);
  trials_.erase(trial_id);
  if (!options_.keep_trial_dirs) {
    boost::system::error_code ec;
    fs::remove_all(trial_dir(trial_id), ec);
    if (ec) log_("cannot remove the directory of trial '" + trial_id + "': " + ec.message());
  }
  return true;
}

fs::path TrialBook::trial_dir(const std::string& trial_id) const {
  return fs::path(options_.workdir) / ("trial-" + sha256_hex(trial_id).substr(0, 24));
}

size_t TrialBook::active() const {
  size_t n = 0;
  for (auto& [id, t] : trials_) n += t->result.finished() ? 0 : 1;
  return n;
}

size_t TrialBook::held() const { return trials_.size() - active(); }

nlohmann::json TrialBook::message(const Trial& t) const {
  nlohmann::json m{{"v", kProtocolVersion}, {"trial_id", t.id}};
  if (!t.result.finished()) {
    m["type"] = "status";
    m["status"] = status_name(t.result.status);
    return m;
  }
  m["type"] = "result";
  m["status"] = status_name(t.result.status);
  m["attempts"] = t.result.attempts;
  nlohmann::json metrics = nlohmann::json::object();
  if (!t.result.metrics_json.empty()) {
    metrics = nlohmann::json::parse(t.result.metrics_json, nullptr, false);
    if (metrics.is_discarded()) metrics = nlohmann::json::object();
  }
  m["metrics"] = metrics;
  m["error"] = t.result.error;
  m["log_path"] = t.result.log_path;
  m["local_id"] = t.result.external_id;
  return m;
}

std::string TrialBook::trial_file(const std::string& trial_id) const {
  return (fs::path(options_.state_dir) / (sha256_hex(trial_id) + ".json")).string();
}

void TrialBook::persist(const Trial& t) {
  if (options_.state_dir.empty()) return;
  nlohmann::json j = message(t);
  j["space"] = t.space;
  const std::string path = trial_file(t.id);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump();
    if (!out.flush()) {
      log_("cannot write '" + tmp + "': the result of '" + t.id + "' is held in memory only");
      return;
    }
  }
  fs::rename(tmp, path);  // atomic: a crash leaves the old file or the new, never half of one
}

void TrialBook::unpersist(const std::string& trial_id) {
  if (options_.state_dir.empty()) return;
  boost::system::error_code ec;
  fs::remove(trial_file(trial_id), ec);
}

void TrialBook::load_persisted() {
  for (const auto& entry : fs::directory_iterator(options_.state_dir)) {
    if (entry.path().extension() != ".json") continue;
    const nlohmann::json j = nlohmann::json::parse(read_file(entry.path()), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("trial_id") || !j["trial_id"].is_string() ||
        !j.contains("status") || !j["status"].is_string()) {
      log_("ignoring unreadable result file '" + entry.path().string() + "'");
      continue;
    }
    auto t = std::make_unique<Trial>();
    t->id = j["trial_id"].get<std::string>();
    t->space = j.value("space", "");
    t->result.status = status_from_name(j["status"].get<std::string>());
    if (t->result.status < 0 || !t->result.finished()) {
      log_("ignoring result file '" + entry.path().string() + "': status is not final");
      continue;
    }
    t->result.attempts = j.value("attempts", 1);
    t->result.metrics_json = j.value("metrics", nlohmann::json::object()).dump();
    t->result.error = j.value("error", "");
    t->result.log_path = j.value("log_path", "");
    t->result.external_id = j.value("local_id", "");
    trials_.emplace(t->id, std::move(t));
  }
  if (!trials_.empty()) log_("holding " + std::to_string(trials_.size()) + " unacknowledged result(s) from " + options_.state_dir);
}

}  // namespace cotune::core::agent
