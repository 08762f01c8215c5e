// Timing of GPU work with CUDA events: warm-up runs, then the median of timed repeats.
//
// A repeat runs the work several times back to back between its two events, enough for about
// kMinSampleSeconds of GPU time, from a CUDA graph captured once: one launch between a pair of
// events would also count the host's launch latency (5-15 us for a cuBLAS call), and even back-to-
// back launches from the host run at the host's rate (about 7 us a cuBLAS call), both of which
// swamp a small kernel. The model counts the host's time apart (host_launch_us), so the GPU's own
// time is what is measured. Work that cannot be captured is launched back to back instead.
#ifndef COTUNE_CUDA_EVENT_TIMER_HPP_
#define COTUNE_CUDA_EVENT_TIMER_HPP_

#include <cuda_runtime.h>

#include <functional>

namespace cotune_cuda {

struct TimingOptions {
  int warmup = 3;
  int repeats = 10;
};

constexpr double kMinSampleSeconds = 1e-3;
constexpr int kMaxLaunchesPerSample = 1000;

// Seconds of one run of `enqueue` (which enqueues its work on `stream`): the median over
// options.repeats samples, each the mean of the runs enqueued back to back between two events,
// after options.warmup untimed runs (at least one, which also sizes the samples).
double median_seconds(cudaStream_t stream, const TimingOptions& options, const std::function<void()>& enqueue);

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_EVENT_TIMER_HPP_
