// The cuda executor: measures a trial's compute ops on the local GPU and lets the performance model
// (through the host) add communication, overlap and the pipeline schedule.
#ifndef COTUNE_CUDA_CUDA_EXECUTOR_HPP_
#define COTUNE_CUDA_CUDA_EXECUTOR_HPP_

#include "cuda_options.hpp"
#include "kernel_plan.hpp"
#include "device.hpp"

#include <cotune/cotune.hpp>

#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace cotune_cuda {

class DeviceSession;  // stream and timers on an opened device (cuda_executor.cpp)

class CudaExecutor {
 public:
  struct Job {
    cotune::JobResult result;
  };

  explicit CudaExecutor(std::string_view options_json);
  ~CudaExecutor();

  int32_t capacity() const { return 1; }  // one GPU, one trial at a time
  // Runs the trial to completion (the GPU work takes seconds). Throws cotune::Error UNAVAILABLE
  // when there is no usable GPU, INVALID_ARGUMENT when the trial has no (or a malformed) trace.
  std::unique_ptr<Job> submit(const cotune_trial& trial);
  const cotune::JobResult& poll(Job& job, int32_t timeout_ms);
  void cancel(Job& job);

 private:
  DeviceSession& session();
  double measure(const Measurement& m);
  void run(const cotune_trace& trace, cotune::JobResult& result);

  CudaOptions options_;
  std::unique_ptr<DeviceSession> session_;
  std::map<std::string, double> cache_;  // "<device>/<measurement key>" -> seconds per run
};

}  // namespace cotune_cuda

#endif  // COTUNE_CUDA_CUDA_EXECUTOR_HPP_
