// A search space for a single-model data-parallel job: the smallest useful space plugin, written
// against the installed SDK alone. Teams start their in-house model's space from this file.
//
// Workload JSON: {"global_batch": 256, "params_billion": 1.3, "activation_gib_per_sample": 0.8,
//                 "gpu_memory_gib": 80}
#include <cotune/cotune.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {

class DdpSpace {
 public:
  DdpSpace(std::string_view workload, std::string_view /*options*/) {
    global_batch_ = cotune::json_number(workload, "/global_batch");
    params_b_ = cotune::json_number(workload, "/params_billion");
    act_gib_ = cotune::json_number(workload, "/activation_gib_per_sample");
    mem_gib_ = cotune::json_number(workload, "/gpu_memory_gib");
    if (!(global_batch_ >= 1) || !(params_b_ > 0) || !(act_gib_ >= 0) || !(mem_gib_ > 0))
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, "workload: sizes must be positive");
    params_.add_int("gpus", {1, 2, 4, 8}, 8, "GPUs", "Data-parallel replicas.");
    params_.add_int("micro_batch", {1, 2, 4, 8, 16, 32}, 4, "sequences", "Samples per GPU per micro-step.");
    params_.add_bool("checkpointing", false, "Recompute activations in backward to save memory.");
    features_ = {"gpus", "micro_batch", "checkpointing", "accumulation_steps", "memory_gib"};
  }

  const cotune::ParamList& params() const { return params_; }
  const std::vector<std::string>& feature_names() const { return features_; }

  void check(const double* c, size_t n, int32_t* valid) {
    for (size_t i = 0; i < n; ++i) valid[i] = explain(c + i * 3).empty() ? 1 : 0;
  }

  std::string explain(const double* c) {
    const double per_step = c[0] * c[1];
    if (std::fmod(global_batch_, per_step) != 0) return "global batch is not a multiple of gpus * micro_batch";
    if (memory_gib(c) > mem_gib_) return "memory " + std::to_string(memory_gib(c)) + " GiB exceeds the GPU";
    return "";
  }

  size_t sample(uint64_t seed, size_t n, double* out) {
    std::mt19937_64 rng(seed);
    size_t found = 0;
    for (size_t tries = 0; found < n && tries < n * 100; ++tries) {
      double* c = out + found * 3;
      for (size_t p = 0; p < 3; ++p) {
        const cotune_param& param = params_[p];
        c[p] = param.num_values ? param.values[rng() % param.num_values] : double(rng() % 2);
      }
      if (explain(c).empty()) ++found;
    }
    return found;
  }

  void featurize(const double* c, size_t n, double* out) {
    for (size_t i = 0; i < n; ++i, c += 3, out += 5) {
      out[0] = c[0];
      out[1] = c[1];
      out[2] = c[2];
      out[3] = global_batch_ / (c[0] * c[1]);
      out[4] = memory_gib(c);
    }
  }

  std::string render(const double* c, int32_t format) {
    if (format != COTUNE_RENDER_JSON) throw cotune::Error(COTUNE_ERR_UNSUPPORTED, "only JSON");
    return "{\"gpus\": " + std::to_string(int(c[0])) + ", \"micro_batch\": " + std::to_string(int(c[1])) +
           ", \"checkpointing\": " + (c[2] != 0 ? "true" : "false") + "}";
  }

 private:
  // Weights, gradients and Adam state in mixed precision: 16 bytes per parameter; activations
  // shrink to one layer's worth (about a tenth here) with checkpointing.
  double memory_gib(const double* c) const {
    const double states = params_b_ * 16;
    const double activations = act_gib_ * c[1] * (c[2] != 0 ? 0.1 : 1.0);
    return states + activations;
  }

  double global_batch_, params_b_, act_gib_, mem_gib_;
  cotune::ParamList params_;
  std::vector<std::string> features_;
};

}  // namespace

COTUNE_PLUGIN(cotune::space<DdpSpace>({"org.example.space.ddp", "ddp",
                                       "Data-parallel job: GPUs, micro-batch, checkpointing.", "0.1.0"}))
