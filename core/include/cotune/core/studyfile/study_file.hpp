// The study file: one JSON document that says what to tune (workload, space), how (predictor,
// searcher, executor), for what (objective) and for how long (budget). Parsed into StudySpec and
// validated on load; every error names the file and the field by JSON pointer, e.g.
//   study.json: /budget/trials: expected a positive integer, got -3
#ifndef COTUNE_CORE_STUDYFILE_STUDY_FILE_HPP_
#define COTUNE_CORE_STUDYFILE_STUDY_FILE_HPP_

#include <cotune/core/abi/call_watch.hpp>
#include <cotune/core/abi/isolation.hpp>
#include <cotune/core/store/store_records.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cotune::core {

// A plugin component chosen by name, with its options (passed to the plugin as JSON), run in the
// host's process or, with "isolation": "process", in a child process of its own.
struct ComponentSpec {
  std::string name;
  nlohmann::json options = nlohmann::json::object();
  Isolation isolation = Isolation::kNone;
};

// What the predictor learns the residual over: the performance model's estimate (analytic), a cost
// model of the step's roofline terms whose rates it learns from the measurements (roofline; no
// efficiencies from the catalogue), or nothing (none: the space's features alone).
enum class Prior { kAnalytic, kRoofline, kNone };

struct PredictorSpec : ComponentSpec {
  Prior prior = Prior::kAnalytic;
  // With the analytic prior: refit the performance model's cheap constants (calibration.hpp) on the
  // trials measured so far at every refit, so that a few real trials correct a miscalibrated model.
  bool calibrate = true;
};

// A bound on a metric: a trial that breaks it is not a candidate for "best".
struct Constraint {
  std::string metric;
  std::optional<double> max;
  std::optional<double> min;
};

struct ObjectiveSpec {
  std::string metric;  // e.g. "tokens_per_s"
  Direction direction = Direction::kMaximize;
  std::vector<Constraint> constraints;
};

// When to stop. At least one of trials, wall_time_s, gpu_hours is set.
struct Budget {
  std::optional<std::int64_t> trials;
  std::optional<double> wall_time_s;
  std::optional<double> gpu_hours;
  std::optional<double> target;         // stop once the objective reaches this value
  std::optional<std::int64_t> patience;  // stop after this many trials without improvement
  // stop after this many unavailable trials in a row (an executor that answers from a table has
  // nothing for what the searcher proposes); unset: kDefaultMaxUnavailable
  std::optional<std::int64_t> max_unavailable;
  static constexpr std::int64_t kDefaultMaxUnavailable = 1000;
};

// The framework a study's configurations are launched with (and exported for); docs/exports.md.
enum class RenderFormat { kJson, kMegatron, kTorchtitan, kNemo, kDeepspeed, kTorchrec };
// What Ctrl-C does to trials in flight.
enum class OnStop { kCancel, kWait };

std::string_view to_string(Prior p);
std::string_view to_string(RenderFormat f);
// Reads "framework[@version]" (the study file's "format", export's --format). Throws UserError
// naming `where` and the frameworks when the framework is unknown; the version is checked by the
// space (Space::set_target).
void parse_launch_format(const std::string& text, const std::string& where, RenderFormat* format,
                         std::string* version);
// The launch target (Space::set_target's argument) that a format text names: "Megatron" ->
// "megatron", "torchtitan@v0.2.2" -> itself, "json" -> "" (no target). Throws as parse_launch_format.
std::string launch_target_of(const std::string& text, const std::string& where);
std::string_view to_string(OnStop s);

// The space a study file names when it names none; the table commands (import, simulate --batch,
// export-history, predictor eval) read and write runs of it unless told --space.
inline constexpr const char* kDefaultSpace = "llm";

// Fields a study file may change between runs of one study: they decide how long and how wide it
// searches and how it is described, not what a trial measures or how trials compare.
inline constexpr const char* kMutableStudyFields[] = {"budget", "parallel", "description", "on_stop", "deadlines"};

struct StudySpec {
  std::string file;  // the path it was loaded from (or the label given to parse_study_file)
  std::string text;  // the document as given
  // SHA-256 of its canonical JSON, with a workload file's contents in place of its path, less what
  // may change between runs of the study (kMutableStudyFields): what the study means.
  std::string hash;
  // The same over every field but the components' isolation: what a store written before the
  // mutable fields were left out holds (a study of such a store is opened by either).
  std::string legacy_hash;

  std::string name;
  std::string description;
  nlohmann::json workload;    // always the workload object, also when the file named a path
  std::string workload_file;  // resolved path when the workload was given by path; empty when inline
  std::string calibration_file;  // resolved path of "calibration"; applied to workload.cluster
  ComponentSpec space{kDefaultSpace};
  PredictorSpec predictor{{"krr"}};
  ComponentSpec searcher{"reinforce"};
  ComponentSpec executor{"sim"};
  std::vector<ObjectiveSpec> objectives;  // one; two for a Pareto study
  Budget budget;
  std::int64_t parallel = 1;  // trials in flight at once
  std::uint64_t seed = 1;
  std::vector<std::string> plugin_paths;  // resolved against the study file's directory
  RenderFormat format = RenderFormat::kJson;
  std::string format_version;  // after '@' in "format"; empty: the newest the space knows
  OnStop on_stop = OnStop::kCancel;
  CallDeadlines deadlines;  // "deadlines": seconds one plugin call of each kind may take

  bool pareto() const { return objectives.size() > 1; }
  // "megatron@core_v0.19.0" ("megatron" without a version; "" for json): Space::set_target's argument.
  std::string launch_target() const;
  // canonical_json.hpp workload_key() of this study's workload and space.
  std::string workload_key() const;
  // The objectives as a JSON array of {metric, direction, constraints}, for the store.
  nlohmann::json objectives_json() const;
};

// The top-level fields a study file may have, in documentation order.
const std::vector<std::string>& study_file_fields();

// Loads and validates a study file. Throws UserError.
StudySpec load_study_file(const std::string& path);
// Validates `text` as a study file named `label`; relative paths in it resolve against `base_dir`.
StudySpec parse_study_file(std::string_view text, const std::string& label, const std::string& base_dir);

// The top-level fields ("/searcher, /workload") in which two stored study files (JSON text) differ,
// leaving out those that may change between runs (kMutableStudyFields) and the components'
// isolation; nullopt when either is not a JSON object. Empty: the same study.
std::optional<std::string> changed_study_fields(const std::string& stored_json, const std::string& other_json);

}  // namespace cotune::core

#endif  // COTUNE_CORE_STUDYFILE_STUDY_FILE_HPP_
