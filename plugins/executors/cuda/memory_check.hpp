// Checks that a configuration fits the GPU by allocating its peak memory plus the framework's reserve.
#ifndef COTUNE_CUDA_MEMORY_CHECK_HPP_
#define COTUNE_CUDA_MEMORY_CHECK_HPP_

#include <string>

namespace cotune_cuda {

struct FitResult {
  bool fits = false;
  double needed_bytes = 0;
  double free_bytes = 0;   // free on the device before the attempt
  std::string message;     // why not, when it does not fit
};

// Tries cudaMalloc(peak_bytes + reserve_bytes) on the current device and frees it again. An
// allocation failure is "does not fit"; any other CUDA error throws CudaError.
FitResult check_memory_fits(double peak_bytes, double reserve_bytes);

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_MEMORY_CHECK_HPP_
