// Opening a store: an SQLite file or a PostgreSQL database, checked to be a cotune store (or empty)
// before anything is written, then brought to this cotune's schema.
#include <cotune/core/store/store.hpp>
#include <cotune/core/store/store_location.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "store/postgres.hpp"
#include "store/schema.hpp"
#include "store/sqlite.hpp"
#include "store/store_impl.hpp"

namespace cotune::core {

using store_detail::run_transaction;

namespace {

// Wraps the errors of a file that is not what we expect into messages a user can act on.
[[noreturn]] void explain_open_failure(const sqlite::Error& e, const std::string& path) {
  int primary = e.code() & 0xFF;
  if (primary == SQLITE_NOTADB)
    throw StoreError("store " + path + ": this file is not an SQLite database, so not a cotune store; " +
                     "it was left untouched. Pass the path of a cotune store, or a new file name.");
  if (primary == SQLITE_CORRUPT)
    throw StoreError("store " + path + ": the database is damaged (" + e.what() + ")");
  throw e;
}

std::unique_ptr<sqlite::Database> open_sqlite(const std::string& path, const Store::Options& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  bool exists = fs::exists(path, ec);
  if (exists && fs::is_directory(path, ec))
    throw StoreError("store " + path + ": is a directory; expected a store file such as " + path + "/" +
                     kDefaultStorePath);
  if (!exists && !options.create)
    throw StoreError("store " + path + ": no such file (create a study first, or check the path)");
  const fs::path dir = fs::path(path).parent_path();
  if (!exists && !dir.empty() && !fs::exists(dir, ec) && !ec)
    throw StoreError("store " + path + ": the directory " + dir.string() +
                     " does not exist (cotune creates the store file, not the directories above it)");
  const std::string dir_name = dir.empty() ? "." : dir.string();
  const bool dir_writable = ::access(dir_name.c_str(), W_OK) == 0;
  if (!exists && !dir_writable)
    throw StoreError("store " + path + ": cannot create it: the directory " + dir_name + " is not writable");
  // A store this user may not write (another user's, a read-only mount): opened read-only, so that
  // show, report and export read it. Read-write, SQLite would need to create the WAL's -shm file
  // beside it even to read.
  const bool read_only = exists && (::access(path.c_str(), W_OK) != 0 || !dir_writable);
  int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX |
              (options.create && !read_only ? SQLITE_OPEN_CREATE : 0);
  // Without its -wal and -shm files (no writer has it open), a WAL database opened read-only would
  // still have to create the -shm: it is read as immutable instead, which is what it is to us.
  std::string name = path;
  if (read_only && !fs::exists(path + "-wal", ec) && !fs::exists(path + "-shm", ec)) {
    name = "file:";
    for (const char ch : fs::absolute(path, ec).string()) {
      if (ch == '%' || ch == '?' || ch == '#') {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(ch));
        name += hex;
      } else {
        name += ch;
      }
    }
    name += "?immutable=1";
    flags |= SQLITE_OPEN_URI;
  }
  auto db = std::make_unique<sqlite::Database>(name, flags, path);
  sqlite3_busy_timeout(db->handle(), static_cast<int>(std::min(options.busy_timeout_s * 1000.0, 2.0e9)));
  return db;
}

}  // namespace

Store::Store(const std::string& location, const Options& options) : path_(redact_store_location(location)) {
  if (!(options.busy_timeout_s >= 0)) throw StoreError("store " + path_ + ": busy timeout must be >= 0");
  if (std::string why = check_store_location(location); !why.empty()) throw StoreError(why);
  const bool postgres = is_postgres_url(location);
  if (postgres)
    impl_ = std::make_unique<Impl>(std::make_unique<postgres::Connection>(connection_url(location), options.busy_timeout_s),
                                   options);
  else
    impl_ = std::make_unique<Impl>(open_sqlite(location, options), options);
  sql::Connection& db = impl_->db;

  // Look before writing anything: a foreign file or database must come out of this unchanged.
  try {
    auto identify = [&] { return schema::identify(db); };
    schema::check_identity(run_transaction(*impl_, sql::Access::kRead, identify), path_,
                           schema::latest_version(schema::migrations_for(db.dialect())));
  } catch (const sqlite::Error& e) {
    explain_open_failure(e, path_);
  }

  if (!postgres && sqlite3_db_readonly(static_cast<sqlite::Database&>(db).handle(), "main") == 1) {
    // Read-only: nothing is set, and a store this cotune would have to migrate cannot be read.
    auto version = [&] { return schema::read_version(db); };
    if (run_transaction(*impl_, sql::Access::kRead, version) != schema::latest_version(schema::migrations_for(db.dialect())))
      throw StoreError("store " + path_ + ": this user may not write it, and its schema needs an upgrade that "
                       "writes; open it once as its owner with this cotune");
    return;
  }
  if (!postgres) {
    auto set_wal = [&] { return db.query_text("PRAGMA journal_mode = WAL"); };
    std::string mode = run_transaction(*impl_, std::nullopt, set_wal);
    if (mode != "wal" && mode != "memory")
      throw StoreError("store " + path_ + ": cannot use the WAL journal (SQLite answered '" + mode +
                       "'); is the file on a network file system? Put the store on a local disk.");
    db.exec(options.sync == Sync::kFull ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
    db.exec("PRAGMA foreign_keys = ON");
  }
  // A database without a store yet is refused without options.create, as a missing file is.
  if (postgres && !options.create) {
    auto version = [&] { return schema::read_version(db); };
    if (run_transaction(*impl_, sql::Access::kRead, version) == 0)
      throw StoreError("store " + path_ +
                       ": the database holds no cotune store yet (create a study first, or check the URL)");
  }
  auto migrate = [&] { return schema::migrate(db); };
  run_transaction(*impl_, std::nullopt, migrate);
}

Store::~Store() = default;

int Store::latest_schema_version() { return schema::latest_version(); }

int Store::schema_version() {
  return read([&] { return schema::read_version(impl_->db); });
}

}  // namespace cotune::core
