// The cuda executor plugin through the real Registry. Without a usable GPU (this machine: the CUDA
// runtime answers cudaErrorInsufficientDriver) it must load, and a trial must fail with the CUDA
// runtime's own error text; the GPU cases skip, naming that error. With a GPU: a Llama-3 8B trial
// gets sane measured metrics, a large GEMM runs within sane bounds of peak, and the memory check
// reports a configuration that cannot fit as oom.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <string>
#include <vector>

using cotune::core::Executor;
using cotune::core::PluginError;
using cotune::core::Registry;
using nlohmann::json;
using ::testing::HasSubstr;

namespace {

constexpr const char* kCudaPlugin = COTUNE_PLUGIN_DIR "/libcotune-executor-cuda.so";
constexpr const char* kLlmPlugin = COTUNE_PLUGIN_DIR "/libcotune-space-llm.so";

// cudaSuccess when a GPU is usable; otherwise the runtime's error.
cudaError_t probe_gpu(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = std::string("no usable GPU: cudaGetDeviceCount: ") + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
    return e;
  }
  if (count == 0) {
    *why = "no usable GPU: cudaGetDeviceCount found none";
    return cudaErrorNoDevice;
  }
  return cudaSuccess;
}

cotune_trial trial_for(const cotune_trace* trace) {
  cotune_trial t{};
  t.struct_size = COTUNE_STRUCT_SIZE(cotune_trial, config);
  static const char id[] = "cuda-test/1";
  t.trial_id = cotune_str{id, sizeof(id) - 1};
  t.config_json = cotune_str{"{}", 2};
  t.workload_json = cotune_str{"{}", 2};
  t.trace = trace;
  return t;
}

json llama_workload() {
  return {{"model", {{"preset", "llama3-8b"}}},
          {"training", {{"global_batch", 64}, {"dtype", "bf16"}, {"attention", "flash"}}},
          {"cluster", {{"gpu", "h100-sxm"}, {"nodes", 1}, {"gpus_per_node", 8}}}};
}

// A trace of one op on a single GPU, timed against the H100 catalogue entry.
struct OneOpTrace {
  cotune_op op{};
  cotune_trace trace{};
  explicit OneOpTrace(const cotune_op& o) : op(o) {
    trace.struct_size = COTUNE_STRUCT_SIZE(cotune_trace, hardware);
    trace.ops = &op;
    trace.num_ops = 1;
    trace.op_stride = sizeof(cotune_op);
    trace.schedule = COTUNE_SCHEDULE_1F1B;
    trace.pipeline_stages = 1;
    trace.virtual_stages = 1;
    trace.micro_batches = 1;
    trace.tokens_per_step = 8192;
    trace.model_flops_per_gpu = 2.0 * op.m * op.n * op.k * op.count;
    trace.gpus = 1;
    trace.memory.struct_size = COTUNE_STRUCT_SIZE(cotune_memory, buffers);
    trace.hardware.struct_size = COTUNE_STRUCT_SIZE(cotune_hardware, host_bytes_per_node);
    cotune::core::perf::resolve_hardware(json{{"gpu", "h100-sxm"}, {"nodes", 1}, {"gpus_per_node", 1}},
                                         &trace.hardware);
  }
};

cotune_op big_gemm() {
  cotune_op op{};
  op.struct_size = COTUNE_STRUCT_SIZE(cotune_op, label);
  op.kind = COTUNE_OP_GEMM;
  op.phase = COTUNE_PHASE_FORWARD;
  op.depends_on = -1;
  op.dtype = COTUNE_DTYPE_BF16;
  op.count = 1;
  op.m = op.n = op.k = 8192;
  op.label = cotune_str{"gemm", 4};
  return op;
}

class CudaExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(registry_.load_file(kCudaPlugin)) << kCudaPlugin;
    gpu_ = probe_gpu(&why_);
  }
  bool has_gpu() const { return gpu_ == cudaSuccess; }
  Registry registry_;
  cudaError_t gpu_ = cudaSuccess;
  std::string why_;
};

}  // namespace

TEST_F(CudaExecutorTest, LoadsAndDescribesItself) {
  const auto& ref = registry_.find(COTUNE_KIND_EXECUTOR, "cuda");
  EXPECT_EQ(ref.info.id, "org.cotune.executor.cuda");
  EXPECT_NE(ref.info.capabilities & COTUNE_CAP_NEEDS_TRACE, 0u);
  auto executor = registry_.make_executor("cuda");  // create() works with or without a GPU
  EXPECT_TRUE(executor->needs_trace());
  EXPECT_EQ(executor->capacity(), 1);
}

TEST_F(CudaExecutorTest, RejectsBadOptionsNamingTheField) {
  try {
    registry_.make_executor("cuda", R"({"repeats": 0})");
    FAIL() << "expected an error";
  } catch (const PluginError& e) {
    EXPECT_EQ(e.code(), COTUNE_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("\"repeats\""));
  }
  try {
    registry_.make_executor("cuda", R"({"devcie": 1})");
    FAIL() << "expected an error";
  } catch (const PluginError& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown field \"devcie\""));
  }
}

TEST_F(CudaExecutorTest, RefusesATrialWithoutATrace) {
  auto executor = registry_.make_executor("cuda");
  const cotune_trial trial = trial_for(nullptr);
  try {
    executor->submit(trial);
    FAIL() << "expected an error";
  } catch (const PluginError& e) {
    EXPECT_EQ(e.code(), COTUNE_ERR_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("no step trace"));
  }
}

TEST_F(CudaExecutorTest, WithoutAGpuATrialFailsWithTheCudaError) {
  if (gpu_ == cudaSuccess) GTEST_SKIP() << "a GPU is usable here; this case is for machines without one";
  OneOpTrace t(big_gemm());
  const cotune_trial trial = trial_for(&t.trace);
  auto executor = registry_.make_executor("cuda");
  try {
    executor->submit(trial);
    FAIL() << "expected an error";
  } catch (const PluginError& e) {
    EXPECT_EQ(e.code(), COTUNE_ERR_UNAVAILABLE);
    EXPECT_THAT(e.what(), HasSubstr("cuda: no usable GPU: cudaGetDeviceCount: "));
    EXPECT_THAT(e.what(), HasSubstr(cudaGetErrorString(gpu_)));
    EXPECT_THAT(e.what(), HasSubstr(std::string("(") + cudaGetErrorName(gpu_) + ")"));
  }
}

TEST_F(CudaExecutorTest, MeasuresALlamaTrialWithSaneMetrics) {
  if (!has_gpu()) GTEST_SKIP() << why_;
  if (!registry_.load_file(kLlmPlugin)) GTEST_SKIP() << "the llm space plugin is not built";
  auto space = registry_.make_space("llm", llama_workload().dump());
  const auto config = space->parse(R"({"tp": 8, "pp": 1, "micro_batch": 1})");
  const cotune_trace& trace = space->lower(config.data());
  auto executor = registry_.make_executor("cuda", R"({"repeats": 5})");
  auto job = executor->submit(trial_for(&trace));
  const auto result = job->poll(0);
  ASSERT_EQ(result.status, COTUNE_STATUS_OK) << result.error;
  const json m = json::parse(result.metrics_json);
  EXPECT_GT(m.at("measured_compute_s").get<double>(), 0);
  EXPECT_GE(m.at("step_time_s").get<double>(), m.at("measured_compute_s").get<double>() * 0.999);
  EXPECT_GT(m.at("tokens_per_s").get<double>(), 0);
  EXPECT_GT(m.at("mfu").get<double>(), 0);
  EXPECT_LE(m.at("mfu").get<double>(), 1.0);
  EXPECT_FALSE(m.at("device").get<std::string>().empty());
  EXPECT_GT(m.at("measured_gemm_s").get<double>(), 0);
  EXPECT_GT(m.at("measured_attention_s").get<double>(), 0);
  EXPECT_GT(m.at("measured_memory_s").get<double>(), 0);
}

TEST_F(CudaExecutorTest, LargeGemmRunsWithinSaneBoundsOfPeak) {
  if (!has_gpu()) GTEST_SKIP() << why_;
  OneOpTrace t(big_gemm());
  auto executor = registry_.make_executor("cuda");
  const auto result = executor->submit(trial_for(&t.trace))->poll(0);
  ASSERT_EQ(result.status, COTUNE_STATUS_OK) << result.error;
  const json m = json::parse(result.metrics_json);
  const double tflops = 2.0 * 8192.0 * 8192.0 * 8192.0 / m.at("measured_gemm_s").get<double>() / 1e12;
  // Any data-centre GPU since the A100 reaches more than 50 dense bf16 TFLOP/s on an 8192^3 GEMM,
  // and none exceeds 2.5 PFLOP/s (B200 dense bf16 peak is 2.25).
  EXPECT_GT(tflops, 50) << m.dump();
  EXPECT_LT(tflops, 2500) << m.dump();
}

TEST_F(CudaExecutorTest, MemoryCheckReportsOomForAConfigurationThatCannotFit) {
  if (!has_gpu()) GTEST_SKIP() << why_;
  OneOpTrace t(big_gemm());
  t.trace.memory.weights = 64.0 * (1ull << 40);  // 64 TiB of weights: no GPU has that
  auto executor = registry_.make_executor("cuda");
  const auto result = executor->submit(trial_for(&t.trace))->poll(0);
  EXPECT_EQ(result.status, COTUNE_STATUS_OOM);
  EXPECT_THAT(result.error, HasSubstr("does not fit"));
  EXPECT_THAT(result.error, HasSubstr("cudaErrorMemoryAllocation"));
}

// `cotune calibrate --gpu` works through the plugin: without a GPU it exits 1 with the CUDA error.
TEST_F(CudaExecutorTest, CalibrateWithoutAGpuExitsWithTheCudaError) {
  if (gpu_ == cudaSuccess) GTEST_SKIP() << "a GPU is usable here; this case is for machines without one";
  const std::string command = std::string("COTUNE_PLUGIN_PATH=") + COTUNE_PLUGIN_DIR + " " + COTUNE_CLI +
                              " calibrate --gpu --base h100-sxm 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 1) << output;
  EXPECT_THAT(output, HasSubstr("no usable GPU: cudaGetDeviceCount: "));
  EXPECT_THAT(output, HasSubstr(cudaGetErrorName(gpu_)));
}

TEST_F(CudaExecutorTest, CalibrateRefusesAnUnknownBaseGpu) {
  const std::string command = std::string(COTUNE_CLI) + " calibrate --gpu --base no-such-gpu 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) output.append(buf, n);
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 2) << output;
  EXPECT_THAT(output, HasSubstr("'no-such-gpu' is not in the GPU catalogue"));
}
