// Small RAII wrappers over the SQLite C API: a connection, prepared statements (with a per-connection
// cache, so hot statements are compiled once) and errors that carry the SQLite result code.
#ifndef COTUNE_STORE_SQLITE_HPP_
#define COTUNE_STORE_SQLITE_HPP_

#include <cotune/core/store/store.hpp>

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cotune::core::sqlite {

// An SQLite failure. busy() is true for the "another connection holds the lock" family, which
// callers retry instead of reporting.
class Error : public StoreError {
 public:
  Error(int code, const std::string& message) : StoreError(message), code_(code) {}
  int code() const { return code_; }  // extended result code
  bool busy() const {
    int primary = code_ & 0xFF;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
  }

 private:
  int code_;
};

class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql, const std::string& context);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, as in SQLite. Strings and blobs are copied by SQLite.
  void bind(int index, std::int64_t value);
  void bind(int index, double value);
  void bind(int index, std::string_view value);
  void bind(int index, const std::string& value) { bind(index, std::string_view(value)); }
  void bind(int index, const char* value) { bind(index, std::string_view(value)); }
  void bind_blob(int index, const std::vector<std::uint8_t>& value);
  void bind_null(int index);
  template <class T>
  void bind(int index, const std::optional<T>& value) {
    if (value) bind(index, *value);
    else bind_null(index);
  }

  // Runs one step: true when a row is ready, false when done. Throws Error otherwise.
  bool step();
  // Makes the statement runnable again and drops its bindings (and its read snapshot).
  void reset();

  bool is_null(int column) const;
  std::int64_t int64(int column) const;
  double real(int column) const;
  std::string text(int column) const;
  std::vector<std::uint8_t> blob(int column) const;
  std::optional<std::int64_t> opt_int64(int column) const;
  std::optional<double> opt_real(int column) const;
  std::optional<std::string> opt_text(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  const std::string& context_;  // the store path, for messages (owned by the Database)
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

class Database {
 public:
  // Opens with the given sqlite3_open_v2 flags. `path` is also the name used in messages.
  Database(const std::string& path, int flags);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

  // Runs one or more statements that return no rows of interest.
  void exec(const char* sql);
  // Runs a one-row, one-column query (a PRAGMA, a count) and returns the value as text.
  std::string query_text(const char* sql);
  std::int64_t query_int64(const char* sql);
  // A prepared statement for this exact SQL text, compiled on first use.
  StatementUse prepare(const char* sql);

  std::int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
  int changes() const { return sqlite3_changes(db_); }
  bool in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, std::unique_ptr<Statement>> cache_;  // keyed by SQL text
};

// Throws Error for `rc` with the connection's message, naming the store file.
[[noreturn]] void fail(sqlite3* db, int rc, const std::string& path, std::string_view doing);

}  // namespace cotune::core::sqlite

#endif  // COTUNE_STORE_SQLITE_HPP_
