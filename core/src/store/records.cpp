#include <cotune/core/store/store_records.hpp>

#include <array>
#include <utility>

namespace cotune::core {
namespace {

constexpr std::array<std::pair<StudyStatus, std::string_view>, 3> kStudyStatuses{{
    {StudyStatus::kRunning, "running"},
    {StudyStatus::kStopped, "stopped"},
    {StudyStatus::kFinished, "finished"},
}};

constexpr std::array<std::pair<TrialStatus, std::string_view>, 8> kTrialStatuses{{
    {TrialStatus::kPending, "pending"},
    {TrialStatus::kRunning, "running"},
    {TrialStatus::kOk, "ok"},
    {TrialStatus::kFailed, "failed"},
    {TrialStatus::kOom, "oom"},
    {TrialStatus::kTimeout, "timeout"},
    {TrialStatus::kCancelled, "cancelled"},
    {TrialStatus::kUnavailable, "unavailable"},
}};

constexpr std::array<std::pair<Direction, std::string_view>, 2> kDirections{{
    {Direction::kMaximize, "maximize"},
    {Direction::kMinimize, "minimize"},
}};

template <class Table, class E>
std::string_view name_of(const Table& table, E value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "?";
}

template <class E, class Table>
std::optional<E> value_of(const Table& table, std::string_view name) {
  for (const auto& [v, n] : table)
    if (n == name) return v;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(StudyStatus s) { return name_of(kStudyStatuses, s); }
std::string_view to_string(TrialStatus s) { return name_of(kTrialStatuses, s); }
std::string_view to_string(Direction d) { return name_of(kDirections, d); }

std::optional<StudyStatus> study_status_from_string(std::string_view s) {
  return value_of<StudyStatus>(kStudyStatuses, s);
}
std::optional<TrialStatus> trial_status_from_string(std::string_view s) {
  return value_of<TrialStatus>(kTrialStatuses, s);
}
std::optional<Direction> direction_from_string(std::string_view s) { return value_of<Direction>(kDirections, s); }

bool is_finished(TrialStatus s) { return s != TrialStatus::kPending && s != TrialStatus::kRunning; }

bool counts_against_budget(TrialStatus s) {
  return s == TrialStatus::kOk || s == TrialStatus::kFailed || s == TrialStatus::kOom || s == TrialStatus::kTimeout;
}

}  // namespace cotune::core
