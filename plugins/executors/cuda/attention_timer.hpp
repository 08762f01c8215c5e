// Times attention as the unfused sequence: batched GEMM (scores), softmax, batched GEMM (output);
// the backward as the softmax backward between four batched GEMMs (dV, dP, dQ, dK).
#ifndef COTUNE_CUDA_ATTENTION_TIMER_HPP_
#define COTUNE_CUDA_ATTENTION_TIMER_HPP_

#include "event_timer.hpp"
#include "kernel_plan.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace cotune_cuda {

class AttentionTimer {
 public:
  AttentionTimer(cudaStream_t stream, const TimingOptions& options);
  ~AttentionTimer();
  AttentionTimer(const AttentionTimer&) = delete;
  AttentionTimer& operator=(const AttentionTimer&) = delete;

  // Seconds of one run of the attention measurement `m` (forward or backward).
  double time(const Measurement& m);

 private:
  cudaStream_t stream_;
  TimingOptions options_;
  cublasHandle_t handle_ = nullptr;
};

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_ATTENTION_TIMER_HPP_
