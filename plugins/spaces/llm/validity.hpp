// The constraints of the LLM space: a configuration is valid when its degrees multiply to the GPUs
// used, every split divides what it splits, and its memory estimate fits the GPU.
#ifndef COTUNE_PLUGINS_SPACES_LLM_VALIDITY_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_VALIDITY_HPP_

#include <cotune/cotune.h>

#include <string>

#include "config.hpp"
#include "workload.hpp"

namespace cotune_llm {

// True when `c` is valid. When it is not and `why` is not NULL, *why receives one line naming the
// rule and the numbers. Allocation-free when `why` is NULL (the hot path).
bool check_config(const Workload& w, const Config& c, const cotune_hardware& hw, std::string* why);

}  // namespace cotune_llm

#endif
