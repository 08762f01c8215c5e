// Recompute module names (see recompute.hpp).
#include "recompute.hpp"

#include <cotune/support/likely_meant.hpp>

#include <stdexcept>

namespace cotune_llm {
namespace {

struct Named {
  const char* name;
  RecomputeModule bit;
};
const Named kModules[] = {{"core_attn", kCoreAttn}, {"layernorm", kLayernorm},   {"mla_up_proj", kMlaUpProj},
                          {"mlp", kMlp},            {"moe", kMoe},               {"moe_act", kMoeAct},
                          {"shared_experts", kSharedExperts}};

}  // namespace

const char* recompute_module_list() { return "core_attn, layernorm, mla_up_proj, mlp, moe, moe_act, shared_experts"; }

uint32_t parse_recompute_modules(const std::string& text) {
  uint32_t mask = 0;
  std::string word;
  auto flush = [&] {
    if (word.empty()) return;
    bool known = false;
    for (const Named& m : kModules)
      if (word == m.name) mask |= m.bit, known = true;
    if (!known)
      throw std::invalid_argument("unknown recompute module '" + word + "'" +
                                  cotune::support::did_you_mean_listed(word, recompute_module_list()) + " (expected " +
                                  recompute_module_list() + ")");
    word.clear();
  };
  for (char ch : text) {
    if (ch == ',' || ch == '+') flush();
    else if (ch != ' ') word += ch;
  }
  flush();
  if (mask == 0) throw std::invalid_argument("no recompute module named (expected " + std::string(recompute_module_list()) + ")");
  return mask;
}

std::string recompute_modules_text(uint32_t mask) {
  std::string out;
  for (const Named& m : kModules)
    if (mask & m.bit) out += (out.empty() ? "" : ",") + std::string(m.name);
  return out;
}

}  // namespace cotune_llm
