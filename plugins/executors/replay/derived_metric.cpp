#include "derived_metric.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "cells.hpp"

namespace cotune_replay {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::optional<size_t> metric_index(const RunTable& table, const std::string& name) {
  const std::vector<std::string>& names = table.metric_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) return std::nullopt;
  return size_t(it - names.begin());
}

}  // namespace

double DerivedMetric::Factor::of(const RunRow& row) const {
  if (column)
    if (std::optional<double> v = parse_number(row.cells[*column]); v && *v > 0) return *v;
  return fixed > 0 ? fixed : kNaN;
}

std::optional<DerivedMetric> DerivedMetric::of(const RunTable& table, const nlohmann::json& workload,
                                               std::string* why_not) {
  const std::optional<size_t> step = metric_index(table, "step_time_s"), tokens = metric_index(table, "tokens_per_s");
  if (step.has_value() == tokens.has_value()) return std::nullopt;
  DerivedMetric d;
  d.name_ = step ? "tokens_per_s" : "step_time_s";
  d.source_ = step ? *step : *tokens;

  std::map<std::string, std::optional<nlohmann::json>> fields;
  if (workload.is_object()) collect_fields(workload, fields);
  std::string factors;
  for (auto [factor, field] : {std::pair{&d.batch_, "global_batch"}, std::pair{&d.seq_, "seq_len"}}) {
    factor->column = table.column(field);
    const auto it = fields.find(field);
    if (it != fields.end() && it->second && it->second->is_number() && it->second->get<double>() > 0)
      factor->fixed = it->second->get<double>();
    if (!factor->column && factor->fixed <= 0) {
      if (why_not != nullptr)
        *why_not = d.name_ + " is not derived from " + (step ? "step_time_s" : "tokens_per_s") + ": the table has no " +
                   field + " column and the workload states no " + field + " number";
      return std::nullopt;
    }
    factors += std::string(factors.empty() ? "" : " * ") + field +
               (factor->column ? " (column)" : " (workload, " + number_key(factor->fixed) + ")");
  }
  d.how_ = d.name_ + " = " + factors + " / " + (step ? "step_time_s" : "tokens_per_s");
  return d;
}

double DerivedMetric::value(const RunRow& row) const {
  const double source = row.metrics[source_];
  if (!(source > 0)) return kNaN;
  return batch_.of(row) * seq_.of(row) / source;
}

}  // namespace cotune_replay
