#include "store/sqlite.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <system_error>

namespace cotune::core::sqlite {
namespace {

// For an error of the file system underneath ("disk I/O error", "database or disk is full"), the
// reason as far as it can be found: SQLite's errno when it kept a telling one, else a full file
// system or a reached file size limit (ulimit -f) seen from here. Empty when none is found.
std::string system_cause(sqlite3* db, int rc, const std::string& path) {
  const int primary = rc & 0xFF;
  if (primary == SQLITE_READONLY && db != nullptr && sqlite3_db_readonly(db, "main") == 1)
    return " (this user may not write the store file or its directory, so it was opened read-only: show, report "
           "and export-history read it; a run or an import needs a store it can write)";
  if (primary != SQLITE_IOERR && primary != SQLITE_FULL && primary != SQLITE_CANTOPEN) return {};
  const int err = db ? sqlite3_system_errno(db) : 0;
  if (err == ENOSPC || err == EFBIG || err == EDQUOT || err == EROFS || err == EACCES || err == EIO)
    return ": " + std::generic_category().message(err);
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::absolute(path, ec).parent_path();
  const fs::space_info space = fs::space(dir, ec);
  if (!ec && space.available < (1u << 20))
    return ": " + std::generic_category().message(ENOSPC) + " (" + std::to_string(space.available) +
           " bytes free in " + dir.string() + ")";
  rlimit limit{};
  if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    std::uintmax_t largest = 0;
    for (const char* suffix : {"", "-wal", "-journal"}) {
      std::uintmax_t size = fs::file_size(path + suffix, ec);
      if (!ec) largest = std::max(largest, size);
    }
    if (largest + (1u << 16) >= limit.rlim_cur)
      return ": " + std::generic_category().message(EFBIG) + " (the file size limit, ulimit -f, is " +
             std::to_string(limit.rlim_cur) + " bytes)";
  }
  return err != 0 ? ": " + std::generic_category().message(err) : std::string();
}

}  // namespace

void fail(sqlite3* db, int rc, const std::string& path, std::string_view doing) {
  std::string message = "store " + path + ": ";
  // The connection's message is more specific than sqlite3_errstr when it belongs to this error.
  if (db && sqlite3_extended_errcode(db) == rc) message += sqlite3_errmsg(db);
  else message += sqlite3_errstr(rc);
  message += system_cause(db, rc, path);
  message += " (while ";
  message += doing;
  message += ")";
  throw Error(rc, message);
}

Statement::Statement(sqlite3* db, std::string_view sql, const std::string& context)
    : db_(db), context_(context) {
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                              &stmt_, nullptr);
  if (rc != SQLITE_OK) fail(db, rc, context, "preparing: " + std::string(sql.substr(0, 80)));
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::bind(int index, std::int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) fail(db_, rc, context_, "binding a parameter");
}

void Statement::bind(int index, double value) {
  int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) fail(db_, rc, context_, "binding a parameter");
}

void Statement::bind(int index, std::string_view value) {
  int rc = sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) fail(db_, rc, context_, "binding a parameter");
}

void Statement::bind_blob(int index, const std::vector<std::uint8_t>& value) {
  // A zero-length blob is stored as an empty blob (not NULL): "saved, and empty".
  int rc = value.empty() ? sqlite3_bind_zeroblob(stmt_, index, 0)
                         : sqlite3_bind_blob64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) fail(db_, rc, context_, "binding a parameter");
}

void Statement::bind_null(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) fail(db_, rc, context_, "binding a parameter");
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  std::string sql = sqlite3_sql(stmt_) ? sqlite3_sql(stmt_) : "";
  fail(db_, sqlite3_extended_errcode(db_), context_, "running: " + sql.substr(0, 80));
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
std::int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::real(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::text(int column) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  int n = sqlite3_column_bytes(stmt_, column);
  return p ? std::string(p, static_cast<size_t>(n)) : std::string();
}

std::vector<std::uint8_t> Statement::blob(int column) const {
  const auto* p = static_cast<const std::uint8_t*>(sqlite3_column_blob(stmt_, column));
  int n = sqlite3_column_bytes(stmt_, column);
  return p ? std::vector<std::uint8_t>(p, p + n) : std::vector<std::uint8_t>();
}

Database::Database(const std::string& path, int flags, const std::string& display)
    : path_(display.empty() ? path : display) {
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc)) + system_cause(db_, rc, path_);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw Error(rc, "store " + path_ + ": cannot open: " + message);
  }
  sqlite3_extended_result_codes(db_, 1);
}

Database::~Database() {
  cache_.clear();  // statements first: close_v2 would otherwise defer the close
  sqlite3_close_v2(db_);
}

void Database::exec(const char* sql) {
  char* message = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    std::string text = message ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    const int code = sqlite3_extended_errcode(db_) ? sqlite3_extended_errcode(db_) : rc;
    throw Error(code, "store " + path_ + ": " + text + system_cause(db_, code, path_) +
                          " (while running: " + std::string(sql).substr(0, 80) + ")");
  }
}

std::string Database::query_text(const char* sql) {
  Statement s(db_, sql, path_);
  if (!s.step()) return std::string();
  return s.text(0);
}

std::int64_t Database::query_int64(const char* sql) {
  Statement s(db_, sql, path_);
  if (!s.step()) return 0;
  return s.int64(0);
}

StatementUse Database::prepare(const char* sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) it = cache_.emplace(sql, std::make_unique<Statement>(db_, sql, path_)).first;
  return StatementUse(*it->second);
}

}  // namespace cotune::core::sqlite
