// The best configurations of a study, as `cotune run` prints them at the end and `cotune show` and
// `cotune export` print them from the store.
#ifndef COTUNE_CORE_RUN_STUDY_REPORT_HPP_
#define COTUNE_CORE_RUN_STUDY_REPORT_HPP_

#include <cotune/core/abi/components.hpp>
#include <cotune/core/model/objective.hpp>
#include <cotune/core/store/store_records.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace cotune::core {

struct RankedTrial {
  TrialRecord trial;
  std::vector<double> values;  // one per objective
};

// The feasible ok trials, best first by the first objective (ties: the earlier trial), at most
// `limit`. With two objectives: the Pareto front of the feasible ok trials, ordered the same way
// (`limit` does not cut the front).
std::vector<RankedTrial> best_trials(const std::vector<TrialRecord>& trials, const std::vector<ObjectiveSpec>& objectives,
                                     size_t limit);

// A stored configuration rendered in a launch format (COTUNE_RENDER_*); the space reads it back
// from its JSON first.
std::string render_stored_config(const Space& space, const std::string& config_json, int32_t format);

// The table of best configurations: rank, trial, objective values, the configuration, and under
// each row its launch arguments in the study's format (when that is not plain JSON).
// A configuration's launch arguments in the study's format, indented under a table row (nothing
// for plain JSON).
void print_launch_arguments(std::FILE* out, const Space& space, const std::string& config_json, const StudySpec& spec);

// Under the table, when rows were printed without their launch arguments: how to get them
// (`cotune export STUDY --trial N --store STORE`).
void print_other_rows_hint(std::FILE* out, const std::vector<RankedTrial>& best, size_t launch_args_rows,
                           const StudySpec& spec, const std::string& study, const std::string& store);

// The first `launch_args_rows` rows also print their launch arguments in the study's format.
void print_best_table(std::FILE* out, const std::vector<RankedTrial>& best, const StudySpec& spec, const Space& space,
                      size_t launch_args_rows = SIZE_MAX);

// Counts per status, e.g. "57 ok, 2 oom, 1 failed". Of a study no run is working on
// (`study_running` false), trials still pending or running are "interrupted": the next run resumes
// them.
std::string status_counts_text(const std::map<TrialStatus, std::int64_t>& counts, bool study_running = true);

}  // namespace cotune::core

#endif  // COTUNE_CORE_RUN_STUDY_REPORT_HPP_
