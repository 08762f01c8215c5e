// Internals shared by the store's source files: the connection, the transaction-with-retry helper
// behind Store::write/read, and the mapping of rows to records.
#ifndef COTUNE_STORE_STORE_IMPL_HPP_
#define COTUNE_STORE_STORE_IMPL_HPP_

#include <cotune/core/store/store.hpp>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <type_traits>

#include "store/sqlite.hpp"

namespace cotune::core {

namespace store_detail {

// An open store file and how to use it.
struct Connection {
  Connection(const std::string& path, int flags, const Store::Options& o) : db(path, flags), options(o) {}
  sqlite::Database db;
  Store::Options options;
  std::minstd_rand jitter{std::random_device{}()};
};

// Current time as UTC unix seconds.
double now_seconds();

// Rolls back an open transaction unless it was committed (a throwing body, a failed COMMIT).
class TransactionGuard {
 public:
  explicit TransactionGuard(sqlite::Database& db) : db_(db) {}
  ~TransactionGuard() {
    if (db_.in_transaction()) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
  TransactionGuard(const TransactionGuard&) = delete;
  TransactionGuard& operator=(const TransactionGuard&) = delete;

 private:
  sqlite::Database& db_;
};

[[noreturn]] void throw_locked_too_long(const std::string& path, double seconds);

// Runs `body` inside a transaction opened with `begin` (none when `begin` is null: for statements
// that cannot run in one, such as a journal mode change), committing at the end. When another
// process holds the lock (SQLite's own busy wait already spent, or a busy code SQLite does not
// wait on, such as a stale WAL snapshot) the whole transaction is rolled back and run again after
// a short randomised backoff, until the store's busy timeout has passed.
template <class F>
auto run_transaction(Connection& impl, const char* begin, F& body) -> decltype(body()) {
  using Result = decltype(body());
  const auto start = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(impl.options.busy_timeout_s);
  for (int attempt = 0;; ++attempt) {
    try {
      TransactionGuard guard(impl.db);
      if (begin) impl.db.exec(begin);
      if constexpr (std::is_void_v<Result>) {
        body();
        if (begin) impl.db.exec("COMMIT");
        return;
      } else {
        Result result = body();
        if (begin) impl.db.exec("COMMIT");
        return result;
      }
    } catch (const sqlite::Error& e) {
      if (!e.busy()) throw;
      if (std::chrono::steady_clock::now() - start >= limit)
        throw_locked_too_long(impl.db.path(), impl.options.busy_timeout_s);
      int cap_ms = 1 << std::min(attempt, 7);  // 1 .. 128 ms
      std::this_thread::sleep_for(std::chrono::microseconds(
          500 + static_cast<int>(impl.jitter() % static_cast<unsigned>(cap_ms * 1000))));
    }
  }
}

// Column list and reader of a trial row, kept together so that they cannot drift apart.
#define COTUNE_TRIAL_COLUMNS                                                                      \
  "id, study_id, seq, config_key, config_json, status, metrics_json, objective, predicted, "      \
  "executor, external_id, attempts, error, log_path, created_at, started_at, finished_at, "       \
  "fingerprint_json"
TrialRecord read_trial(const sqlite::Statement& row, const std::string& path);

#define COTUNE_STUDY_COLUMNS                                                                      \
  "id, name, study_json, study_hash, workload_key, space, objective_json, direction, "            \
  "environment_json, status, created_at, updated_at, recommended_trial_id"
StudyRecord read_study(const sqlite::Statement& row, const std::string& path);

// Status words read back from a file; an unknown word means a damaged or foreign file.
TrialStatus trial_status_column(const sqlite::Statement& row, int column, const std::string& path);

}  // namespace store_detail

struct Store::Impl : store_detail::Connection {
  using Connection::Connection;
};

template <class F>
auto Store::write(F&& body) -> decltype(body()) {
  std::lock_guard<std::mutex> lock(mutex_);
  return store_detail::run_transaction(*impl_, "BEGIN IMMEDIATE", body);
}

// Reads run in a (deferred) transaction too, so that several queries see one snapshot.
template <class F>
auto Store::read(F&& body) -> decltype(body()) {
  std::lock_guard<std::mutex> lock(mutex_);
  return store_detail::run_transaction(*impl_, "BEGIN", body);
}

}  // namespace cotune::core

#endif  // COTUNE_STORE_STORE_IMPL_HPP_
