#include <cotune/support/column_spellings.hpp>

#include <cctype>
#include <string>

namespace cotune::support {

const std::vector<ColumnSpelling>& megatron_argument_spellings() {
  static const std::vector<ColumnSpelling> spellings = {
      {"num_layers", "layers"},
      {"hidden_size", "hidden"},
      {"num_attention_heads", "heads"},
      {"ffn_hidden_size", "ffn_hidden"},
      {"seq_length", "seq_len"},
      {"global_batch_size", "global_batch"},
      {"micro_batch_size", "micro_batch"},
      {"tensor_model_parallel_size", "tp"},
      {"pipeline_model_parallel_size", "pp"},
      {"context_parallel_size", "cp"},
      {"expert_model_parallel_size", "ep"},
      {"expert_tensor_parallel_size", "etp"},
      {"virtual_pipeline_model_parallel_size", "vpp"},
      {"world_size", "gpus"},
      {"data_parallel_size", "dp"},
      {"num_experts", "experts"},
      {"moe_router_topk", "top_k"},
      {"moe_ffn_hidden_size", "expert_ffn_hidden"},
      {"moe_router_num_groups", "expert_groups"},
      {"moe_router_group_topk", "group_top_k"},
      {"num_layers_in_first_pipeline_stage", "first_stage_layers"},
      {"num_layers_in_last_pipeline_stage", "last_stage_layers"},
      {"overlap_grad_reduce", "overlap_grad_reduce"},
      {"overlap_moe_expert_parallel_comm", "overlap_moe_comm"},
      {"tp_comm_overlap", "tp_comm_overlap"},
      {"cross_entropy_loss_fusion", "cross_entropy_fusion"},
      {"sequence_parallel", "sp"},
      {"swiglu", "gated_mlp"},
  };
  return spellings;
}

const std::vector<ColumnSpelling>& other_column_spellings() {
  static const std::vector<ColumnSpelling> spellings = {
      {"num_gpus", "gpus"},
      {"n_gpus", "gpus"},
      {"gpu_type", "gpu"},
      {"padded_vocab_size", "vocab"},
      {"vocab_size", "vocab"},
      {"num_query_groups", "kv_heads"},
      {"recompute_granularity", "recompute"},
      {"elapsed_time_per_iteration_ms", "step_time_ms"},
      {"elapsed_time_per_iteration_s", "step_time_s"},
      // PyTorch FSDP's, Lightning's and Composer's names
      {"sharding_strategy", "fsdp"},
      {"activation_checkpointing", "recompute"},
      {"gradient_checkpointing", "recompute"},
      {"mixed_precision", "dtype"},
      {"precision", "dtype"},
      {"torch_dtype", "dtype"},
      // Megatron-LM's head width (its rotary_base is printed for every model, rotary or not: not read)
      {"kv_channels", "head_dim"},
      // Hugging Face config.json names, for a model described as its card gives it
      {"num_hidden_layers", "layers"},
      {"num_key_value_heads", "kv_heads"},
      {"intermediate_size", "ffn_hidden"},
      {"num_local_experts", "experts"},
      {"n_routed_experts", "experts"},
      {"num_experts_per_tok", "top_k"},
      {"moe_intermediate_size", "expert_ffn_hidden"},
      {"rope_theta", "rope_base"},
      {"tie_word_embeddings", "tie_embeddings"},
      {"hidden_act", "activation"},
      {"n_shared_experts", "shared_experts"},
      {"first_k_dense_replace", "dense_layers_first"},
      {"num_nextn_predict_layers", "mtp_layers"},
      {"n_group", "expert_groups"},
      {"topk_group", "group_top_k"},
  };
  return spellings;
}

std::string_view column_spelled_by(std::string_view name) {
  for (const auto& [spelled, column] : megatron_argument_spellings())
    if (name == spelled) return column;
  for (const auto& [spelled, column] : other_column_spellings())
    if (name == spelled) return column;
  return {};
}

bool rotary_position_embedding(std::string_view position_embedding_type) {
  std::string t;
  for (char c : position_embedding_type) t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t == "rope" || t == "yarn" || t == "mrope";
}

}  // namespace cotune::support
