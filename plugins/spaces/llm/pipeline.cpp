// Pipeline splits (see pipeline.hpp).
#include "pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cotune_llm {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

bool divides(double a, double b) { return a >= 1 && std::fmod(b, a) == 0; }


}  // namespace

std::string split_layers(double layers, double pp, double vpp, double first, double last, PipelineSplit* out,
                         double mtp_layers) {
  PipelineSplit s;
  const double stages = pp * vpp;
  s.chunks.assign(static_cast<size_t>(stages), 0);
  const bool even = divides(stages, layers);
  const bool with_embedding = pp > 1 && divides(stages, layers + 2);
  const bool with_loss = pp > 1 && divides(stages, layers + 1);
  if (first > 0 || last > 0) {
    s.rule = SplitRule::kExplicit;
    if (pp < 2) return "first_stage_layers and last_stage_layers need pp > 1";
    const double middle_ranks = pp - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
    const double middle = layers - first - last;
    if (middle < 0 || (middle > 0) != (middle_ranks > 0))
      return "first_stage_layers (" + num(first) + ") and last_stage_layers (" + num(last) +
             ") leave " + num(middle) + " layers for " + num(middle_ranks) +
             " middle pipeline ranks: there must be middle layers exactly when there are middle ranks";
    const double per_rank = middle_ranks > 0 ? middle / middle_ranks : 0;
    if (per_rank != std::floor(per_rank))
      return "the " + num(middle) + " layers between the first and the last stage do not split evenly over " +
             num(middle_ranks) + " pipeline ranks";
    const double f = first > 0 ? first : per_rank, l = last > 0 ? last : per_rank;
    if (!divides(vpp, f) || !divides(vpp, l) || (per_rank > 0 && !divides(vpp, per_rank)))
      return "with vpp " + num(vpp) + " the first (" + num(f) + "), last (" + num(l) + ") and middle (" +
             num(per_rank) + ") ranks' layers must each divide by vpp";
    for (size_t i = 0; i < s.chunks.size(); ++i) {
      const double rank = std::fmod(static_cast<double>(i), pp);
      s.chunks[i] = (rank == 0 ? f : rank == pp - 1 ? l : per_rank) / vpp;
    }
  } else if (even) {
    s.rule = SplitRule::kEven;
    for (double& c : s.chunks) c = layers / stages;
  } else if (with_embedding) {
    s.rule = SplitRule::kAccountEmbedding;
    for (double& c : s.chunks) c = (layers + 2) / stages;
    s.chunks.front() -= 1;
    s.chunks.back() -= 1;
  } else if (with_loss) {
    s.rule = SplitRule::kAccountLoss;
    for (double& c : s.chunks) c = (layers + 1) / stages;
    s.chunks.back() -= 1;
  } else if (pp > 1) {
    // No flag makes it even: a layout as even as whole layers allow. The first and last virtual
    // stages, which hold the embedding and the loss, take the floor; the middle ones the rest.
    s.rule = SplitRule::kLayout;
    const double base = std::floor(layers / stages);
    for (double& c : s.chunks) c = base;
    // The last virtual stage also runs the multi-token-prediction layers after its decoder layers,
    // each a whole decoder layer's work (attention, MLP, and its own output layer and loss): it
    // takes that many decoder layers fewer, as the layouts Megatron-Bridge builds for DeepSeek-V3
    // do, so that it is not the pipeline's slowest stage by an MTP layer and an output layer.
    s.chunks.back() = std::max(0.0, base - mtp_layers);
    double rest = layers - base * (stages - 1) - s.chunks.back();
    do {
      for (size_t i = 1; i + 1 < s.chunks.size() && rest > 0; ++i) {
        s.chunks[i] += 1;
        rest -= 1;
      }
    } while (rest > 0 && mtp_layers > 0 && s.chunks.size() > 2);
    if (rest > 0) s.chunks[mtp_layers > 0 ? 0 : s.chunks.size() - 1] += rest;  // two stages only
  } else {
    return "layers (" + num(layers) + ") do not split over vpp (" + num(vpp) + ") virtual stages";
  }
  s.first_stage = 0;
  s.last_stage = 0;
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    const double rank = std::fmod(static_cast<double>(i), pp);
    if (rank == 0) s.first_stage += s.chunks[i];
    if (rank == pp - 1) s.last_stage += s.chunks[i];
  }
  *out = std::move(s);
  return "";
}

std::string layout_string(const PipelineSplit& split, double mtp_layers) {
  std::string out = "E";
  for (size_t i = 0; i < split.chunks.size(); ++i) {
    if (i > 0) out += "|";
    out += std::string(static_cast<size_t>(split.chunks[i]), 't');
  }
  out += std::string(static_cast<size_t>(mtp_layers), 'm');
  return out + "L";
}

void ranks_of(const Model& m, const PipelineSplit& split, double pp, std::vector<RankLayers>* out) {
  const size_t ranks = static_cast<size_t>(pp);
  out->assign(ranks, RankLayers{});
  double depth = 0;
  for (size_t i = 0; i < split.chunks.size(); ++i) {
    RankLayers& r = (*out)[i % ranks];
    const double n = split.chunks[i];
    r.layers += n;
    if (m.moe())
      for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) r.moe_layers += m.moe_layer(depth + static_cast<double>(i)) ? 1 : 0;
    depth += n;
  }
  out->front().embedding = true;
  out->back().output = true;
  out->back().mtp_layers = m.mtp_layers;
}

}  // namespace cotune_llm
