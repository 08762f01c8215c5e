#include "throughput_completion.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

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

// A positive number the workload states under this name (at any depth), else 0.
double workload_number(const std::map<std::string, std::optional<nlohmann::json>>& fields, const char* name) {
  const auto it = fields.find(name);
  if (it == fields.end() || !it->second || !it->second->is_number()) return 0;
  const double v = it->second->get<double>();
  return v > 0 ? v : 0;
}

// The mean of f over the rows where it is a number; NaN when it is nowhere.
template <class F>
double mean_over(const std::vector<const RunRow*>& rows, F&& f) {
  double sum = 0;
  size_t n = 0;
  for (const RunRow* r : rows)
    if (const double v = f(*r); !std::isnan(v)) {
      sum += v;
      ++n;
    }
  return n > 0 ? sum / double(n) : kNaN;
}

}  // namespace

double ThroughputCompletion::Source::of(const RunRow& row) const {
  if (column)
    if (std::optional<double> v = parse_number(row.cells[*column]); v && *v > 0) return *v;
  return fixed > 0 ? fixed : kNaN;
}

std::string ThroughputCompletion::Source::text(const char* name) const {
  return std::string(name) + (column ? " (column)" : " (workload, " + number_key(fixed) + ")");
}

ThroughputCompletion::ThroughputCompletion(const RunTable& table, const nlohmann::json& workload,
                                           bool gpus_parameter) {
  std::map<std::string, std::optional<nlohmann::json>> fields;
  if (workload.is_object()) collect_fields(workload, fields);
  batch_ = {table.column("global_batch"), workload_number(fields, "global_batch")};
  seq_ = {table.column("seq_len"), workload_number(fields, "seq_len")};
  cluster_gpus_ = workload_number(fields, "nodes") * workload_number(fields, "gpus_per_node");
  tokens_ = metric_index(table, "tokens_per_s");
  step_ = metric_index(table, "step_time_s");
  per_gpu_ = metric_index(table, "tokens_per_s_per_gpu");

  const bool tokens_known = batch_.known() && seq_.known();
  std::string missing;  // why the tokens of a step are unknown
  if (!batch_.known()) missing = "global_batch";
  if (!seq_.known()) missing += std::string(missing.empty() ? "" : " and ") + "seq_len";
  const bool gpus_known = gpus_parameter || cluster_gpus_ > 0;

  // tokens_per_s: from the per-GPU figure, else from the step time.
  std::string tokens_how;
  if (per_gpu_ && gpus_known)
    tokens_how = std::string("tokens_per_s_per_gpu x ") +
                 (gpus_parameter ? "the trial's gpus" : "the workload's GPUs (" + number_key(cluster_gpus_) + ")");
  if (step_ && tokens_known)
    tokens_how += std::string(tokens_how.empty() ? "" : ", else ") + batch_.text("global_batch") + " x " +
                  seq_.text("seq_len") + " / step_time_s";
  if (!tokens_how.empty()) notes_.push_back("tokens_per_s where a row has none = " + tokens_how);
  else if (per_gpu_ && !tokens_)
    notes_.push_back("tokens_per_s is not derived from tokens_per_s_per_gpu: neither the space nor the workload "
                     "says the GPUs (nodes and gpus_per_node)");
  else if (step_ && !tokens_)
    notes_.push_back("tokens_per_s is not derived from step_time_s: the table has no " + missing +
                     " column and the workload states no such number");
  if (!tokens_ && !tokens_how.empty()) added_.push_back("tokens_per_s");

  // step_time_s: from tokens_per_s (given or derived).
  const bool tokens_available = tokens_ || !tokens_how.empty();
  if (tokens_available && tokens_known) {
    notes_.push_back("step_time_s where a row has none = " + batch_.text("global_batch") + " x " + seq_.text("seq_len") +
                     " / tokens_per_s");
    if (!step_) added_.push_back("step_time_s");
  } else if (tokens_available && !step_) {
    notes_.push_back("step_time_s is not derived from tokens_per_s: the table has no " + missing +
                     " column and the workload states no such number");
  }
}

double ThroughputCompletion::tokens_per_step(const RunRow& row) const { return batch_.of(row) * seq_.of(row); }

double ThroughputCompletion::row_tokens_per_s(const RunRow& row, double gpus) const {
  if (tokens_ && !std::isnan(row.metrics[*tokens_])) return row.metrics[*tokens_];
  if (per_gpu_ && !std::isnan(row.metrics[*per_gpu_])) {
    const double g = gpus > 0 ? gpus : cluster_gpus_ > 0 ? cluster_gpus_ : kNaN;
    if (!std::isnan(g)) return row.metrics[*per_gpu_] * g;
  }
  if (step_ && row.metrics[*step_] > 0) return tokens_per_step(row) / row.metrics[*step_];
  return kNaN;
}

void ThroughputCompletion::complete(const std::vector<const RunRow*>& rows, double gpus, nlohmann::json& m) const {
  auto lacks = [&](const std::optional<size_t>& metric) {
    return !metric || std::any_of(rows.begin(), rows.end(), [&](const RunRow* r) { return std::isnan(r->metrics[*metric]); });
  };
  if (lacks(tokens_)) {
    const double v = mean_over(rows, [&](const RunRow& r) { return row_tokens_per_s(r, gpus); });
    if (!std::isnan(v)) m["tokens_per_s"] = v;
  }
  // From the answer's throughput, so that its two figures agree.
  if (lacks(step_) && m.contains("tokens_per_s") && m["tokens_per_s"].get<double>() > 0) {
    const double v = mean_over(rows, [&](const RunRow& r) { return tokens_per_step(r); }) / m["tokens_per_s"].get<double>();
    if (!std::isnan(v)) m["step_time_s"] = v;
  }
}

}  // namespace cotune_replay
