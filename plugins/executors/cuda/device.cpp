// Probing the local GPU through the CUDA runtime.
#include "device.hpp"

namespace cotune_cuda {

std::string cuda_error_text(cudaError_t code) {
  return std::string(cudaGetErrorString(code)) + " (" + cudaGetErrorName(code) + ")";
}

CudaError::CudaError(const std::string& call, cudaError_t code)
    : std::runtime_error(call + ": " + cuda_error_text(code)), code_(code) {}

void check_cuda(cudaError_t code, const char* call) {
  if (code != cudaSuccess) {
    cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
    throw CudaError(call, code);
  }
}

DeviceInfo open_device(int index) {
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (index < 0 || index >= count)
    throw CudaError("device " + std::to_string(index) + " of " + std::to_string(count), cudaErrorInvalidDevice);
  check_cuda(cudaSetDevice(index), "cudaSetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  DeviceInfo info;
  info.index = index;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.total_bytes = static_cast<double>(prop.totalGlobalMem);
  info.sm_count = prop.multiProcessorCount;
  return info;
}

}  // namespace cotune_cuda
