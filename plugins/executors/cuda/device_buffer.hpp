// An owned device allocation (cudaMalloc / cudaFree).
#ifndef COTUNE_CUDA_DEVICE_BUFFER_HPP_
#define COTUNE_CUDA_DEVICE_BUFFER_HPP_

#include "device.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

namespace cotune_cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) check_cuda(cudaMalloc(&ptr_, bytes), ("cudaMalloc(" + std::to_string(bytes) + " bytes)").c_str());
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_DEVICE_BUFFER_HPP_
