// Times memory-bound work as a device-to-device copy kernel moving the op's bytes.
#ifndef COTUNE_CUDA_BANDWIDTH_HPP_
#define COTUNE_CUDA_BANDWIDTH_HPP_

#include "event_timer.hpp"
#include "kernel_plan.hpp"

#include <cuda_runtime.h>

namespace cotune_cuda {

// Seconds of one run of the memory measurement `m`: a copy reading m.bytes / 2 and writing m.bytes / 2.
double time_memory(const Measurement& m, cudaStream_t stream, const TimingOptions& options);

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_BANDWIDTH_HPP_
