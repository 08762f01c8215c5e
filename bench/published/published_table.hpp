// Tables of published training runs (../shared/data/published/, schema in its README): each row
// as the llm CSV schema's cells (docs/simulate.md), with what the table leaves unstated and the
// measured step time. Used by bench/perfmodel_accuracy_bench and tests/unit/perf_accuracy_test.
//
// The rules, the same for every row and table (no per-row constant):
//  - the model: the dimensions the row gives; a row whose `model` names a preset (its name with
//    punctuation and case ignored, or all of its words) takes the preset's architecture for what
//    the table has no column for (head_dim, MLA, shared experts, dense first layers, MTP); a row
//    with neither dimensions nor a preset is refused ("model dimensions unknown");
//  - SwiGLU: the preset's, else by family (Llama, Qwen, Mistral/Mixtral, DeepSeek, Kimi, gpt-oss,
//    Gemma: gated; GPT, MPT, Nemotron, OPT, BLOOM, Falcon: not), else gated unless ffn = 4 hidden;
//    rotary embeddings where gated, else by family (Nemotron, Falcon, GPT-NeoX, GPT-J, StarCoder2);
//  - the layout as printed; dp = gpus / (tp pp cp); fsdp > 0 is ZeRO-3 (FSDP), otherwise the
//    distributed optimizer (ZeRO-1: Megatron-Bridge's and NeMo's default); sp when tp > 1 (their
//    recipes' default); etp unstated is Megatron's default (tp);
//  - kernels (the llm space's training.kernels): the row's `kernels` cell, else `eager` for
//    PyTorch-native trainers by source_repo (TorchTitan, llm-foundry/Composer, torchtune, Hugging
//    Face, ...) or `compiled` where the row's notes say torch.compile was on, else `fused`
//    (Megatron-LM, NeMo, Megatron-Bridge: Transformer Engine);
//  - gradient buffers in bf16 (training.grad_reduce) for Megatron-Bridge's performance summary, whose
//    perf recipes set grad_reduce_in_fp32 = False; fp32 elsewhere (Megatron-LM's default with bf16);
//  - recompute written as activation checkpointing yes/no is full/none; unstated on a TorchTitan
//    row is TorchTitan's default, selective (its per-operator policy);
//  - unstated micro_batch, vpp, recompute or (on a MoE row) ep are left to the caller (the recipe
//    tuned them).
#ifndef COTUNE_BENCH_PUBLISHED_PUBLISHED_TABLE_HPP_
#define COTUNE_BENCH_PUBLISHED_PUBLISHED_TABLE_HPP_

#include <map>
#include <string>
#include <vector>

namespace cotune::core::perf {

// How a table counted its TFLOP/s: attention scores over the causal half (Megatron-LM and NeMo
// since 2025) or over the whole sequence (their formulas before).
enum class FlopsConvention { kCausal, kFullAttention };

struct PublishedRow {
  size_t line = 0;
  std::string model, gpu, dtype;  // as the table names them (gpu: the catalogue name it maps to)
  std::string variant;             // model_variant: "+ torch.compile", "AsyncTP", ... ("" when none)
  std::string version;             // the software release it ran (source_version; "" when unstated)
  bool moe = false;
  std::map<std::string, std::string> cells;  // the llm CSV schema's cells
  bool micro_batch_unstated = false, vpp_unstated = false, recompute_unstated = false, etp_unstated = false,
       ep_unstated = false;
  // The recompute cell is the framework's default, not the row's word (TorchTitan's selective): full
  // recomputation is tried when it does not fit, as a user of that framework would.
  bool recompute_defaulted = false;
  double measured_step_s = 0;  // from step_time_s or tokens/s (per GPU); or TFLOP/s (below)
  std::string measured_from;   // which column it came from
  // TFLOP/s when that is all the row gives. Counted with full attention, the step time follows from
  // the dense formula (measured_step_s is set); counted causally, from the model's own FLOPs
  // (Megatron-LM's count, MoE and MLA included: measured_step_s stays 0 until simulated).
  double published_tflops = 0;
  // Its TFLOP/s count the recomputed forward (Megatron-LM's A100 papers, eq. 3, under full
  // recomputation): hardware FLOPs, converted as such.
  bool recompute_counted = false;
  std::string refused;         // why the row cannot be described ("" when it can)

  std::string slice() const;   // "gpu dtype dense|moe"
  std::string group() const;   // "model gpu dtype": rows whose throughput is ranked together
  // The same within one software release: layouts compared on one stack, as a team's search sees
  // them (the same layout ran up to 47 % faster in a later release of these tables).
  std::string release_group() const;
};

struct PublishedTable {
  std::string name;  // the file's stem
  FlopsConvention convention = FlopsConvention::kFullAttention;
  std::string convention_note;  // how the convention was found
  std::vector<PublishedRow> rows;
};

// Reads one table. Throws UserError when the file cannot be read or lacks the schema's columns.
PublishedTable read_published_table(const std::string& path);

// The tables of a folder (every *.csv, sorted by name).
std::vector<PublishedTable> read_published_tables(const std::string& dir);

}  // namespace cotune::core::perf

#endif  // COTUNE_BENCH_PUBLISHED_PUBLISHED_TABLE_HPP_
