// Launch formats of a configuration (docs/exports.md): the space's JSON, and for each launch target
// the format of its version: Megatron-LM arguments, a TorchTitan job (TOML, or command-line
// overrides at HEAD), Megatron-Bridge recipe overrides and a DeepSpeed ds_config.
#ifndef COTUNE_PLUGINS_SPACES_LLM_RENDER_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_RENDER_HPP_

#include <cotune/cotune.h>

#include <string>

#include "config.hpp"
#include "target.hpp"
#include "workload.hpp"

namespace cotune_llm {

extern const char* const kRecomputeNames[3];

// `etp_param`: the etp parameter as given (0: the tensor-parallel degree); `modules`: the
// recompute_modules choice, or "" for the space's default (left out, so that it reads back alike).
std::string render_json(const Config& c, double etp_param, const std::string& modules, const std::string& gpu_name);

// Each writes `t`'s version of its framework (the caller passes the newest when the space has no
// target of that framework). `hw`: the configuration's GPU (nodes, and the FP8 recipe it runs).
std::string render_megatron(const Workload& w, const Config& c, const Target& t, const cotune_hardware& hw);
std::string render_torchtitan(const Workload& w, const Config& c, const Target& t, const cotune_hardware& hw);
std::string render_nemo(const Workload& w, const Config& c, const Target& t, const cotune_hardware& hw);
std::string render_deepspeed(const Workload& w, const Config& c, const Target& t, const cotune_hardware& hw);

// Shared by the renderers.
namespace render_detail {
std::string num(double v);  // an integer without a decimal point
// "64 GPUs (8 nodes of 8)"; `nodes` and `per_node` receive the torchrun figures.
std::string world(const Config& c, const cotune_hardware& hw, double* nodes, double* per_node);
// Megatron-LM's --moe-layer-freq for the model: an int, or a Python list expression.
std::string moe_layer_pattern(const Model& m);
}  // namespace render_detail

}  // namespace cotune_llm

#endif
