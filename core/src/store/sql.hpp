// The SQL connection the store runs its queries on, whatever the database: prepared statements with
// 1-based parameters, a row at a time, and errors that say whether running the transaction again can
// help. sqlite.hpp and postgres.hpp implement it; the Store's queries are written once, in the SQL
// both understand (numbered `?N` parameters, `INSERT ... ON CONFLICT DO NOTHING`, `RETURNING id`).
#ifndef COTUNE_STORE_SQL_HPP_
#define COTUNE_STORE_SQL_HPP_

#include <cotune/core/store/store.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cotune::core::sql {

enum class Dialect { kSqlite, kPostgres };

// A failure of the database. retry() is true when the transaction lost a race with another
// connection (SQLite's busy or locked, PostgreSQL's serialization failure, deadlock or lock
// timeout): rolled back and run again, it may succeed. constraint() is true when a constraint (a
// JSON check, a uniqueness) refused a row.
class Error : public StoreError {
 public:
  Error(const std::string& message, bool retry, bool constraint)
      : StoreError(message), retry_(retry), constraint_(constraint) {}
  bool retry() const { return retry_; }
  bool constraint() const { return constraint_; }

 private:
  bool retry_;
  bool constraint_;
};

class Statement {
 public:
  virtual ~Statement() = default;

  // Parameters are 1-based. Strings and blobs are copied.
  virtual void bind(int index, std::int64_t value) = 0;
  virtual void bind(int index, double value) = 0;
  virtual void bind(int index, std::string_view value) = 0;
  void bind(int index, const std::string& value) { bind(index, std::string_view(value)); }
  void bind(int index, const char* value) { bind(index, std::string_view(value)); }
  virtual void bind_blob(int index, const std::vector<std::uint8_t>& value) = 0;
  virtual void bind_null(int index) = 0;
  template <class T>
  void bind(int index, const std::optional<T>& value) {
    if (value) bind(index, *value);
    else bind_null(index);
  }

  // Runs the statement (on the first call) and moves to the next row: true when a row is ready,
  // false when done. Throws Error.
  virtual bool step() = 0;
  // Makes the statement runnable again and drops its bindings and results.
  virtual void reset() = 0;

  // Columns of the current row, 0-based.
  virtual bool is_null(int column) const = 0;
  virtual std::int64_t int64(int column) const = 0;
  virtual double real(int column) const = 0;
  virtual std::string text(int column) const = 0;
  virtual std::vector<std::uint8_t> blob(int column) const = 0;
  std::optional<std::int64_t> opt_int64(int column) const {
    return is_null(column) ? std::nullopt : std::optional<std::int64_t>(int64(column));
  }
  std::optional<double> opt_real(int column) const {
    return is_null(column) ? std::nullopt : std::optional<double>(real(column));
  }
  std::optional<std::string> opt_text(int column) const {
    return is_null(column) ? std::nullopt : std::optional<std::string>(text(column));
  }
};

// A cached statement in use; resets it when the scope ends so that it holds no lock or snapshot.
class StatementUse {
 public:
  explicit StatementUse(Statement& s) : s_(s) {}
  ~StatementUse() { s_.reset(); }
  StatementUse(const StatementUse&) = delete;
  StatementUse& operator=(const StatementUse&) = delete;
  Statement* operator->() { return &s_; }
  Statement& operator*() { return s_; }

 private:
  Statement& s_;
};

// What a transaction does: reads only, or writes (and so takes the write lock or the strictest
// isolation at its start, so that its reads and writes are one atomic step).
enum class Access { kRead, kWrite };

class Connection {
 public:
  virtual ~Connection() = default;
  virtual Dialect dialect() const = 0;
  // The store's name in messages: a file path, or a URL with its password redacted.
  virtual const std::string& name() const = 0;

  // Runs one or more statements that return no rows of interest.
  virtual void exec(const char* sql) = 0;
  // A one-row, one-column query, as text or integer (empty or 0 when there is no row).
  virtual std::string query_text(const char* sql) = 0;
  virtual std::int64_t query_int64(const char* sql) = 0;
  // A prepared statement for this exact SQL text (written with `?N` parameters), compiled once.
  virtual StatementUse prepare(const char* sql) = 0;
  // Rows changed by the last INSERT, UPDATE or DELETE.
  virtual int changes() const = 0;

  virtual void begin(Access access) = 0;
  virtual void commit() = 0;
  virtual bool in_transaction() const = 0;
  virtual void rollback() noexcept = 0;
};

}  // namespace cotune::core::sql

#endif  // COTUNE_STORE_SQL_HPP_
