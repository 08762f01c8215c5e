// Internals shared by the store's source files: the connection, the transaction-with-retry helper
// behind Store::write/read, and the mapping of rows to records.
#ifndef COTUNE_STORE_STORE_IMPL_HPP_
#define COTUNE_STORE_STORE_IMPL_HPP_

#include <cotune/core/store/store.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>

#include "store/sql.hpp"

namespace cotune::core {

namespace store_detail {

// An open store (an SQLite file or a PostgreSQL database) and how to use it.
struct Connection {
  Connection(std::unique_ptr<sql::Connection> c, const Store::Options& o)
      : owned(std::move(c)), db(*owned), options(o) {}
  std::unique_ptr<sql::Connection> owned;
  sql::Connection& db;
  Store::Options options;
  std::minstd_rand jitter{std::random_device{}()};
};

// Current time as UTC unix seconds.
double now_seconds();

// Rolls back an open transaction unless it was committed (a throwing body, a failed COMMIT).
class TransactionGuard {
 public:
  explicit TransactionGuard(sql::Connection& db) : db_(db) {}
  ~TransactionGuard() {
    if (db_.in_transaction()) db_.rollback();
  }
  TransactionGuard(const TransactionGuard&) = delete;
  TransactionGuard& operator=(const TransactionGuard&) = delete;

 private:
  sql::Connection& db_;
};

[[noreturn]] void throw_locked_too_long(const std::string& path, double seconds);

// Runs `body` inside a transaction for `access` (none when `access` is null: for statements that
// cannot run in one, such as a journal mode change), committing at the end. When it loses a race
// with another connection (SQLite: the lock is held past SQLite's own busy wait, or a busy code
// SQLite does not wait on, such as a stale WAL snapshot; PostgreSQL: a serialization failure or a
// deadlock) the whole transaction is rolled back and run again after a short randomised backoff,
// until the store's busy timeout has passed.
template <class F>
auto run_transaction(Connection& impl, std::optional<sql::Access> access, F& body) -> decltype(body()) {
  using Result = decltype(body());
  const auto start = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(impl.options.busy_timeout_s);
  for (int attempt = 0;; ++attempt) {
    try {
      TransactionGuard guard(impl.db);
      if (access) impl.db.begin(*access);
      if constexpr (std::is_void_v<Result>) {
        body();
        if (access) impl.db.commit();
        return;
      } else {
        Result result = body();
        if (access) impl.db.commit();
        return result;
      }
    } catch (const sql::Error& e) {
      if (!e.retry()) throw;
      if (std::chrono::steady_clock::now() - start >= limit)
        throw_locked_too_long(impl.db.name(), impl.options.busy_timeout_s);
      int cap_ms = 1 << std::min(attempt, 7);  // 1 .. 128 ms
      std::this_thread::sleep_for(std::chrono::microseconds(
          500 + static_cast<int>(impl.jitter() % static_cast<unsigned>(cap_ms * 1000))));
    }
  }
}

// Whether the study exists; on PostgreSQL also makes writers of one study's trials take turns (a
// write of its row that changes nothing: a second writer waits for the first, then fails with a
// serialization failure and runs again on a snapshot that sees the first one's trials, instead of
// numbering a trial with the same seq). On SQLite, BEGIN IMMEDIATE already does that.
bool claim_study(sql::Connection& db, std::int64_t study_id);

// The study's lease (host, pid, heartbeat; none when no plain run holds it), its row locked to the
// end of the transaction (FOR UPDATE on PostgreSQL; on SQLite, BEGIN IMMEDIATE holds the file).
// StoreError when there is no such study. Inside a write transaction.
std::optional<StudyLease> locked_lease(sql::Connection& db, std::int64_t study_id);

// The first registered worker of the study that `holds` accepts; the rows of the others (gone) are
// removed. Inside a write transaction.
std::optional<StudyLease> live_worker(sql::Connection& db, std::int64_t study_id,
                                      const std::function<bool(const StudyLease&)>& holds);

// Column list and reader of a trial row, kept together so that they cannot drift apart.
#define COTUNE_TRIAL_COLUMNS                                                                      \
  "id, study_id, seq, config_key, config_json, status, metrics_json, objective, predicted, "      \
  "executor, external_id, attempts, error, log_path, created_at, started_at, finished_at, "       \
  "fingerprint_json, claim_host, claim_pid"
TrialRecord read_trial(const sql::Statement& row, const std::string& path);

#define COTUNE_STUDY_COLUMNS                                                                      \
  "id, name, study_json, study_hash, workload_key, space, objective_json, direction, "            \
  "environment_json, status, created_at, updated_at, recommended_trial_id"
StudyRecord read_study(const sql::Statement& row, const std::string& path);

// Status words read back from a file; an unknown word means a damaged or foreign file.
TrialStatus trial_status_column(const sql::Statement& row, int column, const std::string& path);

}  // namespace store_detail

struct Store::Impl : store_detail::Connection {
  using Connection::Connection;
};

template <class F>
auto Store::write(F&& body) -> decltype(body()) {
  std::lock_guard<std::mutex> lock(mutex_);
  return store_detail::run_transaction(*impl_, sql::Access::kWrite, body);
}

// Reads run in a (deferred) transaction too, so that several queries see one snapshot.
template <class F>
auto Store::read(F&& body) -> decltype(body()) {
  std::lock_guard<std::mutex> lock(mutex_);
  return store_detail::run_transaction(*impl_, sql::Access::kRead, body);
}

}  // namespace cotune::core

#endif  // COTUNE_STORE_STORE_IMPL_HPP_
