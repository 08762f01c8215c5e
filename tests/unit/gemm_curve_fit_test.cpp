// The GEMM curve fit of `cotune calibrate --gpu` (core/src/perfmodel/gemm_curve_fit.hpp), on
// timings made from the model's own curve with known constants.
#include "perfmodel/gemm_curve_fit.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace {
using cotune::core::perf::fit_gemm_curve;
using cotune::core::perf::GemmSample;

constexpr double kPeak = 989.5e12, kLaunch = 4e-6;

// Square GEMMs of n = 256..8192 timed as the model times them, with a host that cannot launch
// faster than one call every `host_floor_s` (back-to-back launches of short kernels).
std::vector<GemmSample> squares(double e_max, double half_flops, double host_floor_s) {
  std::vector<GemmSample> out;
  for (double n = 256; n <= 8192; n *= 2) {
    const double f = 2 * n * n * n;
    out.push_back({f, std::max(host_floor_s, (f + half_flops) / (kPeak * e_max) + kLaunch)});
  }
  return out;
}

TEST(GemmCurveFit, RecoversTheEfficiencyAndHalfSizeTheTimingsWereMadeWith) {
  // No host floor: e_max 0.7, half efficiency at 2 GFLOP. 256^3 takes 6.9 us; up to 1024^3 the
  // sizes are within 3x of that and stay out, 2048^3 (27.7 us) and up determine both constants.
  const auto fit = fit_gemm_curve(squares(0.7, 2e9, 0), kPeak, kLaunch);
  EXPECT_EQ(fit.samples_used, 3u);
  EXPECT_NEAR(fit.efficiency_max, 0.7, 1e-6);
  EXPECT_NEAR(fit.half_efficiency_flops, 2e9, 1e3);
}

TEST(GemmCurveFit, LeavesOutTheSizesThatRunAtTheHostsLaunchRate) {
  // A host floor of 8 us hides every GEMM below 2048^3; the large ones still give e_max, and
  // with no size penalty above the floor the half size is not determined.
  const auto fit = fit_gemm_curve(squares(0.8, 0, 8e-6), kPeak, kLaunch);
  EXPECT_EQ(fit.samples_used, 3u);
  EXPECT_NEAR(fit.efficiency_max, 0.8, 1e-6);
  EXPECT_LT(fit.half_efficiency_flops, 0);
}

TEST(GemmCurveFit, FitsNothingFromOneSizeOrNone) {
  EXPECT_EQ(fit_gemm_curve({}, kPeak, kLaunch).samples_used, 0u);
  const std::vector<GemmSample> floor_only = {{1e6, 8e-6}, {1e7, 8e-6}, {1e8, 9e-6}, {1e12, 2e-3}};
  const auto fit = fit_gemm_curve(floor_only, kPeak, kLaunch);
  EXPECT_EQ(fit.samples_used, 1u);
  EXPECT_EQ(fit.efficiency_max, 0);
}

}  // namespace
