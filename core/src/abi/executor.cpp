// The host-side wrapper of an executor and its jobs (see components.hpp).
#include <cotune/core/abi/call_watch.hpp>
#include <cotune/core/abi/components.hpp>
#include <cotune/core/abi/isolation.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "abi/component_helpers.hpp"

namespace cotune::core {

using namespace abi_detail;

// ---- Executor ------------------------------------------------------------------------------------

Executor::Executor(ComponentRef ref, std::string_view options_json)
    : ref_(std::move(ref)), api_(static_cast<const cotune_executor_api*>(ref_.api())) {
  {
    CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "create");
    throw_if_error(ref_.isolated ? ref_.isolated->create_executor(str(options_json), &inst_)
                                 : api_->create(host_services(), str(options_json), &inst_),
                   ref_.info.id);
  }
  if (inst_ == nullptr) throw PluginError(COTUNE_ERR_INTERNAL, ref_.info.id + ": create returned no instance");
}
Executor::~Executor() { api_->destroy(inst_); }

bool Executor::can_attach() const { return optional_fn(api_, &cotune_executor_api::attach) != nullptr; }
bool Executor::has_metrics() const { return optional_fn(api_, &cotune_executor_api::metrics) != nullptr; }
bool Executor::has_check_study() const { return optional_fn(api_, &cotune_executor_api::check_study) != nullptr; }

bool Executor::has_candidates() const {
  return optional_fn(api_, &cotune_executor_api::candidates) != nullptr;
}

std::vector<double> Executor::candidates(const cotune_trial& study) const {
  auto fn = optional_fn(api_, &cotune_executor_api::candidates);
  if (fn == nullptr) throw PluginError(COTUNE_ERR_UNSUPPORTED, ref_.info.id + ": lists no candidates");
  size_t count = 0;
  CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "candidates");
  throw_if_error(fn(inst_, &study, nullptr, 0, &count), ref_.info.id);
  std::vector<double> rows(count * study.num_params);
  size_t again = 0;
  throw_if_error(fn(inst_, &study, rows.data(), count, &again), ref_.info.id);
  if (again != count)
    throw PluginError(COTUNE_ERR_INTERNAL, ref_.info.id + ": candidates() gave " + std::to_string(count) +
                                               " rows, then " + std::to_string(again));
  return rows;
}

std::optional<std::vector<std::string>> Executor::metrics(const cotune_trial& study) const {
  auto fn = optional_fn(api_, &cotune_executor_api::metrics);
  if (fn == nullptr) return std::nullopt;
  StringSink s;
  CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "metrics");
  throw_if_error(fn(inst_, &study, &s.sink), ref_.info.id);
  return metric_names(s.data, ref_.info.id);
}

void Executor::check_study(const cotune_trial& study) const {
  auto fn = optional_fn(api_, &cotune_executor_api::check_study);
  if (fn == nullptr) return;
  CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "check_study");
  throw_if_error(fn(inst_, &study), ref_.info.id);
}

int32_t Executor::capacity() const {
  int32_t c = 1;
  CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "capacity");
  throw_if_error(api_->capacity(inst_, &c), ref_.info.id);
  return c < 1 ? 1 : c;
}

std::unique_ptr<Executor::Job> Executor::submit(const cotune_trial& trial) {
  cotune_job* job = nullptr;
  CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "submit");
  throw_if_error(api_->submit(inst_, &trial, &job), ref_.info.id);
  if (job == nullptr) throw PluginError(COTUNE_ERR_INTERNAL, ref_.info.id + ": submit returned no job");
  return std::unique_ptr<Job>(new Job(this, job));
}

std::unique_ptr<Executor::Job> Executor::attach(const cotune_trial& trial, std::string_view external_id) {
  auto fn = optional_fn(api_, &cotune_executor_api::attach);
  if (fn == nullptr) throw PluginError(COTUNE_ERR_UNSUPPORTED, ref_.info.id + ": cannot re-attach to jobs");
  cotune_job* job = nullptr;
  CallWatch::Scope watch(CallKind::kExecutor, ref_.info.id, "attach");
  throw_if_error(fn(inst_, &trial, str(external_id), &job), ref_.info.id);
  if (job == nullptr) throw PluginError(COTUNE_ERR_INTERNAL, ref_.info.id + ": attach returned no job");
  return std::unique_ptr<Job>(new Job(this, job));
}

Executor::Job::~Job() { owner_->api_->release(owner_->inst_, job_); }

TrialResult Executor::Job::poll(int32_t timeout_ms) {
  cotune_trial_result r{};
  r.struct_size = COTUNE_STRUCT_SIZE(cotune_trial_result, external_id);
  CallWatch::Scope watch(CallKind::kExecutor, owner_->ref_.info.id, "poll");
  throw_if_error(owner_->api_->poll(owner_->inst_, job_, timeout_ms, &r), owner_->ref_.info.id);
  TrialResult t;
  t.status = r.status;
  t.attempts = r.attempts;
  t.metrics_json = std::string(view(r.metrics_json));
  t.error = std::string(view(r.error));
  t.log_path = std::string(view(r.log_path));
  t.external_id = std::string(view(r.external_id));
  return t;
}

void Executor::Job::cancel() {
  CallWatch::Scope watch(CallKind::kExecutor, owner_->ref_.info.id, "cancel");
  throw_if_error(owner_->api_->cancel(owner_->inst_, job_), owner_->ref_.info.id);
}

}  // namespace cotune::core
