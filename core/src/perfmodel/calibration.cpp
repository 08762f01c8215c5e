// Calibration of the performance model's constants (see calibration.hpp). The fit minimises a robust
// (Huber) loss on the log ratio of modelled to measured step time plus a Gaussian prior that keeps
// each constant near its catalogue value, over the constants' logarithms within their ranges
// (dlib's box-constrained BFGS). The Gauss-Newton curvature at the optimum gives each constant's
// uncertainty.
#include <cotune/core/perfmodel/calibration.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/perfmodel/perfmodel.hpp>
#include <cotune/support/likely_meant.hpp>

#include <dlib/optimization.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

namespace cotune::core::perf {
namespace {

using nlohmann::json;
using Vector = dlib::matrix<double, 0, 1>;

// The scatter of a measured step time around the model's, in log: what one run's residual is
// measured against. Beyond kHuberDelta of it a residual counts linearly (an outlier run).
constexpr double kNoise = 0.05;
constexpr double kHuberDelta = 2.0;
// A constant whose doubling moves no run's step time by this much (in log) is not determined.
constexpr double kMinSensitivity = 0.002;

// The last column is the width of each constant's prior, in units of CalibrationOptions::prior_sigma.
// Grouped GEMMs get a wider one: their kernels change from release to release far more than dense
// GEMMs do (published runs of one mixture-of-experts layout differ by up to 2x between two releases
// of one container, dense ones by at most a quarter: docs/benchmarks/perfmodel.md), so a few
// mixture-of-experts runs that are off move them first, not the dense GEMMs that every other
// workload on the GPU depends on.
const std::vector<CalibrationConstant> kConstants = {
    {"gemm_efficiency_max", "large-GEMM fraction of the bf16/fp16 peak", 0.05, 1, 1},
    {"gemm_half_efficiency_gflops", "bf16 GEMM size that reaches half of that", 0.01, 1e5, 1},
    {"gemm_efficiency_fp8", "large-GEMM fraction of the fp8 peak", 0.05, 1, 1},
    {"gemm_efficiency_fp4", "large-GEMM fraction of the fp4 peak", 0.05, 1, 1},
    {"grouped_gemm_efficiency", "grouped (expert) GEMMs' efficiency as a multiple of a dense GEMM's", 0.1, 3, 1.5},
    {"block_scaled_gemm_efficiency", "block-scaled fp8 GEMMs (MXFP8) as a fraction of per-tensor fp8's", 0.3, 1, 1},
    {"attention_efficiency", "fused attention forward, fraction of the bf16 peak", 0.05, 1, 1},
    {"memory_efficiency", "achievable fraction of HBM bandwidth", 0.05, 1, 1},
    {"kernel_launch_us", "GPU time per kernel beyond its work", 0.01, 1000, 1},
    {"host_launch_us", "host time to issue one kernel", 0.01, 1000, 1},
    {"network_efficiency.node", "achievable fraction of NVLink bandwidth", 0.02, 1, 1},
    {"network_efficiency.cluster", "achievable fraction of the network bandwidth across nodes", 0.02, 1, 1},
    {"network_efficiency.island", "achievable fraction of the bandwidth across islands", 0.02, 1, 1},
    {"latency_us.node", "latency of a collective step inside a node", 0.01, 1000, 1},
    {"latency_us.cluster", "latency of a collective step across nodes", 0.01, 1000, 1},
    {"latency_us.island", "latency of a collective step across islands", 0.01, 1000, 1},
};

enum ConstantIndex {
  kGemm, kGemmHalf, kGemmFp8, kGemmFp4, kGrouped, kBlockScaled, kAttention, kMemory, kKernel, kHost,
  kNetNode, kNetCluster, kNetIsland, kLatNode, kLatCluster, kLatIsland
};

std::string run_list(const std::vector<CalibrationRun>& runs, const std::vector<size_t>& which, size_t most) {
  std::string s;
  for (size_t i = 0; i < which.size(); ++i) {
    if (i == most) return s + " and " + std::to_string(which.size() - most) + " more";
    s += (i ? ", " : "") + runs[which[i]].label;
  }
  return s;
}

double huber(double r) {
  const double a = std::fabs(r) / kNoise;
  return a <= kHuberDelta ? 0.5 * a * a : kHuberDelta * (a - 0.5 * kHuberDelta);
}

// The runs' modelled step times with constants `index` set to exp(theta).
class Model {
 public:
  Model(const std::vector<CalibrationRun>& runs, const std::vector<size_t>& rows)
      : runs_(runs), rows_(rows), traces_() {
    for (size_t r : rows) {
      traces_.push_back(runs[r].trace);
      base_.push_back(effective_hardware(runs[r].trace.trace().hardware));
    }
  }
  // log(modelled / measured) of every row.
  std::vector<double> residuals(const std::vector<size_t>& index, const Vector& theta) {
    std::vector<double> out(rows_.size());
    for (size_t i = 0; i < rows_.size(); ++i) {
      cotune_hardware hw = base_[i];
      for (size_t j = 0; j < index.size(); ++j) set_constant(hw, index[j], std::exp(theta(long(j))));
      cotune_sim_result r{};
      r.struct_size = sizeof r;
      simulate(traces_[i].on(hw), &r);
      out[i] = std::log(r.step_time_s / runs_[rows_[i]].measured_step_s);
    }
    return out;
  }
  size_t size() const { return rows_.size(); }

 private:
  const std::vector<CalibrationRun>& runs_;
  std::vector<size_t> rows_;
  std::vector<TraceCopy> traces_;
  std::vector<cotune_hardware> base_;
};

// d residual_i / d theta_j by central differences.
std::vector<std::vector<double>> jacobian(Model& m, const std::vector<size_t>& index, const Vector& theta) {
  constexpr double h = 1e-3;
  std::vector<std::vector<double>> J(m.size(), std::vector<double>(index.size()));
  for (size_t j = 0; j < index.size(); ++j) {
    Vector up = theta, down = theta;
    up(long(j)) += h;
    down(long(j)) -= h;
    const std::vector<double> a = m.residuals(index, up), b = m.residuals(index, down);
    for (size_t i = 0; i < m.size(); ++i) J[i][j] = (a[i] - b[i]) / (2 * h);
  }
  return J;
}

ErrorFigures figures(const std::vector<double>& log_ratio) {
  ErrorFigures f;
  if (log_ratio.empty()) return f;
  std::vector<double> ape;
  for (double r : log_ratio) ape.push_back(std::fabs(std::exp(r) - 1));
  f.mape = std::accumulate(ape.begin(), ape.end(), 0.0) / ape.size();
  std::sort(ape.begin(), ape.end());
  const size_t n = ape.size();
  f.median_ape = n % 2 ? ape[n / 2] : (ape[n / 2 - 1] + ape[n / 2]) / 2;
  return f;
}

struct Fit {
  Vector theta;
  std::vector<double> sigma;  // of theta
};

// Minimises the robust loss plus the prior over theta within [lo, hi]; the prior of constant
// index[j] has the width prior_sigma x its prior_scale.
Fit fit_theta(Model& m, const std::vector<size_t>& index, const Vector& theta0, const Vector& lo, const Vector& hi,
              double prior_sigma, bool uncertainty = true) {
  Vector width(long(index.size()));
  for (size_t j = 0; j < index.size(); ++j) width(long(j)) = prior_sigma * kConstants[index[j]].prior_scale;
  auto objective = [&](const Vector& theta) {
    double loss = 0;
    for (double r : m.residuals(index, theta)) loss += huber(r);
    for (long j = 0; j < theta.size(); ++j) loss += 0.5 * std::pow((theta(j) - theta0(j)) / width(j), 2);
    return loss;
  };
  Fit fit;
  fit.theta = theta0;
  if (index.empty()) return fit;
  // A coarse scan first, a constant at a time: the host-launch floor and the max() of compute and
  // memory make some constants flat around the catalogue's value, where a gradient sees nothing.
  // Its smallest step (a factor of 1.4) lets a modest error land on the constant it depends on
  // most before a larger step of another reaches a floor that explains it, where the gradient of
  // the first is zero (with one run, nothing else tells the two apart).
  for (int sweep = 0; sweep < 2; ++sweep)
    for (long j = 0; j < fit.theta.size(); ++j) {
      double best = objective(fit.theta), best_t = fit.theta(j);
      for (double f : {-1.4, -0.7, -0.35, 0.35, 0.7, 1.4}) {
        Vector t = fit.theta;
        t(j) = std::clamp(fit.theta(j) + f, lo(j), hi(j));
        const double v = objective(t);
        if (v < best) best = v, best_t = t(j);
      }
      fit.theta(j) = best_t;
    }
  dlib::find_min_box_constrained(dlib::bfgs_search_strategy(), dlib::objective_delta_stop_strategy(1e-7, 200),
                                 objective, dlib::derivative(objective, 1e-4), fit.theta, lo, hi);
  if (!uncertainty) return fit;
  // Uncertainty: the inverse of the Gauss-Newton curvature of the loss, scaled by the residuals'
  // own scatter when there are more runs than constants.
  const auto J = jacobian(m, index, fit.theta);
  const std::vector<double> r = m.residuals(index, fit.theta);
  const long p = long(index.size());
  dlib::matrix<double> H = dlib::zeros_matrix<double>(p, p);
  for (long j = 0; j < p; ++j) H(j, j) = 1 / (width(j) * width(j));
  double chi2 = 0;
  for (size_t i = 0; i < J.size(); ++i) {
    const double w = std::fabs(r[i]) / kNoise <= kHuberDelta ? 1.0 : kHuberDelta * kNoise / std::fabs(r[i]);
    chi2 += w * r[i] * r[i] / (kNoise * kNoise);
    for (long a = 0; a < p; ++a)
      for (long b = 0; b < p; ++b) H(a, b) += w * J[i][size_t(a)] * J[i][size_t(b)] / (kNoise * kNoise);
  }
  const double dof = double(J.size()) - double(p);
  const double scale = dof > 0 ? std::max(1.0, chi2 / dof) : 1.0;
  const dlib::matrix<double> cov = dlib::inv(H) * scale;
  for (long j = 0; j < p; ++j) fit.sigma.push_back(std::sqrt(std::max(0.0, cov(j, j))));
  return fit;
}

// The starting values and ranges, in log, of the constants `index`.
struct Start {
  Vector theta0, lo, hi;
};
Start start_of(const std::vector<size_t>& index, const Vector& theta_all) {
  const long dims = static_cast<long>(index.size());
  Start s{Vector(dims), Vector(dims), Vector(dims)};
  for (size_t j = 0; j < index.size(); ++j) {
    s.theta0(long(j)) = theta_all(long(index[j]));
    s.lo(long(j)) = std::log(kConstants[index[j]].lower);
    s.hi(long(j)) = std::log(kConstants[index[j]].upper);
  }
  return s;
}

// Folds for cross-validation: leave-one-out up to kLeaveOneOutBelow runs, else `folds` folds (5 when
// `folds` is under 2) of a fixed shuffle (the same folds every run: a calibration is reproducible).
constexpr size_t kLeaveOneOutBelow = 12;

std::vector<std::vector<size_t>> cv_folds(size_t n, size_t folds) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const size_t k = n <= kLeaveOneOutBelow ? n : (folds >= 2 ? folds : 5);
  if (k < n) {
    // NOLINTNEXTLINE(cert-msc32-c,cert-msc51-cpp): a fixed seed keeps the folds reproducible
    std::shuffle(order.begin(), order.end(), std::mt19937(12345));
  }
  std::vector<std::vector<size_t>> test(k);
  for (size_t i = 0; i < n; ++i) test[i % k].push_back(order[i]);
  return test;
}

// How many of `ordered` (the constants, most telling first) to fit: each prefix is fitted on every
// fold's other runs and judged on the fold's own. The count with the lowest held-out error is the
// candidate; a smaller count whose held-out errors, run by run, are worse by no more than one
// standard error of that difference wins instead (the one-standard-error rule: a gain within the
// runs' scatter is not evidence). More constants than the runs support fit their noise and predict
// other runs worse than the catalogue did, which is what this guards against with few runs.
size_t select_constant_count(const std::vector<CalibrationRun>& runs, const std::vector<size_t>& ordered,
                             const Vector& theta_all, const CalibrationOptions& options, std::vector<double>* errors) {
  const std::vector<std::vector<size_t>> tests = cv_folds(runs.size(), options.folds);
  size_t smallest_train = runs.size();
  for (const auto& t : tests) smallest_train = std::min(smallest_train, runs.size() - t.size());
  const size_t most = std::min({ordered.size(), smallest_train, options.max_selected});
  errors->assign(most + 1, 0.0);
  std::vector<std::vector<double>> per_run(most + 1);  // |held-out log error| of each run, fold by fold
  for (size_t k = 0; k <= most; ++k) {
    std::vector<size_t> index(ordered.begin(), ordered.begin() + long(k));
    std::sort(index.begin(), index.end());
    const auto [theta0, lo, hi] = start_of(index, theta_all);
    double sum = 0;
    size_t count = 0;
    for (const std::vector<size_t>& test : tests) {
      std::vector<size_t> train;
      for (size_t i = 0; i < runs.size(); ++i)
        if (std::find(test.begin(), test.end(), i) == test.end()) train.push_back(i);
      Model m_train(runs, train), m_test(runs, test);
      const Vector theta = k == 0 ? theta0 : fit_theta(m_train, index, theta0, lo, hi, options.prior_sigma, false).theta;
      for (double r : m_test.residuals(index, theta)) sum += std::fabs(r), ++count, per_run[k].push_back(std::fabs(r));
    }
    (*errors)[k] = count > 0 ? sum / double(count) : 0;
  }
  const size_t best = static_cast<size_t>(std::min_element(errors->begin(), errors->end()) - errors->begin());
  for (size_t k = 0; k < best; ++k) {
    const std::vector<double>& a = per_run[k];
    const std::vector<double>& b = per_run[best];
    const double n = double(a.size());
    if (a.size() != b.size() || a.size() < 2) continue;
    double mean = 0, sq = 0;
    for (size_t i = 0; i < a.size(); ++i) mean += (a[i] - b[i]) / n;
    for (size_t i = 0; i < a.size(); ++i) sq += (a[i] - b[i] - mean) * (a[i] - b[i] - mean);
    const double standard_error = std::sqrt(sq / (n - 1) / n);
    if (mean <= standard_error) return k;
  }
  return best;
}

// The runs' GPU (they must share one).
std::string gpu_of(const std::vector<CalibrationRun>& runs) {
  const cotune_hardware& hw = runs.front().trace.trace().hardware;
  const std::string gpu(hw.gpu_name.data, hw.gpu_name.len);
  for (const CalibrationRun& r : runs) {
    const cotune_hardware& h = r.trace.trace().hardware;
    if (std::string(h.gpu_name.data, h.gpu_name.len) != gpu)
      throw UserError("calibrate: " + r.label + " runs on " + std::string(h.gpu_name.data, h.gpu_name.len) +
                      ", the others on " + gpu + ": calibrate one GPU type at a time");
  }
  return gpu;
}

}  // namespace

const std::vector<CalibrationConstant>& calibration_constants() { return kConstants; }

int calibration_constant_index(const std::string& name) {
  for (size_t i = 0; i < kConstants.size(); ++i)
    if (name == kConstants[i].name) return int(i);
  return -1;
}

double constant_value(const cotune_hardware& hw, size_t i) {
  switch (i) {
    case kGemm: return hw.gemm_efficiency_max;
    case kGemmHalf: return hw.gemm_half_efficiency_flops / 1e9;
    case kGemmFp8: return hw.gemm_efficiency_fp8;
    case kGemmFp4: return hw.gemm_efficiency_fp4;
    case kGrouped: return hw.grouped_gemm_efficiency;
    case kBlockScaled: return hw.block_scaled_gemm_efficiency;
    case kAttention: return hw.attention_efficiency;
    case kMemory: return hw.memory_efficiency;
    case kKernel: return hw.kernel_launch_s * 1e6;
    case kHost: return hw.host_launch_s * 1e6;
    case kNetNode: return hw.net_efficiency[COTUNE_NET_NODE];
    case kNetCluster: return hw.net_efficiency[COTUNE_NET_CLUSTER];
    case kNetIsland: return hw.net_efficiency[COTUNE_NET_ISLAND];
    case kLatNode: return hw.net_latency_s[COTUNE_NET_NODE] * 1e6;
    case kLatCluster: return hw.net_latency_s[COTUNE_NET_CLUSTER] * 1e6;
    case kLatIsland: return hw.net_latency_s[COTUNE_NET_ISLAND] * 1e6;
    default: throw std::logic_error("calibration constant index out of range");
  }
}

void set_constant(cotune_hardware& hw, size_t i, double v) {
  switch (i) {
    case kGemm: hw.gemm_efficiency_max = v; break;
    case kGemmHalf: hw.gemm_half_efficiency_flops = v * 1e9; break;
    case kGemmFp8: hw.gemm_efficiency_fp8 = v; break;
    case kGemmFp4: hw.gemm_efficiency_fp4 = v; break;
    case kGrouped: hw.grouped_gemm_efficiency = v; break;
    case kBlockScaled: hw.block_scaled_gemm_efficiency = v; break;
    case kAttention: hw.attention_efficiency = v; break;
    case kMemory: hw.memory_efficiency = v; break;
    case kKernel: hw.kernel_launch_s = v * 1e-6; break;
    case kHost: hw.host_launch_s = v * 1e-6; break;
    case kNetNode: hw.net_efficiency[COTUNE_NET_NODE] = v; break;
    case kNetCluster: hw.net_efficiency[COTUNE_NET_CLUSTER] = v; break;
    case kNetIsland: hw.net_efficiency[COTUNE_NET_ISLAND] = v; break;
    case kLatNode: hw.net_latency_s[COTUNE_NET_NODE] = v * 1e-6; break;
    case kLatCluster: hw.net_latency_s[COTUNE_NET_CLUSTER] = v * 1e-6; break;
    case kLatIsland: hw.net_latency_s[COTUNE_NET_ISLAND] = v * 1e-6; break;
    default: throw std::logic_error("calibration constant index out of range");
  }
}

TraceCopy::TraceCopy(const cotune_trace& trace) {
  validate_trace(trace);
  // Only what the writer's struct holds: a plugin built against an older ABI has a smaller one.
  std::memcpy(&trace_, &trace, std::min(trace.struct_size, sizeof trace_));
  ops_.resize(trace.num_ops);
  for (size_t i = 0; i < trace.num_ops; ++i) {
    const char* src = reinterpret_cast<const char*>(trace.ops) + i * trace.op_stride;
    ops_[i] = cotune_op{};
    std::memcpy(&ops_[i], src, std::min(trace.op_stride, sizeof(cotune_op)));
  }
  trace_.struct_size = sizeof trace_;
  trace_.op_stride = sizeof(cotune_op);
  trace_.hardware = effective_hardware(trace.hardware);
  rebind();
}

TraceCopy::TraceCopy(const TraceCopy& other) : ops_(other.ops_), trace_(other.trace_) { rebind(); }

TraceCopy& TraceCopy::operator=(const TraceCopy& other) {
  if (this == &other) return *this;
  ops_ = other.ops_;
  trace_ = other.trace_;
  rebind();
  return *this;
}

void TraceCopy::rebind() { trace_.ops = ops_.data(); }

const cotune_trace& TraceCopy::on(const cotune_hardware& hardware) {
  const int32_t nodes = trace_.hardware.nodes;
  trace_.hardware = hardware;
  trace_.hardware.struct_size = sizeof(cotune_hardware);
  trace_.hardware.nodes = nodes;
  return trace_;
}

json CalibrationResult::constants() const {
  json c = json::object();
  for (const ConstantFit& f : fitted) {
    const auto dot = f.name.find('.');
    if (dot == std::string::npos) c[f.name] = f.value;
    else c[f.name.substr(0, dot)][f.name.substr(dot + 1)] = f.value;
  }
  return c;
}

CalibrationResult calibrate(const std::vector<CalibrationRun>& runs, const CalibrationOptions& options) {
  const size_t fewest =
      options.underdetermined && options.fit.empty() ? std::max<size_t>(1, options.underdetermined_fewest) : 2;
  if (runs.size() < fewest)
    throw UserError(std::string("calibrate: needs at least ") + (fewest == 1 ? "one measured run" : "two measured runs") +
                    ", got " + std::to_string(runs.size()));
  for (const CalibrationRun& r : runs)
    if (!(r.measured_step_s > 0) || !std::isfinite(r.measured_step_s))
      throw UserError("calibrate: " + r.label + " has no positive measured step time");
  CalibrationResult result;
  result.gpu = gpu_of(runs);
  result.runs = runs.size();
  std::vector<size_t> all(runs.size());
  std::iota(all.begin(), all.end(), 0);
  Model model(runs, all);

  // Every constant's starting value (the runs' own hardware, the catalogue or gpu_spec) and how
  // much each run's step time depends on it.
  const cotune_hardware hw0 = effective_hardware(runs.front().trace.trace().hardware);
  std::vector<size_t> every(kConstants.size());
  std::iota(every.begin(), every.end(), 0);
  Vector theta_all(long(every.size()));
  for (size_t j = 0; j < every.size(); ++j)
    theta_all(long(j)) = std::log(std::clamp(constant_value(hw0, j), kConstants[j].lower, kConstants[j].upper));
  const std::vector<double> r0 = model.residuals(every, theta_all);
  const auto J0 = jacobian(model, every, theta_all);
  result.before = figures(r0);

  // Runs that no constant can tell apart (the same configuration measured twice count once).
  std::vector<size_t> distinct;
  for (size_t i = 0; i < runs.size(); ++i) {
    bool same = false;
    for (size_t d : distinct) {
      bool equal = std::fabs((r0[i] + std::log(runs[i].measured_step_s)) - (r0[d] + std::log(runs[d].measured_step_s))) < 1e-9;
      for (size_t j = 0; j < every.size() && equal; ++j) equal = std::fabs(J0[i][j] - J0[d][j]) < 1e-9;
      same = same || equal;
    }
    if (!same) distinct.push_back(i);
  }
  if (distinct.size() < fewest)
    throw UserError("calibrate: the runs (" + run_list(runs, all, options.listed_runs) +
                    ") time alike in the model (one configuration, or layouts it does not tell apart): their step "
                    "times cannot tell any constant from another");

  // How much a constant moves the runs' step times: at its value, and a factor of 4 either way
  // (a floor such as the host's issue time binds only beyond some value).
  std::vector<double> sensitivity(every.size(), 0);
  constexpr double kProbe = 1.3862943611198906;  // log(4)
  for (size_t j = 0; j < every.size(); ++j) {
    for (size_t i = 0; i < runs.size(); ++i) sensitivity[j] = std::max(sensitivity[j], std::fabs(J0[i][j]));
    for (double sign : {-1.0, 1.0}) {
      Vector t = theta_all;
      t(long(j)) = std::clamp(t(long(j)) + sign * kProbe, std::log(kConstants[j].lower), std::log(kConstants[j].upper));
      const double step = std::fabs(t(long(j)) - theta_all(long(j)));
      if (step <= 0) continue;
      const std::vector<double> r = model.residuals(every, t);
      for (size_t i = 0; i < runs.size(); ++i) sensitivity[j] = std::max(sensitivity[j], std::fabs(r[i] - r0[i]) / step);
    }
  }

  std::vector<size_t> index;
  if (!options.fit.empty()) {
    for (const std::string& name : options.fit) {
      const int j = calibration_constant_index(name);
      if (j < 0) {
        std::string list;
        for (const auto& c : kConstants) list += (list.empty() ? "" : ", ") + std::string(c.name);
        throw UserError("calibrate: unknown constant '" + name + "' (expected " + list + ")");
      }
      if (sensitivity[size_t(j)] < kMinSensitivity)
        throw UserError("calibrate: " + name + " cannot be fitted from these runs: no run's step time depends on it (" +
                        run_list(runs, all, options.listed_runs) + ")");
      if (std::find(index.begin(), index.end(), size_t(j)) == index.end()) index.push_back(size_t(j));
    }
    if (index.size() >= distinct.size())
      throw UserError("calibrate: " + std::to_string(index.size()) + " constants need at least " +
                      std::to_string(index.size() + 1) + " distinct runs; these runs have " +
                      std::to_string(distinct.size()) + " (" + run_list(runs, distinct, options.listed_runs) + ")");
  } else {
    std::vector<bool> candidate(every.size(), options.candidates.empty());
    for (const std::string& name : options.candidates) {
      const int j = calibration_constant_index(name);
      if (j < 0) throw std::logic_error("calibrate: unknown candidate constant " + name);
      candidate[size_t(j)] = true;
    }
    std::vector<size_t> order(every.size());
    std::iota(order.begin(), order.end(), 0);
    // Most telling first: how far the constant can move the runs within its prior. Of two constants
    // that explain the runs alike, the one whose prior lets it move goes first: two mixture-of-experts
    // runs slower than modelled move the grouped GEMMs' efficiency, not the dense GEMMs'.
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return sensitivity[a] * kConstants[a].prior_scale > sensitivity[b] * kConstants[b].prior_scale;
    });
    for (size_t j : order) {
      if (!candidate[j]) continue;
      if (sensitivity[j] < kMinSensitivity) {
        result.not_fitted.push_back(std::string(kConstants[j].name) + ": no run's step time depends on it");
      } else if (!options.underdetermined && index.size() + 1 >= distinct.size()) {
        result.not_fitted.push_back(std::string(kConstants[j].name) + ": more constants than distinct runs can tell apart");
      } else {
        index.push_back(j);
      }
    }
    if (options.select && !options.underdetermined && !index.empty()) {
      const size_t k = select_constant_count(runs, index, theta_all, options, &result.selection_error);
      for (size_t i = k; i < index.size(); ++i)
        result.not_fitted.push_back(std::string(kConstants[index[i]].name) +
                                    ": fitting it did not lower the cross-validated error on these runs by more than its scatter");
      index.resize(k);
    }
    std::sort(index.begin(), index.end());
  }

  const auto [theta0, lo, hi] = start_of(index, theta_all);
  const Fit fit = fit_theta(model, index, theta0, lo, hi, options.prior_sigma);
  for (size_t k = 0; k < index.size(); ++k) {
    const CalibrationConstant& c = kConstants[index[k]];
    const double t = fit.theta(long(k)), s = fit.sigma[k];
    const bool at_limit = t <= std::log(c.lower) + 1e-3 || t >= std::log(c.upper) - 1e-3;
    result.fitted.push_back({c.name, std::exp(theta0(long(k))), std::exp(t), std::max(c.lower, std::exp(t - s)),
                             std::min(c.upper, std::exp(t + s)), at_limit});
  }
  result.after = figures(model.residuals(index, fit.theta));

  // k-fold held-out error: each fold predicted by a fit on the others.
  const size_t k = std::min(options.folds, runs.size());
  if (options.held_out && k >= 2) {
    std::vector<size_t> order = all;
    // NOLINTNEXTLINE(cert-msc32-c,cert-msc51-cpp): the same folds every run, so the error is reproducible
    std::shuffle(order.begin(), order.end(), std::mt19937(12345));
    std::vector<double> held;
    for (size_t f = 0; f < k; ++f) {
      std::vector<size_t> train, test;
      for (size_t i = 0; i < order.size(); ++i) (i % k == f ? test : train).push_back(order[i]);
      if (train.size() < 2 || test.empty()) continue;
      Model m_train(runs, train), m_test(runs, test);
      const Fit ff = fit_theta(m_train, index, theta0, lo, hi, options.prior_sigma);
      for (double r : m_test.residuals(index, ff.theta)) held.push_back(r);
    }
    if (!held.empty()) {  // a fold whose other runs are too few to fit on predicts nothing
      result.held_out = figures(held);
      result.folds = k;
    }
  }
  return result;
}

ConstantSet::ConstantSet(const json& constants) {
  for (size_t j = 0; j < kConstants.size(); ++j) {
    const std::string name = kConstants[j].name;
    const auto dot = name.find('.');
    const json* v = nullptr;
    if (dot == std::string::npos) {
      if (constants.contains(name)) v = &constants[name];
    } else if (constants.contains(name.substr(0, dot)) && constants[name.substr(0, dot)].is_object() &&
               constants[name.substr(0, dot)].contains(name.substr(dot + 1))) {
      v = &constants[name.substr(0, dot)][name.substr(dot + 1)];
    }
    if (v != nullptr && v->is_number()) values_.emplace_back(j, v->get<double>());
  }
}

cotune_hardware ConstantSet::apply(const cotune_hardware& hardware) const {
  cotune_hardware hw = effective_hardware(hardware);
  for (const auto& [j, v] : values_) set_constant(hw, j, v);
  return hw;
}

cotune_trace retimed(const cotune_trace& trace, const cotune_hardware& hardware) {
  cotune_trace t{};
  std::memcpy(&t, &trace, std::min(trace.struct_size, offsetof(cotune_trace, hardware)));
  t.struct_size = sizeof t;
  t.hardware = hardware;
  t.hardware.struct_size = sizeof hardware;
  t.hardware.nodes = trace.hardware.nodes;
  return t;
}

std::vector<double> calibrated_step_times(const std::vector<CalibrationRun>& runs, const json& constants) {
  const ConstantSet set(constants);
  std::vector<double> out;
  for (const CalibrationRun& r : runs) {
    cotune_sim_result res{};
    res.struct_size = sizeof res;
    simulate(retimed(r.trace.trace(), set.apply(r.trace.trace().hardware)), &res);
    out.push_back(res.step_time_s);
  }
  return out;
}

json calibration_file(const std::vector<CalibrationResult>& results, const std::string& source) {
  json gpus = json::object();
  for (const CalibrationResult& r : results) {
    json fit = json::array();
    for (const ConstantFit& f : r.fitted)
      fit.push_back({{"name", f.name}, {"value", f.value}, {"low", f.low}, {"high", f.high}, {"before", f.before}});
    json g = {{"constants", r.constants()},
              {"fit", fit},
              {"runs", r.runs},
              {"not_fitted", r.not_fitted},
              {"error", {{"mape_before", r.before.mape}, {"mape_after", r.after.mape},
                         {"median_ape_before", r.before.median_ape}, {"median_ape_after", r.after.median_ape}}}};
    if (r.folds > 0) {
      g["error"]["held_out_mape"] = r.held_out.mape;
      g["error"]["folds"] = r.folds;
    }
    gpus[r.gpu] = g;
  }
  return {{"cotune_calibration", 1}, {"source", source}, {"gpus", gpus}};
}

namespace {

// The members a calibration file's object may have (what calibration_file() writes): a misspelt or
// foreign one is refused, so that an edit which reads as applied is applied.
void check_members(const json& object, const std::vector<std::string>& known, const std::string& at) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    throw UserError(at + "/" + it.key() + ": unknown field" + support::did_you_mean(it.key(), known) + " (expected " +
                    list + ")");
  }
}

}  // namespace

json read_calibration_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError(path + ": a directory, not a calibration file");
  std::ifstream in(path);
  if (!in) throw UserError(path + ": cannot open the calibration file");
  std::stringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = json::parse(text.str());
  } catch (const json::exception& e) {
    throw UserError(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("cotune_calibration"))
    throw UserError(path + ": not a calibration file (expected an object with \"cotune_calibration\": 1, as "
                    "cotune calibrate writes)");
  if (j["cotune_calibration"] != 1)
    throw UserError(path + "/cotune_calibration: version " + j["cotune_calibration"].dump() + " is not one this cotune reads (1)");
  check_members(j, {"cotune_calibration", "source", "gpus"}, path);
  if (!j.contains("gpus") || !j["gpus"].is_object() || j["gpus"].empty())
    throw UserError(path + "/gpus: expected an object with the constants of each GPU type");
  json per_gpu = json::object();
  for (auto it = j["gpus"].begin(); it != j["gpus"].end(); ++it) {
    const std::string at = path + "/gpus/" + it.key();
    if (!it.value().is_object() || !it.value().contains("constants") || !it.value()["constants"].is_object())
      throw UserError(at + "/constants: expected an object of GPU-description fields");
    // What calibration_file() writes for a fit on runs, and `calibrate --gpu` for microbenchmarks.
    check_members(it.value(), {"constants", "fit", "runs", "not_fitted", "error", "measurements", "measured_on"}, at);
    check_gpu_fields(it.value()["constants"], at + "/constants");
    per_gpu[it.key()] = it.value()["constants"];
  }
  return per_gpu;
}

bool calibration_key_names(const std::string& key, const std::string& gpu_name) {
  return key == gpu_name || catalogue_gpu_name(key) == gpu_name;
}

bool calibration_covers(const json& per_gpu, const std::string& gpu_name) {
  if (!per_gpu.is_object()) return false;
  for (auto it = per_gpu.begin(); it != per_gpu.end(); ++it)
    if (calibration_key_names(it.key(), gpu_name) && !it.value().empty()) return true;  // {}: nothing fitted
  return false;
}

std::string calibrated_gpus(const json& per_gpu) {
  std::string out;
  if (!per_gpu.is_object()) return out;
  for (auto it = per_gpu.begin(); it != per_gpu.end(); ++it)
    if (!it.value().empty()) out += (out.empty() ? "" : ", ") + it.key();
  return out;
}

std::string calibration_gap(const json& per_gpu, const std::string& gpu_name) {
  if (calibration_covers(per_gpu, gpu_name)) return "";
  const std::string has = calibrated_gpus(per_gpu);
  return has.empty() ? "sets no constants (its runs determined none)"
                     : "has no constants for " + gpu_name + " (it has some for " + has + ")";
}

void apply_calibration(json& workload, const json& per_gpu, const std::string& where) {
  if (!workload.is_object() || !workload.contains("cluster") || !workload["cluster"].is_object())
    throw UserError(where + ": the workload has no cluster object to calibrate");
  workload["cluster"]["calibration"] = per_gpu;
}

}  // namespace cotune::core::perf
