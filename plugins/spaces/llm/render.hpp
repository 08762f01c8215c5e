// Renders a configuration as JSON, as Megatron-LM command-line arguments and as a TorchTitan TOML
// fragment.
#ifndef COTUNE_PLUGINS_SPACES_LLM_RENDER_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_RENDER_HPP_

#include <string>

#include "config.hpp"
#include "workload.hpp"

namespace cotune_llm {

extern const char* const kRecomputeNames[3];

// `etp_param`: the etp parameter as given (0: the tensor-parallel degree); `modules`: the
// recompute_modules choice, or "" for the space's default (left out, so that it reads back alike).
std::string render_json(const Config& c, double etp_param, const std::string& modules, const std::string& gpu_name);
std::string render_megatron(const Workload& w, const Config& c);
std::string render_torchtitan(const Workload& w, const Config& c);

}  // namespace cotune_llm

#endif
