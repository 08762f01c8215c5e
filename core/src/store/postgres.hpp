// The PostgreSQL implementation of the store's SQL connection (sql.hpp), over libpq. Queries are
// written with SQLite's `?N` parameters and translated to `$N`; parameters go as text (blobs as
// binary bytea) with their types, results come back as text.
//
// Transactions: writes run SERIALIZABLE, reads REPEATABLE READ READ ONLY (one snapshot), so a
// store on PostgreSQL keeps the guarantees of SQLite's one-writer-at-a-time; a transaction that
// loses a race fails with a serialization failure, which Error::retry() reports for the caller to
// run it again.
#ifndef COTUNE_STORE_POSTGRES_HPP_
#define COTUNE_STORE_POSTGRES_HPP_

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/sql.hpp"

struct pg_conn;
struct pg_result;

namespace cotune::core::postgres {

class Connection;

class Statement : public sql::Statement {
 public:
  Statement(Connection& connection, std::string_view sql);
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
  struct Parameter {
    std::string value;
    unsigned type = 0;  // an Oid; 0 lets the server infer it (NULL)
    bool null = true;
    bool binary = false;
  };
  Parameter& parameter(int index);
  const char* cell(int column) const;

  Connection& connection_;
  std::string sql_;  // with $N parameters
  std::vector<Parameter> parameters_;
  pg_result* result_ = nullptr;
  int row_ = -1;
};

class Connection : public sql::Connection {
 public:
  // Connects to `url` (postgresql://...; the password from the URL, PGPASSFILE or the PG*
  // environment, as libpq finds it). A statement waits at most `lock_timeout_s` for a lock held by
  // another connection. Throws StoreError naming the store (password redacted) when it cannot.
  Connection(const std::string& url, double lock_timeout_s);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sql::Dialect dialect() const override { return sql::Dialect::kPostgres; }
  const std::string& name() const override { return name_; }
  void exec(const char* sql) override;
  std::string query_text(const char* sql) override;
  std::int64_t query_int64(const char* sql) override;
  sql::StatementUse prepare(const char* sql) override;
  int changes() const override { return changes_; }

  void begin(sql::Access access) override;
  void commit() override { exec("COMMIT"); }
  bool in_transaction() const override;
  void rollback() noexcept override;

 private:
  friend class Statement;
  // Throws the Error for a failed result (and clears it), naming what was being done.
  [[noreturn]] void fail(pg_result* result, std::string_view doing);
  // The result of a simple query, or the Error.
  pg_result* run(const char* sql);

  std::string name_;
  std::string password_;  // as libpq found it, only to keep it out of messages
  pg_conn* conn_ = nullptr;
  int changes_ = 0;
  std::unordered_map<std::string, std::unique_ptr<Statement>> cache_;  // keyed by the `?N` SQL text
};

// `?N` parameters (and bare `?`, numbered in order) as PostgreSQL's `$N`; quoted text is left alone.
std::string translate_parameters(std::string_view sql);

}  // namespace cotune::core::postgres

#endif  // COTUNE_STORE_POSTGRES_HPP_
