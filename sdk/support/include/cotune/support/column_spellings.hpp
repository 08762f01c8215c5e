// How run logs and tables of measured runs spell the columns of the llm space's table schema
// (docs/simulate.md): Megatron-LM's argument names, as its argument dump, W&B configs and job
// comments write them, and a few other common spellings. `cotune import` and `calibrate` read a
// table's columns through it, and so does the replay executor, so that the three read one table
// alike.
#ifndef COTUNE_SUPPORT_COLUMN_SPELLINGS_HPP_
#define COTUNE_SUPPORT_COLUMN_SPELLINGS_HPP_

#include <string_view>
#include <utility>
#include <vector>

namespace cotune::support {

using ColumnSpelling = std::pair<std::string_view, std::string_view>;  // as spelled, the schema's column

// Megatron-LM's argument names and the column each gives as is ("global_batch_size" ->
// "global_batch", "tensor_model_parallel_size" -> "tp", ...).
const std::vector<ColumnSpelling>& megatron_argument_spellings();

// Other spellings tables use ("num_gpus" -> "gpus", "gpu_type" -> "gpu", "vocab_size" -> "vocab",
// "elapsed_time_per_iteration_ms" -> "step_time_ms", ...) and Hugging Face config names
// ("num_hidden_layers" -> "layers", "num_experts_per_tok" -> "top_k", "hidden_act" -> "activation",
// ...).
const std::vector<ColumnSpelling>& other_column_spellings();

// The schema column `name` spells (Megatron-LM's names first), or "" when it is none of these.
std::string_view column_spelled_by(std::string_view name);

// Whether a Megatron-LM position_embedding_type (any case) rotates queries and keys: rope, yarn or
// mrope. Its rotary_base is printed for every model, so the base alone says nothing.
bool rotary_position_embedding(std::string_view position_embedding_type);

}  // namespace cotune::support

#endif  // COTUNE_SUPPORT_COLUMN_SPELLINGS_HPP_
