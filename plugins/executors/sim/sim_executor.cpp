// The sim executor: answers a trial from the performance model (through the host's
// simulate_trace), reports `oom` with the memory breakdown when the trace's peak memory does not
// fit, and can add seeded multiplicative noise that is the same for the same configuration and
// seed, so reruns are reproducible. Option "hardware" times the trials on a machine whose constants
// (memory included) differ from the workload's description.
#include <cotune/cotune.h>
#include <cotune/cotune.hpp>
#include <cotune/support/likely_meant.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace cotune_sim {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& msg) { throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, msg); }

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", bytes / 1073741824.0);
  return buf;
}

// FNV-1a over the configuration, so that each configuration draws its own noise.
uint64_t fingerprint(std::string_view s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

class SimExecutor {
 public:
  struct Job {
    cotune::JobResult result;
  };

  explicit SimExecutor(std::string_view options_json) {
    json o;
    try {
      o = options_json.empty() ? json::object() : json::parse(options_json);
    } catch (const std::exception& e) {
      bad(std::string("sim executor options: not valid JSON: ") + e.what());
    }
    if (!o.is_object()) bad("sim executor options: expected a JSON object");
    for (auto it = o.begin(); it != o.end(); ++it) {
      const json& v = it.value();
      if (it.key() == "noise") {
        if (!v.is_number() || v.get<double>() < 0 || v.get<double>() >= 1)
          bad("sim executor options/noise: expected a relative standard deviation in [0, 1), got " + v.dump());
        noise_ = v.get<double>();
      } else if (it.key() == "seed") {
        if (!v.is_number_integer() || v.get<int64_t>() < 0)
          bad("sim executor options/seed: expected a non-negative integer, got " + v.dump());
        seed_ = v.get<uint64_t>();
      } else if (it.key() == "hardware") {
        parse_hardware(v);
      } else {
        bad("sim executor options/" + it.key() + ": unknown option" +
            cotune::support::did_you_mean(it.key(), {"noise", "seed", "hardware"}) + " (expected noise, seed, hardware)");
      }
    }
  }

  // Every metric a result carries (metrics() below; cost_per_mtokens when the cluster has a price).
  std::vector<std::string> metrics(const cotune_trial&) const {
    return {"step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "peak_mem_gib", "gpus", "cost_per_mtokens"};
  }
  int32_t capacity() { return 1024; }

  std::unique_ptr<Job> submit(const cotune_trial& trial) {
    auto job = std::make_unique<Job>();
    job->result.attempts = 1;
    if (trial.trace == nullptr)
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT,
                          "the sim executor needs a step trace: use a space that lowers configurations (e.g. llm)");
    const cotune_trace& trace = *trial.trace;
    const cotune_trace timed = overrides_.empty() ? trace : retimed(trace);
    const cotune_sim_result r = cotune::simulate(timed);
    if (!r.fits) {
      const cotune_memory& m = trace.memory;
      job->result.status = COTUNE_STATUS_OOM;
      job->result.error = "out of memory: needs " + gib(r.peak_memory_bytes) + " GiB per GPU but the " +
                          std::string(cotune::view(timed.hardware.gpu_name)) + " has " + gib(timed.hardware.hbm_bytes) +
                          " GiB (weights " + gib(m.weights) + ", gradients " + gib(m.gradients) + ", optimizer state " +
                          gib(m.optimizer) + ", activations " + gib(m.activations) + ", buffers " + gib(m.buffers) +
                          " GiB)";
      return job;
    }
    double factor = 1;
    if (noise_ > 0) {
      std::mt19937_64 rng(fingerprint(cotune::view(trial.config_json), seed_));
      factor = std::exp(noise_ * std::normal_distribution<double>(0, 1)(rng));
    }
    job->result.status = COTUNE_STATUS_OK;
    job->result.metrics_json = metrics(r, trace, factor);
    return job;
  }

  const cotune::JobResult& poll(Job& job, int32_t) { return job.result; }
  void cancel(Job&) {}  // trials finish inside submit(); there is nothing left to stop

 private:
  static std::string metrics(const cotune_sim_result& r, const cotune_trace& t, double factor) {
    static const char* const groups[COTUNE_GROUP_COUNT] = {"other", "tp", "cp", "ep", "pp", "dp", "emb"};
    json exposed = json::object();
    for (int g = 0; g < COTUNE_GROUP_COUNT; ++g)
      if (r.exposed_comm_s[g] > 0) exposed[groups[g]] = r.exposed_comm_s[g] * factor;
    json m = {{"step_time_s", r.step_time_s * factor},
              {"tokens_per_s", r.tokens_per_s / factor},
              {"tflops_per_gpu", r.tflops_per_gpu / factor},
              {"mfu", r.mfu / factor},
              {"peak_mem_gib", r.peak_memory_bytes / 1073741824.0},
              {"gpus", t.gpus},
              {"breakdown",
               {{"compute_s", r.compute_s * factor},
                {"bubble_s", r.bubble_s * factor},
                {"optimizer_s", r.optimizer_s * factor},
                {"exposed_comm_s", exposed},
                {"memory_gib",
                 {{"weights", t.memory.weights / 1073741824.0},
                  {"gradients", t.memory.gradients / 1073741824.0},
                  {"optimizer", t.memory.optimizer / 1073741824.0},
                  {"activations", t.memory.activations / 1073741824.0},
                  {"buffers", t.memory.buffers / 1073741824.0}}}}}};
    if (r.cost_per_mtokens > 0) m["cost_per_mtokens"] = r.cost_per_mtokens * factor;
    return m.dump();
  }

  // "hardware": constants of the machine the trials run on where it differs from the workload's
  // description (a GPU or software stack the catalogue does not describe exactly), so that a study
  // can be tried against a machine its model does not know.
  struct Override {
    const char* name;
    double cotune_hardware::*field;
    double scale;  // option units to the field's
    double low, high;
  };
  static const std::vector<Override>& overrides() {
    static const std::vector<Override> o = {
        {"gemm_efficiency_max", &cotune_hardware::gemm_efficiency_max, 1, 1e-3, 1},
        {"gemm_efficiency_fp8", &cotune_hardware::gemm_efficiency_fp8, 1, 1e-3, 1},
        {"grouped_gemm_efficiency", &cotune_hardware::grouped_gemm_efficiency, 1, 1e-3, 10},
        {"block_scaled_gemm_efficiency", &cotune_hardware::block_scaled_gemm_efficiency, 1, 1e-3, 1},
        {"attention_efficiency", &cotune_hardware::attention_efficiency, 1, 1e-3, 1},
        {"memory_efficiency", &cotune_hardware::memory_efficiency, 1, 1e-3, 1},
        {"network_efficiency", &cotune_hardware::network_efficiency, 1, 1e-3, 1},
        {"kernel_launch_us", &cotune_hardware::kernel_launch_s, 1e-6, 0, 1e4},
        {"host_launch_us", &cotune_hardware::host_launch_s, 1e-6, 0, 1e4},
        // The memory a job can use: less than the catalogue's where a framework or allocator keeps
        // more than the space's memory estimate counts, so that layouts the space accepts run out.
        {"hbm_gib", &cotune_hardware::hbm_bytes, 1073741824.0, 1, 1e5}};
    return o;
  }

  void parse_hardware(const json& v) {
    std::string names;
    std::vector<std::string> known;
    for (const Override& o : overrides()) {
      names += (names.empty() ? "" : ", ") + std::string(o.name);
      known.emplace_back(o.name);
    }
    if (!v.is_object()) bad("sim executor options/hardware: expected an object of " + names);
    for (auto it = v.begin(); it != v.end(); ++it) {
      const Override* found = nullptr;
      for (const Override& o : overrides())
        if (it.key() == o.name) found = &o;
      if (found == nullptr)
        bad("sim executor options/hardware/" + it.key() + ": unknown field" +
            cotune::support::did_you_mean(it.key(), known) + " (expected " + names + ")");
      const json& x = it.value();
      if (!x.is_number() || x.get<double>() < found->low || x.get<double>() > found->high)
        bad("sim executor options/hardware/" + it.key() + ": expected a number in [" + json(found->low).dump() + ", " +
            json(found->high).dump() + "], got " + x.dump());
      overrides_.emplace_back(found, x.get<double>() * found->scale);
    }
  }

  // The trace with the overridden constants (its struct copied; the ops stay the host's). Every
  // level's network efficiency follows network_efficiency.
  cotune_trace retimed(const cotune_trace& trace) const {
    cotune_trace t{};
    std::memcpy(&t, &trace, std::min(trace.struct_size, sizeof t));
    for (const auto& [o, value] : overrides_) {
      t.hardware.*(o->field) = value;
      if (o->field == &cotune_hardware::network_efficiency)
        for (double& e : t.hardware.net_efficiency) e = value;
    }
    // The whole struct from here on: a space built against an older SDK lowers a smaller one, whose
    // tail (zero: each field's default) would hide an override of a field appended since.
    if (!overrides_.empty()) {
      t.struct_size = sizeof t;
      t.hardware.struct_size = sizeof t.hardware;
    }
    return t;
  }

  double noise_ = 0;
  uint64_t seed_ = 1;
  std::vector<std::pair<const Override*, double>> overrides_;
};

}  // namespace cotune_sim

COTUNE_PLUGIN(cotune::executor<cotune_sim::SimExecutor>({"org.cotune.executor.sim", "sim",
                                                          "Answers trials from the analytic performance model.",
                                                          "1.0.0",
                                                          COTUNE_CAP_NEEDS_TRACE | COTUNE_CAP_THREAD_SAFE}))
