// Timing of GPU work with CUDA events: warm-up runs, then the median of timed repeats.
#ifndef COTUNE_CUDA_EVENT_TIMER_HPP_
#define COTUNE_CUDA_EVENT_TIMER_HPP_

#include <cuda_runtime.h>

#include <functional>

namespace cotune_cuda {

struct TimingOptions {
  int warmup = 3;
  int repeats = 10;
};

// Seconds of one run of `enqueue` (which enqueues its work on `stream`): the median over
// options.repeats runs, each between two events, after options.warmup untimed runs.
double median_seconds(cudaStream_t stream, const TimingOptions& options, const std::function<void()>& enqueue);

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_EVENT_TIMER_HPP_
