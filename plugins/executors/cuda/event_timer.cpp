// CUDA-event timing (see event_timer.hpp).
#include "event_timer.hpp"

#include "device.hpp"

#include <algorithm>
#include <cmath>
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

// Owns an instantiated graph of `launches` runs of `enqueue`; empty when the work cannot be
// captured (the stream is left as it was, and the error cleared).
struct CapturedRuns {
  cudaGraphExec_t exec = nullptr;
  CapturedRuns(cudaStream_t stream, int launches, const std::function<void()>& enqueue) {
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    bool enqueued = true;
    try {
      for (int i = 0; i < launches; ++i) enqueue();
    } catch (const std::exception&) {
      enqueued = false;
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    if (enqueued && ended == cudaSuccess && graph != nullptr && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
      exec = nullptr;
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
  }
  ~CapturedRuns() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
  CapturedRuns(const CapturedRuns&) = delete;
  CapturedRuns& operator=(const CapturedRuns&) = delete;
};

}  // namespace

double median_seconds(cudaStream_t stream, const TimingOptions& options, const std::function<void()>& enqueue) {
  EventPair events;
  auto elapsed = [&](const std::function<void()>& work) {
    check_cuda(cudaEventRecord(events.start, stream), "cudaEventRecord");
    work();
    check_cuda(cudaEventRecord(events.stop, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(events.stop), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, events.start, events.stop), "cudaEventElapsedTime");
    return ms * 1e-3;
  };

  // The warm-up's last run, timed alone, sizes the samples; it over-estimates a short kernel.
  for (int i = 1; i < options.warmup; ++i) enqueue();
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (warm-up)");
  const double single = elapsed(enqueue);
  const int launches = single >= kMinSampleSeconds ? 1
                       : std::min(kMaxLaunchesPerSample, static_cast<int>(std::ceil(kMinSampleSeconds / std::max(single, 1e-7))));

  const CapturedRuns graph(stream, launches, enqueue);
  const std::function<void()> sample = [&] {
    if (graph.exec != nullptr) {
      check_cuda(cudaGraphLaunch(graph.exec, stream), "cudaGraphLaunch");
    } else {
      for (int i = 0; i < launches; ++i) enqueue();
    }
  };
  if (graph.exec != nullptr) elapsed(sample);  // the graph's first launch uploads it

  std::vector<double> seconds;
  const int repeats = std::max(1, options.repeats);
  for (int i = 0; i < repeats; ++i) seconds.push_back(elapsed(sample) / launches);
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace cotune_cuda
