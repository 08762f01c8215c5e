// Options of the cuda executor (the study's executor options object).
#ifndef COTUNE_CUDA_CUDA_OPTIONS_HPP_
#define COTUNE_CUDA_CUDA_OPTIONS_HPP_

#include "event_timer.hpp"
#include "kernel_plan.hpp"

#include <string_view>

namespace cotune_cuda {

struct CudaOptions {
  int device = 0;                 // CUDA device index
  TimingOptions timing;           // "warmup", "repeats"
  double reserve_bytes = 1.0 * (1ull << 30);  // "reserve_gib": CUDA context and framework allocator
  PlanLimits limits;              // "max_measurement_gib"
};

// Parses {"device": 0, "warmup": 3, "repeats": 10, "reserve_gib": 1, "max_measurement_gib": 4}
// (every field optional). Throws std::invalid_argument naming the field and what was expected.
CudaOptions parse_cuda_options(std::string_view json);

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_CUDA_OPTIONS_HPP_
