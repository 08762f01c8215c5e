// The replay executor: answers trials from a CSV of measured runs, so that any table of logged runs
// becomes an offline benchmark. A configuration with no row for the study's workload is
// `unavailable` (the study does not count it against the trial budget); repeated rows are repeated
// measurements and answer their mean. Options and matching rules: docs/executors.md.
#include <cotune/cotune.h>
#include <cotune/cotune.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cells.hpp"
#include "replay_index.hpp"
#include "replay_options.hpp"
#include "run_table.hpp"
#include "throughput_completion.hpp"

namespace cotune_replay {

class ReplayExecutor {
 public:
  struct Job {
    cotune::JobResult result;
  };

  explicit ReplayExecutor(std::string_view options_json)
      : options_(parse_replay_options(options_json)), table_(options_) {}

  // The table's metric columns, the throughput and step time derived from them where it has no
  // column for them, and the count of rows each answer averages.
  std::vector<std::string> metrics(const cotune_trial& study) {
    std::vector<std::string> names = table_.metric_names();
    bool gpus_parameter = false;
    for (size_t i = 0; study.params != nullptr && i < study.num_params; ++i)
      gpus_parameter = gpus_parameter || cotune::view(study.params[i]->name) == "gpus";
    const std::vector<std::string>& added = completion_for(cotune::view(study.workload_json), gpus_parameter).added();
    names.insert(names.end(), added.begin(), added.end());
    names.emplace_back("replay_rows");
    return names;
  }
  int32_t capacity() { return options_.capacity; }

  std::unique_ptr<Job> submit(const cotune_trial& trial) {
    const std::vector<TrialParam> params = trial_params(trial);
    const std::string_view workload = cotune::view(trial.workload_json);
    // Indexed once per workload and parameter list (a study has one of each).
    index_for(workload, params);
    auto job = std::make_unique<Job>();
    job->result.attempts = 1;
    const std::vector<size_t>* rows = index_->find(params);
    if (rows == nullptr) {
      job->result.status = COTUNE_STATUS_UNAVAILABLE;
      job->result.error = "no row of " + table_.file() + " measured this configuration; " +
                          std::to_string(index_->workload_rows()) + " of its " + std::to_string(table_.rows().size()) +
                          " rows are for this workload" +
                          (index_->compared().empty() ? "" : " (" + index_->compared() + ")");
      return job;
    }
    double gpus = std::nan("");  // the trial's GPUs, which a per-GPU throughput is multiplied by
    bool gpus_parameter = false;
    for (const TrialParam& p : params)
      if (p.name == "gpus") {
        gpus_parameter = true;
        if (std::optional<double> g = parse_number(p.value)) gpus = *g;
      }
    answer(*rows, completion_for(workload, gpus_parameter), gpus, job->result);
    return job;
  }

  // Every configuration the table measured for the study's workload: the host searches among these.
  std::vector<double> candidates(const cotune_trial& study) {
    if (!options_.restrict_search)
      throw cotune::Error(COTUNE_ERR_UNSUPPORTED, "replay executor: restrict_search is false: the study searches the whole space");
    const std::vector<TrialParam> params = study_params(study);
    const std::string_view workload = cotune::view(study.workload_json);
    index_for(workload, params);
    if (index_->workload_rows() == 0 && !table_.rows().empty())
      throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT,
                          "replay executor: none of the " + std::to_string(table_.rows().size()) + " rows of " +
                              table_.file() + " is of the study's workload" +
                              (index_->compared().empty() ? std::string() : " (" + index_->compared() + ")") + "; first: " +
                              index_->first_mismatch() +
                              " (state what the rows hold in the workload, or choose rows with the option \"where\")");
    const std::vector<bool>& unstated = index_->unstated();
    if (std::find(unstated.begin(), unstated.end(), true) != unstated.end() && cotune::host().abi_minor < 7)
      throw cotune::Error(COTUNE_ERR_FAILED_PRECONDITION,
                          "replay executor options/unstated: the host (ABI 1." + std::to_string(cotune::host().abi_minor) +
                              ") cannot complete unstated parameters; that needs ABI 1.7");
    std::vector<double> out, row(params.size());
    size_t unexpressed = 0;
    std::string first_why;
    for (const auto& [values, rows] : index_->configurations()) {
      std::string why;
      if (!encode_values(study, values, row.data(), &why, &unstated)) {
        if (unexpressed++ == 0) first_why = why + " (line " + std::to_string(table_.rows()[rows->front()].line) + ")";
        continue;
      }
      out.insert(out.end(), row.begin(), row.end());
    }
    if (unexpressed > 0)
      cotune::log(COTUNE_LOG_WARN, "org.cotune.executor.replay",
                  table_.file() + ": " + std::to_string(unexpressed) +
                      " measured configuration(s) hold a value that is not a choice of the space's parameter, "
                      "first " + first_why + "; they are left out of the search");
    return out;
  }

  const cotune::JobResult& poll(Job& job, int32_t) { return job.result; }
  void cancel(Job&) {}  // answered inside submit(): nothing is left to stop

  // A job of an earlier process is answered again from the table.
  std::unique_ptr<Job> attach(const cotune_trial& trial, std::string_view) { return submit(trial); }

 private:
  // The index of the study's workload and parameters (built once: a study has one of each).
  void index_for(std::string_view workload, const std::vector<TrialParam>& params) {
    if (index_ && index_->built_for(workload, params)) return;
    index_ = std::make_unique<ReplayIndex>(table_, options_, std::string(workload), params);
    say_repeats();
  }

  // Several rows of one configuration answer their mean: say so, with the widest spread and what
  // its rows differ in. Published tables repeat a layout across software releases that ran it up to
  // twice as fast, and the mean of those is no measurement of any release.
  void say_repeats() const {
    const std::vector<RunRow>& all = table_.rows();
    const std::vector<std::string>& names = table_.metric_names();
    size_t repeated = 0;
    double widest = 0;
    std::string what;
    for (const auto& [values, rows] : index_->configurations()) {
      if (rows->size() < 2) continue;
      ++repeated;
      for (size_t m = 0; m < names.size(); ++m) {
        const RunRow *low = nullptr, *high = nullptr;
        for (size_t r : *rows) {
          const double v = all[r].metrics[m];
          if (all[r].status != COTUNE_STATUS_OK || !(v > 0)) continue;
          if (low == nullptr || v < low->metrics[m]) low = &all[r];
          if (high == nullptr || v > high->metrics[m]) high = &all[r];
        }
        if (low == nullptr || high->metrics[m] / low->metrics[m] - 1 <= widest) continue;
        widest = high->metrics[m] / low->metrics[m] - 1;
        what = names[m] + " " + cell_text(low->metrics[m]) + " at line " + std::to_string(low->line) + ", " +
               cell_text(high->metrics[m]) + " at line " + std::to_string(high->line) + differing_column(*low, *high);
      }
    }
    if (repeated == 0) return;
    const bool wide = widest > 0.05;  // more than run-to-run noise
    cotune::log(wide ? COTUNE_LOG_WARN : COTUNE_LOG_INFO, "org.cotune.executor.replay",
                table_.file() + ": " + std::to_string(repeated) + " configuration(s) of this workload are measured by "
                    "several rows, and each answers their mean" +
                    (what.empty() ? "" : "; the widest spread is " + std::to_string(int(std::lround(100 * widest))) +
                                             " % (" + what + ")") +
                    (wide ? "; to replay one software release or setup, choose its rows with the option \"where\"" : ""));
  }

  // ", which differ in source_version ('a', 'b')": the first column of neither a parameter nor a
  // result that two rows of one configuration hold differently; "" when none.
  std::string differing_column(const RunRow& a, const RunRow& b) const {
    for (size_t c = 0; c < table_.columns().size(); ++c) {
      if (table_.is_result_column(c) || canonical(a.cells[c]) == canonical(b.cells[c])) continue;
      return ", which differ in " + table_.columns()[c] + " ('" + std::string(trim(a.cells[c])) + "', '" +
             std::string(trim(b.cells[c])) + "')";
    }
    return "";
  }

  // How answers for rows of this workload are completed, worked out once per workload.
  // `gpus_parameter`: the space has a gpus parameter (the trial says its GPUs).
  const ThroughputCompletion& completion_for(std::string_view workload, bool gpus_parameter) {
    if (!completion_ || completion_workload_ != workload) {
      completion_workload_ = std::string(workload);
      completion_.emplace(table_, nlohmann::json::parse(workload, nullptr, /*allow_exceptions=*/false), gpus_parameter);
      for (const std::string& note : completion_->notes())
        cotune::log(COTUNE_LOG_INFO, "org.cotune.executor.replay", table_.file() + ": " + note);
    }
    return *completion_;
  }

  // ok rows answer with the mean of each metric; without one, the first row answers its status.
  void answer(const std::vector<size_t>& rows, const ThroughputCompletion& completion, double gpus,
              cotune::JobResult& out) const {
    const std::vector<RunRow>& all = table_.rows();
    const std::vector<std::string>& names = table_.metric_names();
    std::vector<double> sum(names.size(), 0);
    std::vector<size_t> count(names.size(), 0);
    std::vector<const RunRow*> ok_rows;
    size_t ok = 0;
    const RunRow* first_bad = nullptr;
    for (size_t r : rows) {
      const RunRow& row = all[r];
      if (row.status != COTUNE_STATUS_OK) {
        if (first_bad == nullptr) first_bad = &row;
        continue;
      }
      ++ok;
      ok_rows.push_back(&row);
      for (size_t m = 0; m < names.size(); ++m)
        if (!std::isnan(row.metrics[m])) {
          sum[m] += row.metrics[m];
          ++count[m];
        }
    }
    const RunRow& first = all[rows.front()];
    out.external_id = table_.file() + ":" + std::to_string(first.line);
    if (ok == 0) {
      out.status = first_bad->status;
      out.error = table_.file() + " line " + std::to_string(first_bad->line) + ": " +
                  (first_bad->error.empty() ? std::string(status_word(first_bad->status)) : first_bad->error);
      return;
    }
    nlohmann::json m = nlohmann::json::object();
    for (size_t i = 0; i < names.size(); ++i)
      if (count[i] > 0) m[names[i]] = sum[i] / double(count[i]);
    completion.complete(ok_rows, gpus, m);
    m["replay_rows"] = ok;
    if (ok < rows.size()) m["replay_failed_rows"] = rows.size() - ok;
    out.status = COTUNE_STATUS_OK;
    out.metrics_json = m.dump();
  }

  static const char* status_word(int32_t status) {
    switch (status) {
      case COTUNE_STATUS_OOM: return "oom";
      case COTUNE_STATUS_TIMEOUT: return "timeout";
      default: return "failed";
    }
  }

  ReplayOptions options_;
  RunTable table_;
  std::unique_ptr<ReplayIndex> index_;
  std::string completion_workload_;  // the workload completion_ was worked out for
  std::optional<ThroughputCompletion> completion_;
};

}  // namespace cotune_replay

COTUNE_PLUGIN(cotune::executor<cotune_replay::ReplayExecutor>(
    {"org.cotune.executor.replay", "replay", "Answers trials from a CSV of measured runs.", "1.0.0"}))
