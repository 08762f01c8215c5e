// The job's throughput and step time where a table's rows do not give them, from what they give: a
// step trains global_batch * seq_len tokens, so tokens_per_s = global_batch * seq_len / step_time_s
// and back, and a per-GPU throughput times the GPUs is the job's. Logs often record only one of
// these (published tables only the per-GPU figure), and a study may optimise any of them.
#ifndef COTUNE_EXECUTOR_REPLAY_THROUGHPUT_COMPLETION_HPP_
#define COTUNE_EXECUTOR_REPLAY_THROUGHPUT_COMPLETION_HPP_

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "run_table.hpp"

namespace cotune_replay {

class ThroughputCompletion {
 public:
  // For rows of this workload. The tokens of a step come from each row's global_batch and seq_len
  // cells, or else from the workload's fields of those names; the GPUs from the trial's gpus
  // parameter when the space has one (`gpus_parameter`), or else the workload's nodes x gpus_per_node.
  ThroughputCompletion(const RunTable& table, const nlohmann::json& workload, bool gpus_parameter);

  // The metrics it can answer that the table has no column for (tokens_per_s, step_time_s).
  const std::vector<std::string>& added() const { return added_; }
  // One line per metric it can complete ("tokens_per_s = tokens_per_s_per_gpu x gpus (column)"), and
  // one per metric it cannot although the table has the other ("... : the workload states no seq_len").
  const std::vector<std::string>& notes() const { return notes_; }

  // Completes the answer `m` (the means of the table's metrics over `rows`, the configuration's ok
  // rows): where a row lacks its throughput, each row's own, per-GPU x `gpus` (the trial's GPUs;
  // NaN: unknown) or tokens-per-step / step-time figure is averaged; where a row lacks its step
  // time, the step's tokens over the answer's throughput.
  void complete(const std::vector<const RunRow*>& rows, double gpus, nlohmann::json& m) const;

 private:
  // A quantity of a row: its column's cell, else a fixed value from the workload.
  struct Source {
    std::optional<size_t> column;
    double fixed = 0;
    bool known() const { return column || fixed > 0; }
    double of(const RunRow& row) const;  // NaN when neither says
    std::string text(const char* name) const;  // "seq_len (column)", "seq_len (workload, 8192)"
  };
  double tokens_per_step(const RunRow& row) const;
  double row_tokens_per_s(const RunRow& row, double gpus) const;  // NaN when the row cannot say

  Source batch_, seq_;
  double cluster_gpus_ = 0;  // the workload's nodes x gpus_per_node; 0 unknown
  // Indices of the metrics in the table's (none: no such column).
  std::optional<size_t> tokens_, step_, per_gpu_;
  std::vector<std::string> added_, notes_;
};

}  // namespace cotune_replay

#endif  // COTUNE_EXECUTOR_REPLAY_THROUGHPUT_COMPLETION_HPP_
