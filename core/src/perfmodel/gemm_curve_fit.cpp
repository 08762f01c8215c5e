// GEMM curve fit (see gemm_curve_fit.hpp).
#include "perfmodel/gemm_curve_fit.hpp"

#include <algorithm>

namespace cotune::core::perf {

GemmCurveFit fit_gemm_curve(const std::vector<GemmSample>& all, double peak_flops, double launch_s) {
  GemmCurveFit fit;
  if (all.empty() || !(peak_flops > 0)) return fit;
  double fastest = all.front().seconds;
  for (const GemmSample& s : all) fastest = std::min(fastest, s.seconds);
  std::vector<GemmSample> samples;
  for (const GemmSample& s : all)
    if (s.seconds >= kHostBoundFactor * fastest && s.flops > 0) samples.push_back(s);
  fit.samples_used = samples.size();
  if (samples.size() < 2) return fit;

  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const GemmSample& s : samples) {
    const double w = 1 / (s.seconds * s.seconds);
    const double y = std::max(s.seconds - launch_s, s.seconds * 0.05);
    sw += w, sx += w * s.flops, sy += w * y, sxx += w * s.flops * s.flops, sxy += w * s.flops * y;
  }
  const double det = sw * sxx - sx * sx;
  double slope = det > 0 ? (sw * sxy - sx * sy) / det : 0;
  double intercept = det > 0 ? (sy - slope * sx) / sw : 0;
  if (!(slope > 0)) {  // degenerate samples: the efficiency of the largest GEMM, no size term
    const auto big = std::max_element(samples.begin(), samples.end(),
                                      [](const GemmSample& a, const GemmSample& b) { return a.flops < b.flops; });
    slope = big->seconds / big->flops;
    intercept = 0;
  }
  fit.efficiency_max = std::min(1.0, 1 / (peak_flops * slope));
  // An intercept under 1 % of the smallest fitted GEMM's time is no size penalty that they show.
  double smallest = samples.front().seconds;
  for (const GemmSample& s : samples) smallest = std::min(smallest, s.seconds);
  fit.half_efficiency_flops = samples.size() >= 3 && intercept > 0.01 * smallest ? intercept / slope : -1;
  return fit;
}

}  // namespace cotune::core::perf
