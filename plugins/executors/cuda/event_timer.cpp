// CUDA-event timing (see event_timer.hpp).
#include "event_timer.hpp"

#include "device.hpp"

#include <algorithm>
#include <vector>

namespace cotune_cuda {
namespace {

// Owns a start/stop event pair.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    check_cuda(cudaEventCreate(&start), "cudaEventCreate");
    cudaError_t e = cudaEventCreate(&stop);
    if (e != cudaSuccess) {
      cudaEventDestroy(start);
      check_cuda(e, "cudaEventCreate");
    }
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

}  // namespace

double median_seconds(cudaStream_t stream, const TimingOptions& options, const std::function<void()>& enqueue) {
  for (int i = 0; i < options.warmup; ++i) enqueue();
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (warm-up)");

  EventPair events;
  std::vector<double> seconds;
  const int repeats = std::max(1, options.repeats);
  for (int i = 0; i < repeats; ++i) {
    check_cuda(cudaEventRecord(events.start, stream), "cudaEventRecord");
    enqueue();
    check_cuda(cudaEventRecord(events.stop, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(events.stop), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, events.start, events.stop), "cudaEventElapsedTime");
    seconds.push_back(ms * 1e-3);
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace cotune_cuda
