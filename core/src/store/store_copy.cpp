// Copies between stores: a study read whole from one store and written whole to another.
#include <cotune/core/errors.hpp>
#include <cotune/core/store/store_copy.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "store/store_impl.hpp"

namespace cotune::core {

using store_detail::read_study;
using store_detail::read_trial;

namespace {

std::optional<std::vector<std::uint8_t>> state_column(sql::Statement& row, int column) {
  if (row.is_null(column)) return std::nullopt;
  return row.blob(column);
}

void bind_state(sql::Statement& q, int index, const std::optional<std::vector<std::uint8_t>>& state) {
  if (state) q.bind_blob(index, *state);
  else q.bind_null(index);
}

[[noreturn]] void refuse_other_study(const std::string& name, const std::string& store, const std::string& here,
                                     const std::string& there) {
  throw UserError("study '" + name + "' is in " + store + " already with a different study file (study hash " +
                  here.substr(0, 12) + " there, " + there.substr(0, 12) +
                  " in the source); it was not copied. Rename one of them, or copy into another store.");
}

// One study in both stores: the same hash, or (a store of an earlier version holds the hash of the
// whole file) files that differ only in what may change between runs.
bool same_study(const std::string& hash, const std::string& json, const std::string& other_hash,
                const std::string& other_json) {
  if (hash == other_hash) return true;
  const std::optional<std::string> changed = changed_study_fields(json, other_json);
  return changed && changed->empty();
}

}  // namespace

StudyDump Store::dump_study(std::int64_t study_id) {
  return read([&] {
    sql::Connection& db = impl_->db;
    StudyDump dump;
    {
      auto q = db.prepare("SELECT " COTUNE_STUDY_COLUMNS
                          ", searcher_state, predictor_state FROM studies WHERE id = ?1");
      q->bind(1, study_id);
      if (!q->step()) throw StoreError("store " + path_ + ": no study with id " + std::to_string(study_id));
      dump.study = read_study(*q, path_);
      dump.searcher_state = state_column(*q, 13);
      dump.predictor_state = state_column(*q, 14);
    }
    auto q = db.prepare("SELECT " COTUNE_TRIAL_COLUMNS " FROM trials WHERE study_id = ?1 ORDER BY seq");
    q->bind(1, study_id);
    while (q->step()) dump.trials.push_back(read_trial(*q, path_));
    return dump;
  });
}

StudyRestoreCounts Store::restore_study(const StudyDump& dump) {
  const StudyRecord& s = dump.study;
  return write([&] {
    sql::Connection& db = impl_->db;
    StudyRestoreCounts counts;
    std::int64_t id = 0;
    std::optional<std::int64_t> recommended;
    bool has_searcher = false, has_predictor = false;
    {
      auto q = db.prepare("SELECT id, study_hash, recommended_trial_id, "
                          "CASE WHEN searcher_state IS NULL THEN 0 ELSE 1 END, "
                          "CASE WHEN predictor_state IS NULL THEN 0 ELSE 1 END, study_json FROM studies WHERE name = ?1");
      q->bind(1, s.name);
      if (q->step()) {
        if (!same_study(q->text(1), q->text(5), s.study_hash, s.study_json))
          refuse_other_study(s.name, path_, q->text(1), s.study_hash);
        id = q->int64(0);
        recommended = q->opt_int64(2);
        has_searcher = q->int64(3) != 0;
        has_predictor = q->int64(4) != 0;
      }
    }
    if (id != 0) store_detail::claim_study(db, id);  // add_trial may be numbering trials too
    if (id == 0) {
      auto q = db.prepare(
          "INSERT INTO studies (name, study_json, study_hash, workload_key, space, objective_json, direction, "
          "environment_json, status, created_at, updated_at, searcher_state, predictor_state) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) RETURNING id");
      q->bind(1, s.name);
      q->bind(2, s.study_json);
      q->bind(3, s.study_hash);
      q->bind(4, s.workload_key);
      q->bind(5, s.space);
      q->bind(6, s.objective_json);
      q->bind(7, to_string(s.direction));
      q->bind(8, s.environment_json);
      q->bind(9, to_string(s.status));
      q->bind(10, s.created_at);
      q->bind(11, s.updated_at);
      bind_state(*q, 12, dump.searcher_state);
      bind_state(*q, 13, dump.predictor_state);
      q->step();
      id = q->int64(0);
      counts.created = true;
      has_searcher = has_predictor = true;  // as the source has them
    }
    // The trials it lacks, by configuration; each keeps its seq unless that is taken here.
    std::map<std::string, std::int64_t> here;  // config key -> trial id
    std::set<std::int64_t> unfinished_here;    // trial ids still in flight here
    std::set<std::int64_t> seqs;
    std::int64_t last_seq = 0;
    {
      auto q = db.prepare("SELECT id, config_key, seq, status FROM trials WHERE study_id = ?1");
      q->bind(1, id);
      while (q->step()) {
        here[q->text(1)] = q->int64(0);
        seqs.insert(q->int64(2));
        last_seq = std::max(last_seq, q->int64(2));
        const std::optional<TrialStatus> status = trial_status_from_string(q->text(3));
        if (status && !is_finished(*status)) unfinished_here.insert(q->int64(0));
      }
    }
    std::map<std::int64_t, std::int64_t> new_id;  // source trial id -> id here
    for (const TrialRecord& t : dump.trials) {
      if (auto it = here.find(t.config_key); it != here.end()) {
        new_id[t.id] = it->second;
        // Copied while it ran (a study copied mid-run): the source has its result now.
        if (is_finished(t.status) && unfinished_here.count(it->second)) {
          auto u = db.prepare(
              "UPDATE trials SET status = ?1, metrics_json = ?2, objective = ?3, external_id = ?4, attempts = ?5, "
              "error = ?6, log_path = ?7, started_at = ?8, finished_at = ?9, claim_host = ?10, claim_pid = ?11 "
              "WHERE id = ?12");
          u->bind(1, to_string(t.status));
          u->bind(2, t.metrics_json);
          u->bind(3, t.objective);
          u->bind(4, t.external_id);
          u->bind(5, t.attempts);
          u->bind(6, t.error);
          u->bind(7, t.log_path);
          u->bind(8, t.started_at);
          u->bind(9, t.finished_at);
          u->bind(10, t.claim_host);
          u->bind(11, t.claim_pid);
          u->bind(12, it->second);
          u->step();
          ++counts.trials_updated;
        }
        continue;
      }
      const std::int64_t seq = seqs.count(t.seq) ? last_seq + 1 : t.seq;
      seqs.insert(seq);
      last_seq = std::max(last_seq, seq);
      auto q = db.prepare(
          "INSERT INTO trials (study_id, seq, config_key, config_json, status, metrics_json, objective, predicted, "
          "executor, external_id, attempts, error, log_path, created_at, started_at, finished_at, fingerprint_json, "
          "claim_host, claim_pid) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19) RETURNING id");
      q->bind(1, id);
      q->bind(2, seq);
      q->bind(3, t.config_key);
      q->bind(4, t.config_json);
      q->bind(5, to_string(t.status));
      q->bind(6, t.metrics_json);
      q->bind(7, t.objective);
      q->bind(8, t.predicted);
      q->bind(9, t.executor);
      q->bind(10, t.external_id);
      q->bind(11, t.attempts);
      q->bind(12, t.error);
      q->bind(13, t.log_path);
      q->bind(14, t.created_at);
      q->bind(15, t.started_at);
      q->bind(16, t.finished_at);
      q->bind(17, t.fingerprint_json);
      q->bind(18, t.claim_host);
      q->bind(19, t.claim_pid);
      q->step();
      new_id[t.id] = q->int64(0);
      here[t.config_key] = new_id[t.id];
      ++counts.trials_added;
    }
    // A study copied while it ran, that has stopped or finished in the source since.
    if (!counts.created && s.status != StudyStatus::kRunning) {
      auto q = db.prepare("UPDATE studies SET status = ?1, updated_at = ?2 WHERE id = ?3 AND status = ?4");
      q->bind(1, to_string(s.status));
      q->bind(2, s.updated_at);
      q->bind(3, id);
      q->bind(4, to_string(StudyStatus::kRunning));
      q->step();
      counts.status_updated = db.changes() > 0;
    }
    // What the study here lacks of the rest: its recommendation and saved state.
    if (!recommended && s.recommended_trial_id && new_id.count(*s.recommended_trial_id)) {
      auto q = db.prepare("UPDATE studies SET recommended_trial_id = ?1 WHERE id = ?2");
      q->bind(1, new_id[*s.recommended_trial_id]);
      q->bind(2, id);
      q->step();
    }
    if (!has_searcher && dump.searcher_state) {
      auto q = db.prepare("UPDATE studies SET searcher_state = ?1 WHERE id = ?2");
      q->bind_blob(1, *dump.searcher_state);
      q->bind(2, id);
      q->step();
    }
    if (!has_predictor && dump.predictor_state) {
      auto q = db.prepare("UPDATE studies SET predictor_state = ?1 WHERE id = ?2");
      q->bind_blob(1, *dump.predictor_state);
      q->bind(2, id);
      q->step();
    }
    return counts;
  });
}

StoreCopyCounts copy_store(Store& source, Store& destination) {
  std::vector<StudySummary> studies = source.list_studies();
  // Refuse a name taken by another study before anything is written.
  for (const StudySummary& s : studies)
    if (std::optional<StudyRecord> there = destination.find_study(s.study.name))
      if (!same_study(there->study_hash, there->study_json, s.study.study_hash, s.study.study_json))
        refuse_other_study(s.study.name, destination.path(), there->study_hash, s.study.study_hash);

  StoreCopyCounts counts;
  for (const StudySummary& s : studies) {
    StudyRestoreCounts c = destination.restore_study(source.dump_study(s.study.id));
    if (c.created) ++counts.studies_created;
    else if (c.trials_added > 0 || c.trials_updated > 0 || c.status_updated) ++counts.studies_updated;
    else ++counts.studies_unchanged;
    counts.trials_added += c.trials_added;
    counts.trials_updated += c.trials_updated;
  }
  for (const auto& [key, space] : source.workloads()) {
    ImportCounts c = destination.import_history(source.history_for(key, space), ImportTime::kKeep);
    counts.history.inserted += c.inserted;
    counts.history.duplicates += c.duplicates;
  }
  return counts;
}

}  // namespace cotune::core
