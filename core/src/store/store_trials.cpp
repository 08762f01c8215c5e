// The trials of a study: the in-flight record, its start, its end, and the queries over them.
#include <cotune/core/store/store.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "store/store_impl.hpp"

namespace cotune::core {
namespace store_detail {

bool claim_study(sql::Connection& db, std::int64_t study_id) {
  if (db.dialect() == sql::Dialect::kPostgres) {
    auto q = db.prepare("UPDATE studies SET updated_at = updated_at WHERE id = ?1");
    q->bind(1, study_id);
    q->step();
    return db.changes() > 0;
  }
  auto q = db.prepare("SELECT 1 FROM studies WHERE id = ?1");
  q->bind(1, study_id);
  return q->step();
}

TrialRecord read_trial(const sql::Statement& row, const std::string& path) {
  TrialRecord t;
  t.id = row.int64(0);
  t.study_id = row.int64(1);
  t.seq = row.int64(2);
  t.config_key = row.text(3);
  t.config_json = row.text(4);
  t.status = trial_status_column(row, 5, path);
  t.metrics_json = row.opt_text(6);
  t.objective = row.opt_real(7);
  t.predicted = row.opt_real(8);
  t.executor = row.text(9);
  t.external_id = row.opt_text(10);
  t.attempts = row.int64(11);
  t.error = row.opt_text(12);
  t.log_path = row.opt_text(13);
  t.created_at = row.real(14);
  t.started_at = row.opt_real(15);
  t.finished_at = row.opt_real(16);
  t.fingerprint_json = row.opt_text(17);
  t.claim_host = row.opt_text(18);
  t.claim_pid = row.opt_int64(19);
  return t;
}

}  // namespace store_detail

using store_detail::now_seconds;
using store_detail::read_trial;

namespace {

std::vector<TrialRecord> collect_trials(sql::Statement& q, const std::string& path) {
  std::vector<TrialRecord> out;
  while (q.step()) out.push_back(read_trial(q, path));
  return out;
}

// Why an UPDATE of a trial in flight changed nothing: it does not exist, or it already ended.
[[noreturn]] void explain_unchanged_trial(sql::Connection& db, std::int64_t trial_id, const char* doing) {
  auto q = db.prepare("SELECT status FROM trials WHERE id = ?1");
  q->bind(1, trial_id);
  if (!q->step()) throw StoreError("store " + db.name() + ": no trial with id " + std::to_string(trial_id));
  throw StoreError("store " + db.name() + ": cannot " + doing + " trial " + std::to_string(trial_id) +
                   ": it already finished with status '" + q->text(0) + "'");
}

}  // namespace

namespace {

// The insert of add_trial and add_claimed_trial, inside their transaction (the study is claimed):
// nullopt when the study already has this configuration.
std::optional<TrialId> insert_trial(sql::Connection& db, std::int64_t study_id, const NewTrial& n,
                                    const StudyLease* claim) {
  {
    auto seen = db.prepare("SELECT 1 FROM trials WHERE study_id = ?1 AND config_key = ?2");
    seen->bind(1, study_id);
    seen->bind(2, n.config_key);
    if (seen->step()) return std::nullopt;
  }
  std::int64_t seq;
  {
    auto next = db.prepare("SELECT COALESCE(MAX(seq), 0) + 1 FROM trials WHERE study_id = ?1");
    next->bind(1, study_id);
    next->step();
    seq = next->int64(0);
  }
  double now = now_seconds();
  bool running = n.status == TrialStatus::kRunning;
  auto insert = db.prepare(
      "INSERT INTO trials (study_id, seq, config_key, config_json, status, predicted, executor, attempts, "
      "created_at, started_at, fingerprint_json, claim_host, claim_pid) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
      "?9, ?10, ?11, ?12, ?13) RETURNING id");
  insert->bind(1, study_id);
  insert->bind(2, seq);
  insert->bind(3, n.config_key);
  insert->bind(4, n.config_json);
  insert->bind(5, to_string(n.status));
  insert->bind(6, n.predicted);
  insert->bind(7, n.executor);
  insert->bind(8, std::int64_t{running ? 1 : 0});
  insert->bind(9, now);
  insert->bind(10, running ? std::optional<double>(now) : std::nullopt);
  insert->bind(11, n.fingerprint_json);
  if (claim != nullptr) {
    insert->bind(12, claim->host);
    insert->bind(13, claim->pid);
  } else {
    insert->bind_null(12);
    insert->bind_null(13);
  }
  insert->step();
  return TrialId{insert->int64(0), seq};
}

void check_new_trial(const NewTrial& n) {
  if (is_finished(n.status))
    throw std::invalid_argument("Store::add_trial: a new trial is pending or running, not '" +
                                std::string(to_string(n.status)) + "'");
}

}  // namespace

std::optional<TrialId> Store::add_trial(std::int64_t study_id, const NewTrial& n) {
  check_new_trial(n);
  return write([&]() -> std::optional<TrialId> {
    sql::Connection& db = impl_->db;
    if (!store_detail::claim_study(db, study_id))
      throw StoreError("store " + path_ + ": no study with id " + std::to_string(study_id));
    return insert_trial(db, study_id, n, nullptr);
  });
}

ClaimedTrial Store::add_claimed_trial(std::int64_t study_id, const NewTrial& n, const StudyLease& claim,
                                      std::optional<std::int64_t> limit) {
  check_new_trial(n);
  return write([&]() -> ClaimedTrial {
    sql::Connection& db = impl_->db;
    if (!store_detail::claim_study(db, study_id))
      throw StoreError("store " + path_ + ": no study with id " + std::to_string(study_id));
    ClaimedTrial out;
    if (limit) {
      // Counted (ok, failed, oom, timeout) and in flight: what the budget has given out. The study's
      // row is claimed above, so no other worker adds a trial between this count and the insert.
      auto q = db.prepare(
          "SELECT COUNT(*) FROM trials WHERE study_id = ?1 AND status IN ('ok', 'failed', 'oom', 'timeout', "
          "'pending', 'running')");
      q->bind(1, study_id);
      q->step();
      if (q->int64(0) >= *limit) {
        out.budget_full = true;
        return out;
      }
    }
    out.id = insert_trial(db, study_id, n, &claim);
    return out;
  });
}

void Store::update_trial_started(std::int64_t trial_id, const std::string& external_id) {
  write([&] {
    sql::Connection& db = impl_->db;
    auto q = db.prepare(
        "UPDATE trials SET status = 'running', external_id = ?1, started_at = ?2, attempts = attempts + 1 "
        "WHERE id = ?3 AND status IN ('pending', 'running')");
    q->bind(1, external_id);
    q->bind(2, now_seconds());
    q->bind(3, trial_id);
    q->step();
    if (db.changes() == 0) explain_unchanged_trial(db, trial_id, "start");
  });
}

void Store::forget_trial_job(std::int64_t trial_id) {
  write([&] {
    auto q = impl_->db.prepare(
        "UPDATE trials SET external_id = NULL WHERE id = ?1 AND status IN ('pending', 'running')");
    q->bind(1, trial_id);
    q->step();
  });
}

void Store::finish_trial(std::int64_t trial_id, const TrialOutcome& o) {
  if (!is_finished(o.status))
    throw std::invalid_argument("Store::finish_trial: a trial ends with a finished status, not '" +
                                std::string(to_string(o.status)) + "'");
  write([&] {
    sql::Connection& db = impl_->db;
    auto q = db.prepare(
        "UPDATE trials SET status = ?1, metrics_json = ?2, objective = ?3, error = ?4, log_path = ?5, "
        "finished_at = ?6 WHERE id = ?7 AND status IN ('pending', 'running')");
    q->bind(1, to_string(o.status));
    q->bind(2, o.metrics_json);
    q->bind(3, o.objective);
    q->bind(4, o.error);
    q->bind(5, o.log_path);
    q->bind(6, now_seconds());
    q->bind(7, trial_id);
    q->step();
    if (db.changes() == 0) explain_unchanged_trial(db, trial_id, "finish");
  });
}

std::optional<TrialRecord> Store::trial(std::int64_t trial_id) {
  return read([&]() -> std::optional<TrialRecord> {
    auto q = impl_->db.prepare("SELECT " COTUNE_TRIAL_COLUMNS " FROM trials WHERE id = ?1");
    q->bind(1, trial_id);
    if (!q->step()) return std::nullopt;
    return read_trial(*q, path_);
  });
}

std::vector<TrialRecord> Store::trials(std::int64_t study_id) {
  return read([&] {
    auto q = impl_->db.prepare("SELECT " COTUNE_TRIAL_COLUMNS " FROM trials WHERE study_id = ?1 ORDER BY seq");
    q->bind(1, study_id);
    return collect_trials(*q, path_);
  });
}

std::vector<TrialRecord> Store::trials_by_status(std::int64_t study_id, const std::vector<TrialStatus>& statuses) {
  if (statuses.empty()) return {};
  // One statement per number of statuses; the cache keeps each compiled. No ORDER BY: it would
  // steer SQLite to the (study_id, seq) index and a scan of the whole study, where the status
  // index finds the few in-flight trials of a large study at once.
  std::string sql = "SELECT " COTUNE_TRIAL_COLUMNS " FROM trials WHERE study_id = ?1 AND status IN (";
  for (size_t i = 0; i < statuses.size(); ++i) sql += (i ? ", ?" : "?") + std::to_string(i + 2);
  sql += ")";
  std::vector<TrialRecord> out = read([&] {
    auto q = impl_->db.prepare(sql.c_str());
    q->bind(1, study_id);
    for (size_t i = 0; i < statuses.size(); ++i) q->bind(static_cast<int>(i + 2), to_string(statuses[i]));
    return collect_trials(*q, path_);
  });
  std::sort(out.begin(), out.end(), [](const TrialRecord& a, const TrialRecord& b) { return a.seq < b.seq; });
  return out;
}

std::optional<TrialRecord> Store::best_trial(std::int64_t study_id) {
  return read([&]() -> std::optional<TrialRecord> {
    sql::Connection& db = impl_->db;
    std::string direction;
    {
      auto s = db.prepare("SELECT direction FROM studies WHERE id = ?1");
      s->bind(1, study_id);
      if (!s->step()) throw StoreError("store " + path_ + ": no study with id " + std::to_string(study_id));
      direction = s->text(0);
    }
    // The best value is one seek in the status index; then the earliest trial that reached it.
    std::optional<double> best;
    {
      auto b = db.prepare(direction == "minimize"
                              ? "SELECT MIN(objective) FROM trials WHERE study_id = ?1 AND status = 'ok'"
                              : "SELECT MAX(objective) FROM trials WHERE study_id = ?1 AND status = 'ok'");
      b->bind(1, study_id);
      b->step();
      best = b->opt_real(0);
    }
    if (!best) return std::nullopt;
    auto q = db.prepare("SELECT " COTUNE_TRIAL_COLUMNS " FROM trials WHERE study_id = ?1 AND status = 'ok' "
                        "AND objective = ?2 ORDER BY +seq LIMIT 1");  // '+': sort the few ties, do not scan by seq
    q->bind(1, study_id);
    q->bind(2, *best);
    if (!q->step()) return std::nullopt;
    return read_trial(*q, path_);
  });
}

std::unordered_set<std::string> Store::seen_config_keys(std::int64_t study_id) {
  return read([&] {
    auto q = impl_->db.prepare("SELECT config_key FROM trials WHERE study_id = ?1");
    q->bind(1, study_id);
    std::unordered_set<std::string> keys;
    while (q->step()) keys.insert(q->text(0));
    return keys;
  });
}

std::vector<TrialRecord> Store::trials_from_seq(std::int64_t study_id, std::int64_t from_seq) {
  return read([&] {
    auto q = impl_->db.prepare("SELECT " COTUNE_TRIAL_COLUMNS " FROM trials WHERE study_id = ?1 AND seq >= ?2 "
                               "ORDER BY seq");
    q->bind(1, study_id);
    q->bind(2, from_seq);
    return collect_trials(*q, path_);
  });
}

std::int64_t Store::trial_count(std::int64_t study_id) {
  return read([&] {
    auto q = impl_->db.prepare("SELECT COUNT(*) FROM trials WHERE study_id = ?1");
    q->bind(1, study_id);
    q->step();
    return q->int64(0);
  });
}

}  // namespace cotune::core
