// The studies of a store: records, status, recommendation, lease and saved state.
#include <cotune/core/errors.hpp>
#include <cotune/core/store/store.hpp>

#include <string>

#include "store/schema.hpp"
#include "store/store_impl.hpp"

namespace cotune::core {
namespace store_detail {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

void throw_locked_too_long(const std::string& path, double seconds) {
  throw StoreError("store " + path + ": another process has held its write lock for more than " +
                   std::to_string(static_cast<long long>(seconds)) +
                   " s; try again once it has finished (or raise the busy timeout)");
}

TrialStatus trial_status_column(const sql::Statement& row, int column, const std::string& path) {
  std::string word = row.text(column);
  auto status = trial_status_from_string(word);
  if (!status) throw StoreError("store " + path + ": unknown trial status '" + word + "' (damaged store?)");
  return *status;
}

StudyRecord read_study(const sql::Statement& row, const std::string& path) {
  StudyRecord s;
  s.id = row.int64(0);
  s.name = row.text(1);
  s.study_json = row.text(2);
  s.study_hash = row.text(3);
  s.workload_key = row.text(4);
  s.space = row.text(5);
  s.objective_json = row.text(6);
  auto direction = direction_from_string(row.text(7));
  auto status = study_status_from_string(row.text(9));
  if (!direction || !status)
    throw StoreError("store " + path + ": study '" + s.name + "' has an unknown direction or status (damaged store?)");
  s.direction = *direction;
  s.environment_json = row.text(8);
  s.status = *status;
  s.created_at = row.real(10);
  s.updated_at = row.real(11);
  if (!row.is_null(12)) s.recommended_trial_id = row.int64(12);
  return s;
}

}  // namespace store_detail

using store_detail::now_seconds;
using store_detail::read_study;
using store_detail::run_transaction;

namespace {

void require_study(sql::Connection& db, std::int64_t study_id) {
  if (db.changes() == 0)
    throw StoreError("store " + db.name() + ": no study with id " + std::to_string(study_id));
}

void save_state(sql::Connection& db, const char* update_sql, std::int64_t study_id,
                const std::vector<std::uint8_t>& state) {
  auto q = db.prepare(update_sql);
  q->bind_blob(1, state);
  q->bind(2, now_seconds());
  q->bind(3, study_id);
  q->step();
  require_study(db, study_id);
}

std::optional<std::vector<std::uint8_t>> load_state(sql::Connection& db, const char* select_sql,
                                                    std::int64_t study_id) {
  auto q = db.prepare(select_sql);
  q->bind(1, study_id);
  if (!q->step()) throw StoreError("store " + db.name() + ": no study with id " + std::to_string(study_id));
  if (q->is_null(0)) return std::nullopt;
  return q->blob(0);
}

// Who holds the study other than `me` (nullptr: nobody excluded): its plain run's lease, else a
// live worker, as `holds` judges them. The study's row is locked to the end of the transaction
// (FOR UPDATE on PostgreSQL; on SQLite, BEGIN IMMEDIATE already holds the whole file).
std::optional<StudyLease> other_holder(sql::Connection& db, std::int64_t study_id, const StudyLease* me,
                                       const std::function<bool(const StudyLease& holder)>& holds) {
  if (const std::optional<StudyLease> holder = store_detail::locked_lease(db, study_id)) {
    const bool mine = me != nullptr && holder->host == me->host && holder->pid == me->pid;
    if (!mine && holds(*holder)) return holder;
  }
  // Workers share the study (join_study): a plain run waits until none is left.
  return store_detail::live_worker(db, study_id, holds);
}

}  // namespace

StudyRecord Store::create_study(const NewStudy& n) {
  if (n.name.empty()) throw UserError("store " + path_ + ": a study needs a non-empty name");
  return write([&] {
    sql::Connection& db = impl_->db;
    {
      auto existing = db.prepare("SELECT " COTUNE_STUDY_COLUMNS " FROM studies WHERE name = ?1");
      existing->bind(1, n.name);
      if (existing->step()) {
        StudyRecord found = read_study(*existing, path_);
        if (found.study_hash != n.study_hash && (n.legacy_hash.empty() || found.study_hash != n.legacy_hash))
          throw UserError("study '" + n.name + "' already exists in " + path_ +
                          " with a different study file (stored hash " + found.study_hash.substr(0, 12) +
                          ", this file " + n.study_hash.substr(0, 12) +
                          "; only budget, parallel, description, on_stop, deadlines and isolation may change "
                          "between its runs). Give the changed study a new name, or use the store of another directory.");
        return found;
      }
    }
    double now = now_seconds();
    auto insert = db.prepare(
        "INSERT INTO studies (name, study_json, study_hash, workload_key, space, objective_json, direction, "
        "environment_json, status, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
        "'running', ?9, ?9) RETURNING id");
    insert->bind(1, n.name);
    insert->bind(2, n.study_json);
    insert->bind(3, n.study_hash);
    insert->bind(4, n.workload_key);
    insert->bind(5, n.space);
    insert->bind(6, n.objective_json);
    insert->bind(7, to_string(n.direction));
    insert->bind(8, n.environment_json);
    insert->bind(9, now);
    insert->step();
    StudyRecord s;
    s.id = insert->int64(0);
    s.name = n.name;
    s.study_json = n.study_json;
    s.study_hash = n.study_hash;
    s.workload_key = n.workload_key;
    s.space = n.space;
    s.objective_json = n.objective_json;
    s.direction = n.direction;
    s.environment_json = n.environment_json;
    s.status = StudyStatus::kRunning;
    s.created_at = s.updated_at = now;
    return s;
  });
}

void Store::update_study_file(std::int64_t study_id, const std::string& study_json, const std::string& study_hash) {
  write([&] {
    auto q = impl_->db.prepare("UPDATE studies SET study_json = ?2, study_hash = ?3, updated_at = ?4 WHERE id = ?1");
    q->bind(1, study_id);
    q->bind(2, study_json);
    q->bind(3, study_hash);
    q->bind(4, now_seconds());
    q->step();
    if (impl_->db.changes() != 1) throw StoreError("store " + path_ + ": no study with id " + std::to_string(study_id));
  });
}

std::optional<StudyRecord> Store::find_study(const std::string& name) {
  return read([&]() -> std::optional<StudyRecord> {
    auto q = impl_->db.prepare("SELECT " COTUNE_STUDY_COLUMNS " FROM studies WHERE name = ?1");
    q->bind(1, name);
    if (!q->step()) return std::nullopt;
    return read_study(*q, path_);
  });
}

std::optional<StudyRecord> Store::study(std::int64_t study_id) {
  return read([&]() -> std::optional<StudyRecord> {
    auto q = impl_->db.prepare("SELECT " COTUNE_STUDY_COLUMNS " FROM studies WHERE id = ?1");
    q->bind(1, study_id);
    if (!q->step()) return std::nullopt;
    return read_study(*q, path_);
  });
}

std::vector<StudySummary> Store::list_studies() {
  return read([&] {
    sql::Connection& db = impl_->db;
    std::vector<StudySummary> out;
    std::map<std::int64_t, size_t> index;
    {
      auto q = db.prepare("SELECT " COTUNE_STUDY_COLUMNS " FROM studies ORDER BY created_at, id");
      while (q->step()) {
        index[q->int64(0)] = out.size();
        out.push_back(StudySummary{read_study(*q, path_), {}, 0, std::nullopt});
      }
    }
    {
      auto q = db.prepare("SELECT study_id, status, COUNT(*) FROM trials GROUP BY study_id, status");
      while (q->step()) {
        auto it = index.find(q->int64(0));
        if (it == index.end()) continue;
        StudySummary& s = out[it->second];
        std::int64_t n = q->int64(2);
        s.trials_by_status[store_detail::trial_status_column(*q, 1, path_)] = n;
        s.trial_count += n;
      }
    }
    {
      auto q = db.prepare(
          "SELECT study_id, MAX(objective), MIN(objective) FROM trials "
          "WHERE status = 'ok' AND objective IS NOT NULL GROUP BY study_id");
      while (q->step()) {
        auto it = index.find(q->int64(0));
        if (it == index.end()) continue;
        StudySummary& s = out[it->second];
        s.best_objective = s.study.direction == Direction::kMaximize ? q->real(1) : q->real(2);
      }
    }
    return out;
  });
}

void Store::set_study_status(std::int64_t study_id, StudyStatus status) {
  write([&] {
    auto q = impl_->db.prepare("UPDATE studies SET status = ?1, updated_at = ?2 WHERE id = ?3");
    q->bind(1, to_string(status));
    q->bind(2, now_seconds());
    q->bind(3, study_id);
    q->step();
    require_study(impl_->db, study_id);
  });
}

void Store::set_study_recommended(std::int64_t study_id, std::int64_t trial_id) {
  write([&] {
    auto q = impl_->db.prepare(
        "UPDATE studies SET recommended_trial_id = ?1, updated_at = ?2 WHERE id = ?3 AND "
        "EXISTS (SELECT 1 FROM trials WHERE id = ?1 AND study_id = ?3)");
    q->bind(1, trial_id);
    q->bind(2, now_seconds());
    q->bind(3, study_id);
    q->step();
    require_study(impl_->db, study_id);
    if (impl_->db.changes() == 0)
      throw StoreError("store " + path_ + ": trial id " + std::to_string(trial_id) + " is not a trial of study id " +
                       std::to_string(study_id));
  });
}

std::optional<StudyLease> Store::take_study_lease(std::int64_t study_id, const StudyLease& me,
                                                  const std::function<bool(const StudyLease& holder)>& holds) {
  std::optional<StudyLease> held;
  write([&] {
    held = other_holder(impl_->db, study_id, &me, holds);
    if (held) return;
    auto u = impl_->db.prepare(
        "UPDATE studies SET lease_host = ?1, lease_pid = ?2, lease_heartbeat = ?3 WHERE id = ?4");
    u->bind(1, me.host);
    u->bind(2, me.pid);
    u->bind(3, now_seconds());
    u->bind(4, study_id);
    u->step();
  });
  return held;
}

std::optional<StudyLease> Store::delete_study(std::int64_t study_id,
                                              const std::function<bool(const StudyLease& holder)>& holds) {
  std::optional<StudyLease> held;
  write([&] {
    held = other_holder(impl_->db, study_id, nullptr, holds);
    if (held) return;
    // Its trials and worker rows go with it (ON DELETE CASCADE); imported history is not a study's.
    auto d = impl_->db.prepare("DELETE FROM studies WHERE id = ?1");
    d->bind(1, study_id);
    d->step();
  });
  return held;
}

void Store::renew_study_lease(std::int64_t study_id, const StudyLease& me) {
  write([&] {
    auto q = impl_->db.prepare(
        "UPDATE studies SET lease_heartbeat = ?1 WHERE id = ?2 AND lease_host = ?3 AND lease_pid = ?4");
    q->bind(1, now_seconds());
    q->bind(2, study_id);
    q->bind(3, me.host);
    q->bind(4, me.pid);
    q->step();
  });
}

void Store::release_study_lease(std::int64_t study_id, const StudyLease& me) {
  write([&] {
    auto q = impl_->db.prepare(
        "UPDATE studies SET lease_host = NULL, lease_pid = NULL, lease_heartbeat = NULL "
        "WHERE id = ?1 AND lease_host = ?2 AND lease_pid = ?3");
    q->bind(1, study_id);
    q->bind(2, me.host);
    q->bind(3, me.pid);
    q->step();
  });
}

std::optional<StudyLease> Store::study_lease(std::int64_t study_id) {
  return read([&] {
    auto q = impl_->db.prepare("SELECT lease_host, lease_pid, lease_heartbeat FROM studies WHERE id = ?1");
    q->bind(1, study_id);
    if (!q->step()) throw StoreError("store " + path_ + ": no study with id " + std::to_string(study_id));
    if (q->is_null(0) || q->is_null(1)) return std::optional<StudyLease>();
    return std::optional<StudyLease>(StudyLease{q->text(0), q->int64(1), q->is_null(2) ? 0.0 : q->real(2)});
  });
}

void Store::set_study_environment(std::int64_t study_id, const std::string& environment_json) {
  write([&] {
    auto q = impl_->db.prepare("UPDATE studies SET environment_json = ?1, updated_at = ?2 WHERE id = ?3");
    q->bind(1, environment_json);
    q->bind(2, now_seconds());
    q->bind(3, study_id);
    q->step();
    require_study(impl_->db, study_id);
  });
}

void Store::save_searcher_state(std::int64_t study_id, const std::vector<std::uint8_t>& state) {
  write([&] {
    save_state(impl_->db, "UPDATE studies SET searcher_state = ?1, updated_at = ?2 WHERE id = ?3", study_id, state);
  });
}

std::optional<std::vector<std::uint8_t>> Store::load_searcher_state(std::int64_t study_id) {
  return read([&] { return load_state(impl_->db, "SELECT searcher_state FROM studies WHERE id = ?1", study_id); });
}

void Store::save_predictor_state(std::int64_t study_id, const std::vector<std::uint8_t>& state) {
  write([&] {
    save_state(impl_->db, "UPDATE studies SET predictor_state = ?1, updated_at = ?2 WHERE id = ?3", study_id, state);
  });
}

std::optional<std::vector<std::uint8_t>> Store::load_predictor_state(std::int64_t study_id) {
  return read([&] { return load_state(impl_->db, "SELECT predictor_state FROM studies WHERE id = ?1", study_id); });
}

}  // namespace cotune::core
