// Memory-bound op timing (see bandwidth.hpp); the copy kernel itself is in kernels.cu.
#include "bandwidth.hpp"

#include "device_buffer.hpp"
#include "kernels.hpp"

namespace cotune_cuda {

double time_memory(const Measurement& m, cudaStream_t stream, const TimingOptions& options) {
  const size_t half = static_cast<size_t>(m.bytes / 2);
  DeviceBuffer src(half > 0 ? half : 1), dst(half > 0 ? half : 1);
  check_cuda(cudaMemsetAsync(src.get(), 1, src.bytes(), stream), "cudaMemsetAsync");
  return median_seconds(stream, options,
                        [&] { check_cuda(launch_copy(src.get(), dst.get(), half, stream), "copy kernel"); });
}

}  // namespace cotune_cuda
