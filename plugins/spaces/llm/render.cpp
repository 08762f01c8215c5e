// The JSON form of a configuration and what the renderers share (see render.hpp).
#include "render.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cotune_llm {

const char* const kRecomputeNames[3] = {"none", "selective", "full"};

namespace render_detail {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

std::string world(const Config& c, const cotune_hardware& hw, double* nodes, double* per_node) {
  const double gpn = hw.gpus_per_node > 0 ? hw.gpus_per_node : 8;
  *per_node = std::min(gpn, c.gpus);
  *nodes = std::ceil(c.gpus / *per_node);
  return num(c.gpus) + " GPUs (" + num(*nodes) + (*nodes == 1 ? " node of " : " nodes of ") + num(*per_node) + ")";
}

std::string moe_layer_pattern(const Model& m) {
  if (m.dense_layers_first == 0) return num(m.moe_layer_freq);
  // Runs of dense (0) and MoE (1) layers: "([0]*3+[1]*58)".
  std::string out;
  double run = 0;
  int value = m.moe_layer(0) ? 1 : 0;
  for (int64_t i = 0; i <= static_cast<int64_t>(m.layers); ++i) {
    const bool end = i == static_cast<int64_t>(m.layers);
    const int v = end ? -1 : (m.moe_layer(static_cast<double>(i)) ? 1 : 0);
    if (v == value) {
      ++run;
      continue;
    }
    out += (out.empty() ? "" : "+") + std::string(value ? "[1]*" : "[0]*") + num(run);
    value = v;
    run = 1;
  }
  return "(" + out + ")";
}

}  // namespace render_detail

std::string render_json(const Config& c, double etp_param, const std::string& modules, const std::string& gpu_name) {
  nlohmann::ordered_json j;
  j["tp"] = static_cast<int64_t>(c.tp);
  j["pp"] = static_cast<int64_t>(c.pp);
  j["dp"] = static_cast<int64_t>(c.dp);
  j["cp"] = static_cast<int64_t>(c.cp);
  j["ep"] = static_cast<int64_t>(c.ep);
  j["micro_batch"] = static_cast<int64_t>(c.micro_batch);
  j["vpp"] = static_cast<int64_t>(c.vpp);
  j["zero"] = c.zero;
  j["recompute"] = kRecomputeNames[c.recompute];
  j["sp"] = c.sp;
  j["gpus"] = static_cast<int64_t>(c.gpus);
  j["gpu"] = gpu_name;
  // Left out at their default (0: the rule decides), so configurations from before they existed
  // render as they did.
  if (etp_param > 0) j["etp"] = static_cast<int64_t>(etp_param);
  if (c.first_stage > 0) j["first_stage_layers"] = static_cast<int64_t>(c.first_stage);
  if (c.last_stage > 0) j["last_stage_layers"] = static_cast<int64_t>(c.last_stage);
  if (!modules.empty()) j["recompute_modules"] = modules;
  return j.dump();
}

}  // namespace cotune_llm
