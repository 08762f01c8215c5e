// The local GPU: probing it, and CUDA errors as exceptions with the runtime's own text.
#ifndef COTUNE_CUDA_DEVICE_HPP_
#define COTUNE_CUDA_DEVICE_HPP_

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace cotune_cuda {

// A CUDA runtime call failed. what() is "<call>: <error string> (<error name>)".
class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& call, cudaError_t code);
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

// "<error string> (<error name>)", e.g. "out of memory (cudaErrorMemoryAllocation)".
std::string cuda_error_text(cudaError_t code);

// Throws CudaError when `code` is not cudaSuccess.
void check_cuda(cudaError_t code, const char* call);

struct DeviceInfo {
  int index = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int cc_major = 0, cc_minor = 0;
  double total_bytes = 0;
  int sm_count = 0;
  bool has_fp8() const { return cc_major * 10 + cc_minor >= 89; }  // Ada, Hopper and newer
  std::string arch() const { return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor); }
};

// Selects device `index` and describes it. Throws CudaError when there is no usable device
// (no driver, a driver too old for this runtime, no GPU, index out of range).
DeviceInfo open_device(int index);

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_DEVICE_HPP_
