// The SQLite implementation of the store's SQL connection (sql.hpp): small RAII wrappers over the
// SQLite C API, prepared statements (with a per-connection cache, so hot statements are compiled
// once) and errors that carry the SQLite result code.
#ifndef COTUNE_STORE_SQLITE_HPP_
#define COTUNE_STORE_SQLITE_HPP_

#include "store/sql.hpp"

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
class Error : public sql::Error {
 public:
  Error(int code, const std::string& message)
      : sql::Error(message, is_busy(code), (code & 0xFF) == SQLITE_CONSTRAINT), code_(code) {}
  int code() const { return code_; }  // extended result code
  bool busy() const { return is_busy(code_); }
  static bool is_busy(int code) {
    int primary = code & 0xFF;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
  }

 private:
  int code_;
};

class Statement : public sql::Statement {
 public:
  Statement(sqlite3* db, std::string_view sql, const std::string& context);
  ~Statement() override;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  using sql::Statement::bind;
  void bind(int index, std::int64_t value) override;
  void bind(int index, double value) override;
  void bind(int index, std::string_view value) override;
  void bind_blob(int index, const std::vector<std::uint8_t>& value) override;
  void bind_null(int index) override;

  bool step() override;
  void reset() override;

  bool is_null(int column) const override;
  std::int64_t int64(int column) const override;
  double real(int column) const override;
  std::string text(int column) const override;
  std::vector<std::uint8_t> blob(int column) const override;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  const std::string& context_;  // the store path, for messages (owned by the Database)
};

using sql::StatementUse;

class Database : public sql::Connection {
 public:
  // Opens with the given sqlite3_open_v2 flags. `path` is also the name used in messages.
  // `path` as sqlite3_open_v2 takes it (a file name, or a file: URI with SQLITE_OPEN_URI); `display`
  // is the store's name in messages (the path when empty).
  Database(const std::string& path, int flags, const std::string& display = "");
  ~Database() override;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

  sql::Dialect dialect() const override { return sql::Dialect::kSqlite; }
  const std::string& name() const override { return path_; }
  void exec(const char* sql) override;
  // Runs a one-row, one-column query (a PRAGMA, a count) and returns the value.
  std::string query_text(const char* sql) override;
  std::int64_t query_int64(const char* sql) override;
  StatementUse prepare(const char* sql) override;
  int changes() const override { return sqlite3_changes(db_); }

  // BEGIN IMMEDIATE for writes (the write lock at once), a deferred BEGIN for reads.
  void begin(sql::Access access) override { exec(access == sql::Access::kWrite ? "BEGIN IMMEDIATE" : "BEGIN"); }
  void commit() override { exec("COMMIT"); }
  bool in_transaction() const override { return sqlite3_get_autocommit(db_) == 0; }
  void rollback() noexcept override { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
  std::unordered_map<std::string, std::unique_ptr<Statement>> cache_;  // keyed by SQL text
};

// Throws Error for `rc` with the connection's message, naming the store file.
[[noreturn]] void fail(sqlite3* db, int rc, const std::string& path, std::string_view doing);

}  // namespace cotune::core::sqlite

#endif  // COTUNE_STORE_SQLITE_HPP_
