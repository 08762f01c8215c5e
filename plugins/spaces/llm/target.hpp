// Launch targets: the framework versions the llm space exports to (docs/exports.md), and what each
// refuses that the space itself would accept. The versions are those recorded in
// ../shared/data/frameworks/ (their rules are cited by id: M27 is megatron_lm_rules.md's).
#ifndef COTUNE_PLUGINS_SPACES_LLM_TARGET_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_TARGET_HPP_

#include <string>
#include <string_view>

#include "config.hpp"
#include "workload.hpp"

namespace cotune_llm {

enum class Framework { kMegatron, kTorchtitan, kNemo, kDeepspeed };

struct FrameworkVersion {
  const char* name;    // as users spell it: "core_v0.19.0", "main", "v0.2.2"
  const char* commit;  // the pinned commit
};

struct Target {
  Framework framework = Framework::kMegatron;
  int version = 0;  // index into versions_of(framework); 0 is the newest

  const FrameworkVersion& pinned() const;
  // "Megatron-LM core_v0.19.0 (5be96267)".
  std::string label() const;
  bool is(Framework f, const char* version_name) const;
};

// The newest version of a framework.
Target newest(Framework f);

// Parses "megatron@core_v0.19.0", "torchtitan@HEAD", "nemo", a commit prefix of 7+ characters.
// Throws cotune::Error(INVALID_ARGUMENT) naming the targets the space knows.
Target parse_target(std::string_view text);

// The workload as the target runs it: PyTorch-native frameworks (TorchTitan, DeepSpeed) do not run
// Transformer Engine's fused kernels, so kernels "fused" becomes "eager" there.
Workload workload_for(const Workload& w, const Target& t);

// Whether a workload can target the framework at all: "" or why not (a LoRA run on Megatron-LM's
// pretraining script, ...).
std::string workload_refusal(const Workload& w, const Target& t);

// "" when the target launches `c` as the space models it; otherwise one line naming the framework,
// its version and the rule. Allocation-free when the answer is "" and `why` is NULL.
bool target_allows(const Workload& w, const Config& c, const Target& t, std::string* why);

// TorchTitan's pipeline_parallel_layers_per_stage for pp * vpp stages at this version, counting the
// embedding and the output as a layer each: 0 when TorchTitan's default already gives them (one
// stage per rank for 1F1B, two for interleaved), -1 when no value gives them.
double torchtitan_layers_per_stage(double layers, double pp, double vpp, const Target& t);

}  // namespace cotune_llm

#endif
