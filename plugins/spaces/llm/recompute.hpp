// Selective recomputation by module, as Megatron-LM's --recompute-modules names them: which parts
// of a layer keep only their input and rebuild the rest during backward.
#ifndef COTUNE_PLUGINS_SPACES_LLM_RECOMPUTE_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_RECOMPUTE_HPP_

#include <cstdint>
#include <string>
#include <vector>

namespace cotune_llm {

enum RecomputeModule : uint32_t {
  kCoreAttn = 1u << 0,       // the attention core (softmax(QK^T)V): its score matrix
  kLayernorm = 1u << 1,      // the norms: their outputs (the following GEMMs' inputs)
  kMlaUpProj = 1u << 2,      // MLA's up projections: the queries, keys and values they make
  kMlp = 1u << 3,            // a dense MLP: its activation's input and output
  kMoe = 1u << 4,            // a whole MoE MLP: routing, dispatch and experts
  kMoeAct = 1u << 5,         // the experts' activation function: its output
  kSharedExperts = 1u << 6,  // the shared experts
};

// "core_attn", "mla_up_proj,mlp", ... (commas or '+', spaces ignored) as a mask; throws
// std::invalid_argument naming the unknown module.
uint32_t parse_recompute_modules(const std::string& text);
// The canonical text of a mask ("core_attn,mlp"), in Megatron-LM's spelling and order.
std::string recompute_modules_text(uint32_t mask);
// The module names Megatron-LM accepts, for messages.
const char* recompute_module_list();

}  // namespace cotune_llm

#endif
