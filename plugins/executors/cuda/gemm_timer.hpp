// Times GEMMs of a kernel plan with cuBLASLt (TN layout, fp32 accumulation; fp8 writes bf16).
#ifndef COTUNE_CUDA_GEMM_TIMER_HPP_
#define COTUNE_CUDA_GEMM_TIMER_HPP_

#include "device_buffer.hpp"
#include "event_timer.hpp"
#include "kernel_plan.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace cotune_cuda {

class GemmTimer {
 public:
  GemmTimer(cudaStream_t stream, const TimingOptions& options);
  ~GemmTimer();
  GemmTimer(const GemmTimer&) = delete;
  GemmTimer& operator=(const GemmTimer&) = delete;

  // Seconds of one run of the GEMM `m` (kind gemm). Throws CudaError / std::runtime_error.
  double time(const Measurement& m);

 private:
  cudaStream_t stream_;
  TimingOptions options_;
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
};

// Throws std::runtime_error "<call>: cuBLAS status <name>" when status is not success.
void check_cublas(int status, const char* call);

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_GEMM_TIMER_HPP_
