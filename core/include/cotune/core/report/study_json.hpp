// A store's studies, and one study's trials and best, as JSON documents (schema_version 1,
// docs/show-json.md): what `cotune show --json` prints and `cotune serve` answers at /api/.
#ifndef COTUNE_CORE_REPORT_STUDY_JSON_HPP_
#define COTUNE_CORE_REPORT_STUDY_JSON_HPP_

#include <cotune/core/store/store.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cotune::core::report {

// Bumped when a field changes meaning or goes; new fields may appear without a bump.
inline constexpr int kStudyJsonSchemaVersion = 1;

// The best trials listed: by `cotune run` and `cotune show` in their tables, and in "best" here.
inline constexpr std::size_t kBestTrialsListed = 5;

// Trials of a study listed when no limit is given (`cotune show`, /api/studies/NAME): a long
// study's full table (144 MB of text for a million trials) is for an explicit limit of 0.
inline constexpr std::int64_t kDefaultTrialLimit = 100;

// {"schema_version", "store", "studies": [{name, status, trials, trials_by_status, metric, best}]}.
nlohmann::json studies_json(Store& store);

// {"schema_version", "store", "study": {...}, "trials_total", "trials": [...], "best": [seq...]}:
// the latest `limit` trials (0: all). Throws UserError when the store has no such study.
nlohmann::json study_json(Store& store, const std::string& name, std::int64_t limit);

// A worker registered on a study (`cotune run --worker`), as `show` and `serve` present it. A worker
// that exits unregisters; one that died stays until another worker takes over its trials.
struct WorkerStatus {
  std::string host;
  std::int64_t pid = 0;
  double last_heard_s = 0;     // since its last heartbeat
  std::int64_t in_flight = 0;  // trials it claimed that have not finished
};
std::vector<WorkerStatus> worker_statuses(Store& store, std::int64_t study_id, const std::vector<TrialRecord>& trials);

// Whether a run works on the study now: its stored status says running and the plain run's lease,
// or a registered worker, is live (a recent heartbeat; on this host, a live process). A run killed
// with SIGKILL, or on a machine that went down, leaves "running" stored until `cotune run` resumes it.
bool study_being_run(Store& store, const StudyRecord& study);

// The status as show, serve and report print it: the stored one, except "interrupted" for a study
// stored as running that no live run or worker holds.
std::string study_status_text(Store& store, const StudyRecord& study);
// The same, for a caller that has asked study_being_run() already.
std::string study_status_text(const StudyRecord& study, bool being_run);

// The first objective's metric of a stored study ("objective" when it names none).
std::string objective_metric(const StudyRecord& study);

}  // namespace cotune::core::report

#endif  // COTUNE_CORE_REPORT_STUDY_JSON_HPP_
