// Which rows of the table answer which configuration, for one workload and one parameter list.
//
// A row belongs to the workload when each of its workload cells (a column named like a field of the
// workload JSON: global_batch, dtype, gpu, nodes, preset or model, ...) holds the workload's value.
// Known workload columns the workload JSON does not decide (the model's dimensions under a preset,
// an unstated dtype) must hold one value over the workload's rows, or they are runs of several
// workloads and the table is refused. A row answers a configuration when the cell of every parameter equals the
// parameter's value; the rows are indexed by the canonical values of those cells, so looking a
// configuration up costs one hash of its values.
#ifndef COTUNE_EXECUTOR_REPLAY_INDEX_HPP_
#define COTUNE_EXECUTOR_REPLAY_INDEX_HPP_

#include <cotune/cotune.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "replay_options.hpp"
#include "run_table.hpp"

namespace cotune_replay {

enum class ValueKind { kNumber, kBoolean, kText };

// One parameter of a trial: its name, how its cells are read, and its value in canonical form.
struct TrialParam {
  std::string name;
  ValueKind kind = ValueKind::kText;
  std::string value;
  // The canonical default of a parameter the space added later (COTUNE_PARAM_OPTIONAL): a table
  // without its column holds runs at that value.
  std::optional<std::string> optional_default;
  // The canonical value of a parameter whose domain has only one (the llm space's gpu on a cluster
  // of one GPU type): a table without its column holds runs at that value.
  std::optional<std::string> only_value;
};

// The trial's parameters: from params/config when the host gives them, else from the flat
// configuration JSON. Throws cotune::Error for a value it cannot read.
std::vector<TrialParam> trial_params(const cotune_trial& trial);

// The space's parameters of a trial without a configuration (names and kinds, values empty).
// Throws cotune::Error when the host gives none.
std::vector<TrialParam> study_params(const cotune_trial& study);

// The configuration values (as the space encodes them: a number, 1/0, a choice's index) of
// canonical parameter values (a choice matched in any case); false when one cannot be expressed
// (a choice the space lacks), with `why` naming the parameter, the value and the choices.
// A parameter marked in `unstated` (the table has no column for it) is written as NaN: the host
// completes it (ABI 1.7).
bool encode_values(const cotune_trial& study, const std::vector<std::string>& values, double* out,
                   std::string* why = nullptr, const std::vector<bool>* unstated = nullptr);

class ReplayIndex {
 public:
  // Throws cotune::Error when a parameter has no column (and no default, and is not unstated) or a
  // parameter cell of a row of this workload cannot be read.
  ReplayIndex(const RunTable& table, const ReplayOptions& options, std::string workload_json,
              const std::vector<TrialParam>& params);

  // Whether this index was built for the workload and parameter names/kinds.
  bool built_for(std::string_view workload_json, const std::vector<TrialParam>& params) const;

  // The rows (indices into table.rows()) that answer the configuration; nullptr when none does.
  const std::vector<size_t>* find(const std::vector<TrialParam>& params) const;

  // Every configuration the table answers: its canonical parameter values (in parameter order)
  // and its rows, ordered by the first row's position in the table.
  std::vector<std::pair<std::vector<std::string>, const std::vector<size_t>*>> configurations() const;

  size_t workload_rows() const { return workload_rows_; }
  // Per parameter: true for those the table does not state (the option "unstated"); rows match on
  // the others.
  const std::vector<bool>& unstated() const { return unstated_; }
  // The workload columns compared, with the workload's values: "global_batch=256, dtype=bf16".
  const std::string& compared() const { return compared_; }
  // The first row of another workload and the cell that says so ("" when every row is of this one).
  const std::string& first_mismatch() const { return first_mismatch_; }

 private:
  static std::string key(const std::vector<TrialParam>& params);
  static std::string signature(const std::vector<TrialParam>& params);

  std::string workload_json_;
  std::string signature_;
  std::unordered_map<std::string, std::vector<size_t>> rows_;
  std::vector<bool> unstated_;
  size_t workload_rows_ = 0;
  std::vector<size_t> undecided_;
  std::string compared_;
  std::string first_mismatch_;
  bool task_lora_ = false;  // the workload is a LoRA fine-tuning (a task column's rows must say lora)
};

}  // namespace cotune_replay

#endif  // COTUNE_EXECUTOR_REPLAY_INDEX_HPP_
