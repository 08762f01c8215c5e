// A throughput or a step time the table does not hold, derived from the one it holds: a step trains
// global_batch * seq_len tokens, so tokens_per_s = global_batch * seq_len / step_time_s and back.
// Logs often record only one of the two, and a study may optimise either.
#ifndef COTUNE_EXECUTOR_REPLAY_DERIVED_METRIC_HPP_
#define COTUNE_EXECUTOR_REPLAY_DERIVED_METRIC_HPP_

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>

#include "run_table.hpp"

namespace cotune_replay {

class DerivedMetric {
 public:
  // The metric derivable for rows of this workload: tokens_per_s when the table has step_time_s
  // and no tokens_per_s, step_time_s in the opposite case, each only when the tokens of a step are
  // known, from the row's global_batch and seq_len cells or else from the workload's fields of
  // those names. nullopt otherwise (the table holds both, or neither, or the tokens are unknown);
  // in the last case `why_not` says which field is missing.
  static std::optional<DerivedMetric> of(const RunTable& table, const nlohmann::json& workload,
                                         std::string* why_not = nullptr);

  const std::string& name() const { return name_; }
  // How it is derived, for the log: "tokens_per_s = global_batch (column) * seq_len (workload, 8192) / step_time_s".
  const std::string& how() const { return how_; }

  // The row's value; NaN when its source metric or its tokens per step are missing.
  double value(const RunRow& row) const;

 private:
  // A factor of the tokens per step: a column of the row, else a fixed value from the workload.
  struct Factor {
    std::optional<size_t> column;
    double fixed = 0;
    double of(const RunRow& row) const;
  };

  std::string name_, how_;
  size_t source_ = 0;  // index of the source metric in the table's metrics
  Factor batch_, seq_;
};

}  // namespace cotune_replay

#endif  // COTUNE_EXECUTOR_REPLAY_DERIVED_METRIC_HPP_
