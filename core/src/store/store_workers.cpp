// The workers of a study: several `cotune run --worker` processes that share one study, each trial
// claimed by one of them, and the trials of a worker that is gone taken over by another.
#include <cotune/core/store/store.hpp>

#include <map>
#include <string>
#include <utility>

#include "store/store_impl.hpp"

namespace cotune::core {
namespace store_detail {

std::optional<StudyLease> locked_lease(sql::Connection& db, std::int64_t study_id) {
  const bool postgres = db.dialect() == sql::Dialect::kPostgres;
  auto q = db.prepare(postgres ? "SELECT lease_host, lease_pid, lease_heartbeat FROM studies WHERE id = ?1 FOR UPDATE"
                               : "SELECT lease_host, lease_pid, lease_heartbeat FROM studies WHERE id = ?1");
  q->bind(1, study_id);
  if (!q->step()) throw StoreError("store " + db.name() + ": no study with id " + std::to_string(study_id));
  if (q->is_null(0) || q->is_null(1)) return std::nullopt;
  return StudyLease{q->text(0), q->int64(1), q->is_null(2) ? 0.0 : q->real(2)};
}

std::optional<StudyLease> live_worker(sql::Connection& db, std::int64_t study_id,
                                      const std::function<bool(const StudyLease&)>& holds) {
  std::vector<StudyLease> workers;
  {
    auto q = db.prepare("SELECT host, pid, heartbeat FROM study_workers WHERE study_id = ?1 ORDER BY heartbeat DESC");
    q->bind(1, study_id);
    while (q->step()) workers.push_back(StudyLease{q->text(0), q->int64(1), q->real(2)});
  }
  std::optional<StudyLease> live;
  for (const StudyLease& w : workers) {
    if (holds(w)) {
      if (!live) live = w;
      continue;
    }
    auto d = db.prepare("DELETE FROM study_workers WHERE study_id = ?1 AND host = ?2 AND pid = ?3");
    d->bind(1, study_id);
    d->bind(2, w.host);
    d->bind(3, w.pid);
    d->step();
  }
  return live;
}

}  // namespace store_detail

using store_detail::now_seconds;
using store_detail::read_trial;

namespace {

void upsert_worker(sql::Connection& db, std::int64_t study_id, const StudyLease& me) {
  auto q = db.prepare(
      "INSERT INTO study_workers (study_id, host, pid, heartbeat) VALUES (?1, ?2, ?3, ?4) "
      "ON CONFLICT (study_id, host, pid) DO UPDATE SET heartbeat = excluded.heartbeat");
  q->bind(1, study_id);
  q->bind(2, me.host);
  q->bind(3, me.pid);
  q->bind(4, now_seconds());
  q->step();
}

}  // namespace

std::optional<StudyLease> Store::join_study(std::int64_t study_id, const StudyLease& me,
                                            const std::function<bool(const StudyLease& holder)>& holds) {
  std::optional<StudyLease> held;
  write([&] {
    held.reset();
    sql::Connection& db = impl_->db;
    // The study's row, locked as take_study_lease locks it: a plain run and a worker starting
    // together cannot both get in.
    if (const std::optional<StudyLease> holder = store_detail::locked_lease(db, study_id); holder && holds(*holder)) {
      held = holder;
      return;
    }
    upsert_worker(db, study_id, me);
  });
  return held;
}

void Store::renew_worker(std::int64_t study_id, const StudyLease& me) {
  write([&] { upsert_worker(impl_->db, study_id, me); });
}

void Store::leave_study(std::int64_t study_id, const StudyLease& me) {
  write([&] {
    auto q = impl_->db.prepare("DELETE FROM study_workers WHERE study_id = ?1 AND host = ?2 AND pid = ?3");
    q->bind(1, study_id);
    q->bind(2, me.host);
    q->bind(3, me.pid);
    q->step();
  });
}

std::vector<StudyLease> Store::study_workers(std::int64_t study_id) {
  return read([&] {
    auto q = impl_->db.prepare("SELECT host, pid, heartbeat FROM study_workers WHERE study_id = ?1 ORDER BY host, pid");
    q->bind(1, study_id);
    std::vector<StudyLease> out;
    while (q->step()) out.push_back(StudyLease{q->text(0), q->int64(1), q->real(2)});
    return out;
  });
}

std::vector<TrialRecord> Store::claim_orphans(std::int64_t study_id, const StudyLease& me,
                                              const std::function<bool(const StudyLease& worker)>& holds) {
  return write([&] {
    sql::Connection& db = impl_->db;
    if (!store_detail::claim_study(db, study_id))
      throw StoreError("store " + path_ + ": no study with id " + std::to_string(study_id));
    // The live workers (the rows of those gone are removed on the way).
    std::map<std::pair<std::string, std::int64_t>, bool> live;
    {
      auto q = db.prepare("SELECT host, pid, heartbeat FROM study_workers WHERE study_id = ?1");
      q->bind(1, study_id);
      while (q->step()) {
        StudyLease w{q->text(0), q->int64(1), q->real(2)};
        live[{w.host, w.pid}] = (w.host == me.host && w.pid == me.pid) || holds(w);
      }
    }
    for (const auto& [worker, alive] : live) {
      if (alive) continue;
      auto d = db.prepare("DELETE FROM study_workers WHERE study_id = ?1 AND host = ?2 AND pid = ?3");
      d->bind(1, study_id);
      d->bind(2, worker.first);
      d->bind(3, worker.second);
      d->step();
    }
    std::vector<TrialRecord> orphans;
    {
      auto q = db.prepare("SELECT " COTUNE_TRIAL_COLUMNS " FROM trials WHERE study_id = ?1 "
                          "AND status IN ('pending', 'running') ORDER BY seq");
      q->bind(1, study_id);
      while (q->step()) {
        TrialRecord t = read_trial(*q, path_);
        if (t.claim_host && t.claim_pid) {
          auto it = live.find({*t.claim_host, *t.claim_pid});
          if (it != live.end() && it->second) continue;
        }
        t.claim_host = me.host;
        t.claim_pid = me.pid;
        orphans.push_back(std::move(t));
      }
    }
    // Claimed in this transaction, which holds the study (claim_study): no other worker changes
    // these rows meanwhile.
    for (const TrialRecord& t : orphans) {
      auto u = db.prepare("UPDATE trials SET claim_host = ?1, claim_pid = ?2 WHERE id = ?3 AND status IN ('pending', "
                          "'running')");
      u->bind(1, me.host);
      u->bind(2, me.pid);
      u->bind(3, t.id);
      u->step();
    }
    return orphans;
  });
}

}  // namespace cotune::core
