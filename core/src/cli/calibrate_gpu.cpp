// `cotune calibrate --gpu --base NAME`: measures GEMM efficiency over a grid of sizes and dtypes,
// memory bandwidth and (reported only) unfused attention on the local GPU through the cuda executor plugin (the core never
// links CUDA), fits the performance model's efficiency curve and returns the constants for the
// calibration file (cli/calibrate.cpp writes it), the same format `calibrate --runs` writes.
//
// Each measurement is a single-op step trace submitted to the executor; its measured time comes
// back in the metrics (measured_gemm_s, measured_memory_s, measured_attention_s).
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/core/registry.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli/calibrate.hpp"
#include "perfmodel/gemm_curve_fit.hpp"

namespace cotune::cli {
namespace {
using nlohmann::json;

const char* const kDtypes[COTUNE_DTYPE_COUNT] = {"fp32", "tf32", "bf16", "fp16", "fp8"};

// A step trace holding one op on one GPU of `hw`.
struct OneOpTrace {
  cotune_op op{};
  cotune_trace trace{};
  OneOpTrace(const cotune_op& o, const cotune_hardware& hw, double flops) : op(o) {
    trace.struct_size = COTUNE_STRUCT_SIZE(cotune_trace, hardware);
    trace.ops = &op;
    trace.num_ops = 1;
    trace.op_stride = sizeof(cotune_op);
    trace.schedule = COTUNE_SCHEDULE_1F1B;
    trace.pipeline_stages = 1;
    trace.virtual_stages = 1;
    trace.micro_batches = 1;
    trace.tokens_per_step = 1;
    trace.model_flops_per_gpu = flops;
    trace.gpus = 1;
    trace.memory.struct_size = COTUNE_STRUCT_SIZE(cotune_memory, buffers);
    trace.hardware = hw;
  }
};

cotune_op base_op(int32_t kind, int32_t dtype, const char* label) {
  cotune_op op{};
  op.struct_size = COTUNE_STRUCT_SIZE(cotune_op, label);
  op.kind = kind;
  op.phase = COTUNE_PHASE_FORWARD;
  op.depends_on = -1;
  op.dtype = dtype;
  op.count = 1;
  op.label = cotune_str{label, std::char_traits<char>::length(label)};
  return op;
}

// Runs one single-op trace; returns the measured seconds of the op class `metric`, or a negative
// value with `why` set when the executor could not run it (an unsupported dtype on this GPU).
double measure(core::Executor& executor, const OneOpTrace& t, const char* metric, std::string* why) {
  cotune_trial trial{};
  trial.struct_size = COTUNE_STRUCT_SIZE(cotune_trial, config);
  static const char id[] = "calibrate";
  trial.trial_id = cotune_str{id, sizeof(id) - 1};
  trial.config_json = cotune_str{"{}", 2};
  trial.workload_json = cotune_str{"{}", 2};
  trial.trace = &t.trace;
  auto job = executor.submit(trial);  // PluginError UNAVAILABLE without a GPU: the caller reports it
  const core::TrialResult r = job->poll(600000);
  if (r.status != COTUNE_STATUS_OK) {
    *why = r.error;
    return -1;
  }
  return json::parse(r.metrics_json).at(metric).get<double>();
}

std::string today() {
  char buf[16];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);  // not std::gmtime: its static result is shared between threads
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &utc);
  return buf;
}

}  // namespace

int calibrate_on_gpu(const std::string& spelled_base, const std::string& executor_options, json* out) {
  const std::string base = core::perf::catalogue_gpu_name(spelled_base);
  if (base.empty()) {
    std::string names;
    for (const auto& n : core::perf::catalogue_gpu_names()) names += (names.empty() ? "" : ", ") + n;
    throw core::UserError("calibrate: --base '" + spelled_base + "' is not in the GPU catalogue (expected one of " + names + ")");
  }
  cotune_hardware hw{};
  hw.struct_size = sizeof hw;
  core::perf::resolve_hardware(json{{"gpu", base}, {"nodes", 1}, {"gpus_per_node", 1}}, &hw, "--base");

  core::Registry registry;
  registry.load_default();
  if (registry.try_find(COTUNE_KIND_EXECUTOR, "cuda") == nullptr) {
    std::fprintf(stderr, "calibrate: the cuda executor plugin is not installed (it is built only when the CUDA "
                         "toolkit is found)\n");
    return 1;
  }
  auto executor = registry.make_executor("cuda", executor_options);

  json report = {{"gemm", json::object()}, {"gemm_fit", json::object()}};
  json constants = json::object();
  try {
    // GEMMs: square sizes, every dtype the base GPU has a peak for; each dtype's curve is fitted
    // against its own peak (bf16 gives the size curve, fp8 its efficiency).
    for (int dtype = 0; dtype < COTUNE_DTYPE_COUNT; ++dtype) {
      if (hw.peak_flops[dtype] <= 0) continue;
      std::vector<core::perf::GemmSample> samples;
      for (double n : {256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0}) {
        cotune_op op = base_op(COTUNE_OP_GEMM, dtype, "gemm");
        op.m = op.n = op.k = n;
        const double flops = 2 * n * n * n;
        std::string why;
        const double s = measure(*executor, OneOpTrace(op, hw, flops), "measured_gemm_s", &why);
        if (s <= 0) {
          std::fprintf(stderr, "calibrate: %s GEMMs skipped: %s\n", kDtypes[dtype], why.c_str());
          break;
        }
        const double tflops = flops / s / 1e12;
        report["gemm"][kDtypes[dtype]][std::to_string(int(n))] = {{"seconds", s}, {"tflops", tflops},
                                                                  {"fraction_of_peak", flops / s / hw.peak_flops[dtype]}};
        std::printf("gemm %-4s %5d^3  %10.3f us  %8.1f TFLOP/s  %5.1f%% of catalogue peak\n", kDtypes[dtype], int(n),
                    s * 1e6, tflops, 100 * flops / s / hw.peak_flops[dtype]);
        samples.push_back({flops, s});
      }
      if (samples.size() < 2) continue;
      const core::perf::GemmCurveFit fit = core::perf::fit_gemm_curve(samples, hw.peak_flops[dtype], hw.kernel_launch_s);
      const size_t used = fit.samples_used;
      const double e_max = fit.efficiency_max, half = fit.half_efficiency_flops;
      if (used < 2) {
        std::fprintf(stderr, "calibrate: %s GEMMs not fitted: only %zu size(s) ran above the host's launch rate\n",
                     kDtypes[dtype], used);
        continue;
      }
      report["gemm_fit"][kDtypes[dtype]] = {{"sizes_used", used}, {"efficiency_max", e_max},
                                            {"half_efficiency_gflops", half >= 0 ? json(half / 1e9) : json()}};
      if (dtype == COTUNE_DTYPE_BF16) {
        constants["gemm_efficiency_max"] = e_max;
        if (half >= 0)
          constants["gemm_half_efficiency_gflops"] = half / 1e9;
        else
          std::printf("gemm bf16: no size penalty beyond the fixed cost per kernel in the sizes fitted; "
                      "gemm_half_efficiency_gflops is "
                      "not determined and keeps the catalogue's\n");
      } else if (dtype == COTUNE_DTYPE_FP8) {
        constants["gemm_efficiency_fp8"] = e_max;
      }
    }
    if (!constants.contains("gemm_efficiency_max")) {
      std::fprintf(stderr, "calibrate: no bf16 GEMMs could be measured; nothing to fit\n");
      return 1;
    }

    // Memory bandwidth: a 1 GiB copy (512 MiB read, 512 MiB written).
    cotune_op copy = base_op(COTUNE_OP_MEMORY, COTUNE_DTYPE_BF16, "copy");
    copy.bytes = double(1ull << 30);
    std::string why;
    const double mem_s = measure(*executor, OneOpTrace(copy, hw, 0), "measured_memory_s", &why);
    if (mem_s <= 0) {
      std::fprintf(stderr, "calibrate: the memory measurement failed: %s\n", why.c_str());
      return 1;
    }
    const double mem_eff = std::min(1.0, copy.bytes / mem_s / hw.hbm_bytes_per_s);
    constants["memory_efficiency"] = mem_eff;
    std::printf("memory copy 1 GiB  %10.3f us  %8.1f GB/s  %5.1f%% of catalogue bandwidth\n", mem_s * 1e6,
                copy.bytes / mem_s / 1e9, 100 * mem_eff);

    // Attention: the cuda executor times it unfused (cuBLAS batched GEMMs around a softmax kernel,
    // the full square of scores), which is 2-4x slower than the fused kernels training runs
    // (FlashAttention, cuDNN). So it is reported, not fitted: attention_efficiency stays the
    // catalogue's, the large-size fraction that fused attention reaches.
    cotune_op att = base_op(COTUNE_OP_ATTENTION, COTUNE_DTYPE_BF16, "attention");
    att.batch = 1, att.heads = 32, att.seq_q = att.seq_kv = 4096, att.head_dim = 128;
    att.flags = COTUNE_OP_CAUSAL;
    const double att_flops = 2 * att.batch * att.heads * att.seq_q * att.seq_kv * att.head_dim;
    const double att_s = measure(*executor, OneOpTrace(att, hw, att_flops), "measured_attention_s", &why);
    if (att_s > 0) {
      report["attention"] = {{"shape", "1x32 heads, 4096 x 4096 causal, head_dim 128, bf16, forward"},
                             {"kernels", "unfused (cuBLAS batched GEMMs and a softmax kernel); not fitted"},
                             {"seconds", att_s},
                             {"tflops", att_flops / att_s / 1e12}};
      std::printf("attention fwd 32x4096^2x128 causal, unfused  %10.3f us  %8.1f TFLOP/s  (not fitted: training "
                  "runs fused kernels)\n",
                  att_s * 1e6, att_flops / att_s / 1e12);
    }
  } catch (const core::PluginError& e) {
    std::fprintf(stderr, "calibrate: %s\n", e.what());
    return 1;
  }
  std::printf("fit:");
  for (auto it = constants.begin(); it != constants.end(); ++it) std::printf(" %s %.4g", it.key().c_str(), it.value().get<double>());
  std::printf("\n");
  *out = {{"constants", constants}, {"measurements", report}, {"measured_on", today()}};
  return 0;
}

}  // namespace cotune::cli
