// One configuration of the LLM space, decoded from the flat array of parameter values.
#ifndef COTUNE_PLUGINS_SPACES_LLM_CONFIG_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_CONFIG_HPP_

#include <cstddef>

namespace cotune_llm {

// Parameter order of the space (the index of each value in a configuration array).
enum Param : size_t { kTp, kPp, kDp, kCp, kEp, kMicroBatch, kVpp, kZero, kRecompute, kSp, kGpus, kGpu, kNumParams };

enum Recompute { kRecomputeNone = 0, kRecomputeSelective = 1, kRecomputeFull = 2 };

struct Config {
  double tp = 1, pp = 1, dp = 1, cp = 1, ep = 1, micro_batch = 1, vpp = 1;
  int zero = 0;
  int recompute = kRecomputeNone;
  bool sp = false;
  double gpus = 1;
  int gpu = 0;  // index into the space's list of GPU types

  static Config decode(const double* v) {
    Config c;
    c.tp = v[kTp], c.pp = v[kPp], c.dp = v[kDp], c.cp = v[kCp], c.ep = v[kEp];
    c.micro_batch = v[kMicroBatch], c.vpp = v[kVpp];
    c.zero = static_cast<int>(v[kZero]);
    c.recompute = static_cast<int>(v[kRecompute]);
    c.sp = v[kSp] != 0;
    c.gpus = v[kGpus];
    c.gpu = static_cast<int>(v[kGpu]);
    return c;
  }
};

}  // namespace cotune_llm

#endif
