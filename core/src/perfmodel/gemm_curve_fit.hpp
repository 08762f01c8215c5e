// Fits the performance model's GEMM curve to timed GEMMs of one dtype (`cotune calibrate --gpu`).
//
// The model times a GEMM of F flops as (F + F_half) / (peak x e_max) + launch: e_max is the
// large-size fraction of the dtype's peak, F_half the size at which half of it is reached.
#ifndef COTUNE_CORE_PERFMODEL_GEMM_CURVE_FIT_HPP_
#define COTUNE_CORE_PERFMODEL_GEMM_CURVE_FIT_HPP_

#include <cstddef>
#include <vector>

namespace cotune::core::perf {

struct GemmSample {
  double flops = 0;
  double seconds = 0;
};

struct GemmCurveFit {
  size_t samples_used = 0;           // GPU-bound samples; fewer than 2 means nothing was fitted
  double efficiency_max = 0;         // e_max, at most 1
  double half_efficiency_flops = -1; // F_half; -1 when the samples do not determine it
};

// Below a few microseconds a GEMM's time is the host's launch rate, not the GPU's work: samples
// within kHostBoundFactor of the fastest one measure the host and stay out of the fit.
constexpr double kHostBoundFactor = 3;

// Least squares on the relative error over the GPU-bound samples: time less `launch_s` is linear in
// F with slope 1 / (peak e_max) and intercept F_half x slope. F_half is determined only by three or
// more samples and an intercept above 1 % of the smallest one's time; else the sizes where the
// curve bends ran at the host's launch rate, and the caller keeps the catalogue's value.
GemmCurveFit fit_gemm_curve(const std::vector<GemmSample>& samples, double peak_flops, double launch_s);

}  // namespace cotune::core::perf

#endif  // COTUNE_CORE_PERFMODEL_GEMM_CURVE_FIT_HPP_
