// One configuration of the LLM space, decoded from the flat array of parameter values.
#ifndef COTUNE_PLUGINS_SPACES_LLM_CONFIG_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_CONFIG_HPP_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "recompute.hpp"

namespace cotune_llm {

// Parameter order of the space (the index of each value in a configuration array). New parameters
// go at the end: stored configurations are JSON objects, so the order is only this build's.
enum Param : size_t {
  kTp, kPp, kDp, kCp, kEp, kMicroBatch, kVpp, kZero, kRecompute, kSp, kGpus, kGpu, kEtp, kFirstStage, kLastStage,
  kRecomputeModules, kNumParams
};

enum Recompute { kRecomputeNone = 0, kRecomputeSelective = 1, kRecomputeFull = 2 };

struct Config {
  double tp = 1, pp = 1, dp = 1, cp = 1, ep = 1, micro_batch = 1, vpp = 1;
  double etp = 1;          // expert tensor parallel degree (the parameter's 0 means tp, Megatron's default)
  double first_stage = 0;  // decoder layers of the first / last pipeline rank; 0: the split rule decides
  double last_stage = 0;
  int zero = 0;
  int recompute = kRecomputeNone;
  uint32_t recompute_modules = kCoreAttn;  // what selective recomputation rebuilds (RecomputeModule bits)
  bool sp = false;
  double gpus = 1;
  int gpu = 0;  // index into the space's list of GPU types

  // `module_masks`: the space's choices of recompute_modules, as masks (the parameter's value is
  // an index into them).
  static Config decode(const double* v, const std::vector<uint32_t>& module_masks) {
    Config c;
    c.tp = v[kTp], c.pp = v[kPp], c.dp = v[kDp], c.cp = v[kCp], c.ep = v[kEp];
    c.micro_batch = v[kMicroBatch], c.vpp = v[kVpp];
    c.etp = v[kEtp] > 0 ? v[kEtp] : c.tp;
    c.first_stage = v[kFirstStage], c.last_stage = v[kLastStage];
    c.zero = static_cast<int>(v[kZero]);
    c.recompute = static_cast<int>(v[kRecompute]);
    const size_t m = static_cast<size_t>(v[kRecomputeModules]);
    c.recompute_modules = m < module_masks.size() ? module_masks[m] : kCoreAttn;
    c.sp = v[kSp] != 0;
    c.gpus = v[kGpus];
    c.gpu = static_cast<int>(v[kGpu]);
    return c;
  }
};

}  // namespace cotune_llm

#endif
