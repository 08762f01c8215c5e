// The cuda executor (see cuda_executor.hpp).
#include "cuda_executor.hpp"

#include "attention_timer.hpp"
#include "bandwidth.hpp"
#include "gemm_timer.hpp"
#include "memory_check.hpp"

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace cotune_cuda {

// A stream and the timers on an opened device; created on the first trial.
class DeviceSession {
 public:
  DeviceSession(DeviceInfo info, const TimingOptions& timing) : info_(std::move(info)) {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    try {
      gemm_ = std::make_unique<GemmTimer>(stream_, timing);
      attention_ = std::make_unique<AttentionTimer>(stream_, timing);
    } catch (...) {
      gemm_.reset();
      attention_.reset();
      cudaStreamDestroy(stream_);
      throw;
    }
    timing_ = timing;
  }
  ~DeviceSession() {
    gemm_.reset();
    attention_.reset();
    cudaStreamDestroy(stream_);
  }
  DeviceSession(const DeviceSession&) = delete;
  DeviceSession& operator=(const DeviceSession&) = delete;

  const DeviceInfo& info() const { return info_; }
  double time(const Measurement& m) {
    switch (m.kind) {
      case MeasureKind::kGemm: return gemm_->time(m);
      case MeasureKind::kAttentionForward:
      case MeasureKind::kAttentionBackward: return attention_->time(m);
      case MeasureKind::kMemory: return time_memory(m, stream_, timing_);
    }
    throw std::logic_error("unknown measurement kind");
  }

 private:
  DeviceInfo info_;
  cudaStream_t stream_ = nullptr;
  TimingOptions timing_;
  std::unique_ptr<GemmTimer> gemm_;
  std::unique_ptr<AttentionTimer> attention_;
};

namespace {

const char* const kGroupNames[COTUNE_GROUP_COUNT] = {"none", "tp", "cp", "ep", "pp", "dp", "emb"};

double memory_total(const cotune_memory& m) {
  return m.weights + m.gradients + m.optimizer + m.activations + m.buffers;
}

const char* op_class(int32_t kind) {
  switch (kind) {
    case COTUNE_OP_GEMM: return "gemm";
    case COTUNE_OP_ATTENTION: return "attention";
    default: return "memory";
  }
}

}  // namespace

CudaExecutor::CudaExecutor(std::string_view options_json) {
  try {
    options_ = parse_cuda_options(options_json);
  } catch (const std::invalid_argument& e) {
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, e.what());
  }
}

CudaExecutor::~CudaExecutor() = default;

DeviceSession& CudaExecutor::session() {
  if (session_) return *session_;
  try {
    session_ = std::make_unique<DeviceSession>(open_device(options_.device), options_.timing);
  } catch (const std::exception& e) {
    throw cotune::Error(COTUNE_ERR_UNAVAILABLE, std::string("cuda: no usable GPU: ") + e.what());
  }
  cotune::log(COTUNE_LOG_INFO, "org.cotune.executor.cuda",
              "measuring on " + session_->info().name + " (" + session_->info().arch() + ")");
  return *session_;
}

double CudaExecutor::measure(const Measurement& m) {
  const std::string key = session_->info().name + "/" + m.key();
  auto found = cache_.find(key);
  if (found != cache_.end()) return found->second;
  const double seconds = session_->time(m);
  cache_.emplace(key, seconds);
  return seconds;
}

std::unique_ptr<CudaExecutor::Job> CudaExecutor::submit(const cotune_trial& trial) {
  // COTUNE_STRUCT_SIZE adds the size of the field `trace`, which is a pointer: that size is meant.
  // NOLINTNEXTLINE(bugprone-sizeof-expression)
  if (trial.struct_size < COTUNE_STRUCT_SIZE(cotune_trial, trace) || trial.trace == nullptr)
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT,
                        "cuda executor: the trial has no step trace (the space must lower configurations)");
  session();  // UNAVAILABLE without a GPU: the study stops with the CUDA error text
  auto job = std::make_unique<Job>();
  job->result.attempts = 1;
  job->result.status = COTUNE_STATUS_RUNNING;
  run(*trial.trace, job->result);
  return job;
}

void CudaExecutor::run(const cotune_trace& trace, cotune::JobResult& result) {
  KernelPlan plan;
  try {
    plan = make_kernel_plan(trace, options_.limits);
  } catch (const std::invalid_argument& e) {
    throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, std::string("cuda executor: ") + e.what());
  }
  const DeviceInfo& dev = session_->info();
  for (const Measurement& m : plan.measurements) {
    if (m.kind == MeasureKind::kGemm && m.dtype == COTUNE_DTYPE_FP8 && !dev.has_fp8()) {
      result.status = COTUNE_STATUS_FAILED;
      result.error = "cuda: the trace has fp8 GEMMs but " + dev.name + " (" + dev.arch() + ") has no fp8 tensor cores";
      return;
    }
  }

  try {
    const FitResult fit = check_memory_fits(memory_total(trace.memory), options_.reserve_bytes);
    if (!fit.fits) {
      result.status = COTUNE_STATUS_OOM;
      result.error = "cuda: the configuration does not fit on " + dev.name + ": " + fit.message;
      return;
    }
    std::vector<double> seconds(plan.measurements.size());
    for (size_t i = 0; i < plan.measurements.size(); ++i) seconds[i] = measure(plan.measurements[i]);

    // A copy of the trace's ops with the measured durations; the model uses measured_s where > 0.
    std::vector<cotune_op> ops(trace.num_ops);
    for (size_t i = 0; i < trace.num_ops; ++i) {
      const cotune_op& src = trace_op(trace, i);
      std::memcpy(&ops[i], &src, std::min(src.struct_size, sizeof(cotune_op)));
    }
    double measured_compute = 0;
    std::map<std::string, double> per_class;
    for (const PlannedOp& p : plan.ops) {
      cotune_op& op = ops[p.op_index];
      op.measured_s = seconds[p.measurement] * p.scale;
      measured_compute += op.measured_s * p.runs_per_step;
      per_class[op_class(op.kind)] += op.measured_s * p.runs_per_step;
    }
    cotune_trace measured = trace;
    measured.ops = ops.data();
    measured.op_stride = sizeof(cotune_op);
    const cotune_sim_result sim = cotune::simulate(measured);

    nlohmann::json metrics = {
        {"step_time_s", sim.step_time_s},
        {"tokens_per_s", sim.tokens_per_s},
        {"tflops_per_gpu", sim.tflops_per_gpu},
        {"mfu", sim.mfu},
        {"peak_mem_gib", sim.peak_memory_bytes / double(1ull << 30)},
        {"fits", sim.fits},
        {"compute_s", sim.compute_s},
        {"bubble_s", sim.bubble_s},
        {"optimizer_s", sim.optimizer_s},
        {"cost_per_mtokens", sim.cost_per_mtokens},
        {"measured_compute_s", measured_compute},
        {"measured_ops", plan.ops.size()},
        {"modelled_ops", plan.modelled.size()},
        {"kernel_shapes", plan.measurements.size()},
        {"device", dev.name},
        {"device_arch", dev.arch()},
    };
    for (int g = 0; g < COTUNE_GROUP_COUNT; ++g)
      metrics[std::string("exposed_comm_") + kGroupNames[g] + "_s"] = sim.exposed_comm_s[g];
    for (const auto& [cls, s] : per_class) metrics["measured_" + cls + "_s"] = s;
    result.metrics_json = metrics.dump();
    result.status = COTUNE_STATUS_OK;
  } catch (const cotune::Error&) {
    throw;  // the host's model refused the trace: a bad trace, reported as the call's error
  } catch (const std::exception& e) {
    result.status = COTUNE_STATUS_FAILED;
    result.error = std::string("cuda: ") + e.what();
  }
}

const cotune::JobResult& CudaExecutor::poll(Job& job, int32_t) { return job.result; }

void CudaExecutor::cancel(Job& job) {
  // submit() runs a trial to completion, so there is never a running job left to stop.
  (void)job;
}

}  // namespace cotune_cuda
