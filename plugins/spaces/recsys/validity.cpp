// Constraint checks and planning of one configuration (see validity.hpp).
#include "validity.hpp"

#include <cmath>
#include <cstdio>

#include "memory.hpp"

namespace cotune_recsys {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / 1073741824.0);
  return buf;
}

bool fail(std::string* why, const std::string& reason) {
  if (why != nullptr) *why = reason;
  return false;
}

}  // namespace

bool plan_config(const Workload& w, const Config& c, const cotune_hardware& hw, Plan& plan, std::string* why) {
  plan.ok = false;
  const double gpn = hw.gpus_per_node;
  if (c.gpus > gpn && std::fmod(c.gpus, gpn) != 0)
    return fail(why, "gpus = " + num(c.gpus) + " does not fill whole nodes of " + num(gpn) + " GPUs");
  const double per_step = c.batch_per_gpu * c.gpus;
  if (std::fmod(w.training.global_batch, per_step) != 0)
    return fail(why, "global_batch " + num(w.training.global_batch) + " is not a multiple of batch_per_gpu * gpus = " +
                         num(c.batch_per_gpu) + " * " + num(c.gpus) + " = " + num(per_step));
  const cotune_memory dense = dense_memory(w, c);
  const double used = total(dense);
  if (used > hw.hbm_bytes)
    return fail(why, "the dense part, activations and buffers need " + gib(used) + " per GPU, more than the " +
                         gib(hw.hbm_bytes) + " of HBM (smaller batch_per_gpu or dense_parallel fsdp)");
  PlanTarget target;
  target.gpus = c.gpus;
  target.gpus_per_node = gpn;
  target.hbm_budget = hw.hbm_bytes - used;
  target.host_bytes_per_node = w.host_bytes_per_node >= 0 ? w.host_bytes_per_node : hw.host_bytes_per_node;
  target.host_cost_factor = hw.hbm_bytes_per_s / w.host_link_bytes_per_s;
  make_plan(w, c, target, plan);
  if (!plan.ok) return fail(why, plan.why);
  return true;
}

}  // namespace cotune_recsys
