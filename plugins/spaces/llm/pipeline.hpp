// How the decoder layers are split over pipeline stages, by the rules Megatron-LM enforces
// (../shared/data/frameworks/megatron_lm_rules.md M14-M19), and what each pipeline rank holds.
#ifndef COTUNE_PLUGINS_SPACES_LLM_PIPELINE_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_PIPELINE_HPP_

#include <string>
#include <vector>

#include "model.hpp"

namespace cotune_llm {

enum class SplitRule {
  kEven,                // layers divide by pp * vpp
  kAccountEmbedding,    // --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split:
                        // (layers + 2) divide, the first and the last virtual stage hold one layer fewer
  kAccountLoss,         // --account-for-loss-in-pipeline-split: (layers + 1) divide, the last one fewer
  kExplicit,            // --decoder-first/last-pipeline-num-layers
  kLayout,              // --pipeline-model-parallel-layout: the layers as even as whole layers allow, the
                        // middle virtual stages taking the remainder (the first holds the embedding,
                        // the last the loss)
};

struct PipelineSplit {
  SplitRule rule = SplitRule::kEven;
  std::vector<double> chunks;  // decoder layers per virtual stage, in model order (pp * vpp entries)
  double first_stage = 0;      // decoder layers of pipeline rank 0 and of the last rank
  double last_stage = 0;
};

// Splits `layers` over pp ranks of vpp virtual stages each. `first` and `last` (0: not given) are
// the layers of the first and last pipeline rank (Megatron's --decoder-first/last-pipeline-num-
// layers); without them the split is even, or accounts for the embedding and the loss as a layer
// each when that is what makes it even, or else is an explicit layout (kLayout). Returns an empty
// string and fills `out`, or says why the layers cannot be split so. `mtp_layers` (the model's
// multi-token-prediction layers, run by the last stage) lighten the last virtual stage of a layout.
std::string split_layers(double layers, double pp, double vpp, double first, double last, PipelineSplit* out,
                         double mtp_layers = 0);

// Megatron-LM's --pipeline-model-parallel-layout for a split: "E" (embedding), "t" per decoder
// layer, "m" per MTP layer, "L" (loss), virtual stages separated by "|".
std::string layout_string(const PipelineSplit& split, double mtp_layers);

// What one pipeline rank holds: its decoder layers (of which MoE), the embedding (rank 0), the
// output layer and loss, and the multi-token-prediction layers (the last rank).
struct RankLayers {
  double layers = 0;
  double moe_layers = 0;
  bool embedding = false;
  bool output = false;
  double mtp_layers = 0;
};
// Every rank's, in one pass over the split (rank i at index i); `out` is reused.
void ranks_of(const Model& m, const PipelineSplit& split, double pp, std::vector<RankLayers>* out);

}  // namespace cotune_llm

#endif
