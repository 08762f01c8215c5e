// The store's schema as a list of migrations per database: a migration step takes a store from
// version-1 to version. The version and the application marker live in PRAGMA user_version and
// PRAGMA application_id on SQLite, and in the table cotune_meta on PostgreSQL. To change the schema,
// append one step to both lists (schema.cpp, schema_postgres.cpp), with the same version and summary.
#ifndef COTUNE_STORE_SCHEMA_HPP_
#define COTUNE_STORE_SCHEMA_HPP_

#include "store/sql.hpp"

#include <cstdint>
#include <vector>

namespace cotune::core::schema {

// The application marker of a cotune store ("COTN"): tells our stores from other databases.
inline constexpr std::int32_t kApplicationId = 0x434F544E;

struct Migration {
  int version;          // the version this step produces: 1, 2, 3, ... in order
  const char* summary;  // one line, for messages
  const char* sql;      // statements run inside the migration's transaction
};

// Every step of this cotune's SQLite schema, in order; the last one's version is the latest.
const std::vector<Migration>& migrations();
// The same steps for PostgreSQL.
const std::vector<Migration>& postgres_migrations();
const std::vector<Migration>& migrations_for(sql::Dialect dialect);
int latest_version(const std::vector<Migration>& steps = migrations());

// What an existing store holds, read without writing anything.
struct FileIdentity {
  sql::Dialect dialect = sql::Dialect::kSqlite;
  std::int32_t application_id = 0;  // the marker (0: none)
  int user_version = 0;             // the schema version (0: none)
  std::vector<std::string> tables;  // its tables (on PostgreSQL, those of the current schema)
};
FileIdentity identify(sql::Connection& db);
// The schema version alone (0 for a new store).
int read_version(sql::Connection& db);

// Refuses stores that are not cotune stores, or were written by a newer schema (StoreError).
// An empty database (a new or zero-length file, a database without tables) is accepted.
void check_identity(const FileIdentity& id, const std::string& path, int latest);

// Brings the store to the last step's version in one transaction that holds the write lock
// (BEGIN IMMEDIATE; on PostgreSQL an advisory lock), so concurrent openers migrate once. Returns
// the version it found.
int migrate(sql::Connection& db, const std::vector<Migration>& steps);
int migrate(sql::Connection& db);  // this cotune's steps for the connection's database

}  // namespace cotune::core::schema

#endif  // COTUNE_STORE_SCHEMA_HPP_
