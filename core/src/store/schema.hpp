// The store's schema as a list of migrations. The version of a file is PRAGMA user_version; a
// migration step takes it from version-1 to version. To change the schema, append one step.
#ifndef COTUNE_STORE_SCHEMA_HPP_
#define COTUNE_STORE_SCHEMA_HPP_

#include "store/sqlite.hpp"

#include <cstdint>
#include <vector>

namespace cotune::core::schema {

// PRAGMA application_id of a cotune store ("COTN"): tells our files from other SQLite databases.
inline constexpr std::int32_t kApplicationId = 0x434F544E;

struct Migration {
  int version;          // the version this step produces: 1, 2, 3, ... in order
  const char* summary;  // one line, for messages
  const char* sql;      // statements run inside the migration's transaction
};

// Every step of this cotune's schema, in order; the last one's version is the latest.
const std::vector<Migration>& migrations();
int latest_version(const std::vector<Migration>& steps = migrations());

// What an existing file holds, read without writing anything.
struct FileIdentity {
  std::int32_t application_id = 0;
  int user_version = 0;
  std::vector<std::string> tables;  // names in sqlite_master
};
FileIdentity identify(sqlite::Database& db);

// Refuses files that are not cotune stores, or were written by a newer schema (StoreError).
// An empty database (a new or zero-length file) is accepted.
void check_identity(const FileIdentity& id, const std::string& path, int latest);

// Brings the file to the last step's version in one BEGIN IMMEDIATE transaction (so concurrent
// openers migrate once). Returns the version it found.
int migrate(sqlite::Database& db, const std::vector<Migration>& steps = migrations());

}  // namespace cotune::core::schema

#endif  // COTUNE_STORE_SCHEMA_HPP_
