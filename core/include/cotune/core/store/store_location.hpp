// Where a store lives, as given to --store or COTUNE_STORE: the path of an SQLite file, or the URL of
// a PostgreSQL database (postgresql://user@host:port/dbname?sslmode=require, or postgres://...).
#ifndef COTUNE_CORE_STORE_STORE_LOCATION_HPP_
#define COTUNE_CORE_STORE_STORE_LOCATION_HPP_

#include <string>
#include <string_view>

namespace cotune::core {

// True for a postgresql:// or postgres:// URL (the scheme in any case); anything else is a file path.
bool is_postgres_url(std::string_view location);

// A PostgreSQL URL as libpq reads it: the scheme in lower case.
std::string connection_url(std::string_view location);

// Why a location is neither a PostgreSQL URL nor meant as a file path, or "" when it is fine: another
// scheme ("postgressql://..."), or a mistyped PostgreSQL URL ("postgres:db", "postgresql:/h/db") that
// names no existing file. Opening a store refuses these instead of creating an SQLite file of that
// name. The message shows the location redacted.
std::string check_store_location(std::string_view location);

// The location as it may be printed: a URL's password (`user:PASSWORD@host`, `?password=PASSWORD`),
// of any scheme, replaced by "***"; a file path unchanged. Every message, log line and report that names a store
// uses this (Store::path() is already redacted).
std::string redact_store_location(std::string_view location);

// Where the files that go with a store's studies (trial logs under cotune-runs/, reports under
// cotune-reports/) are written: the directory of a store file, or the working directory for a
// database on a server. Absolute.
std::string store_files_directory(const std::string& location);

// The location as it is printed for the user to pass again: an absolute, normalised file path, or
// the redacted URL.
std::string store_location_for_display(const std::string& location);

// The location as a command printed for the user to run may name it: an absolute file path, or the
// URL without its password (a "***" pasted back would be sent as the password). Sets
// *password_left_out when one was dropped: the command then needs PGPASSWORD, a password file or
// COTUNE_STORE.
std::string store_location_for_command(const std::string& location, bool* password_left_out = nullptr);

}  // namespace cotune::core

#endif  // COTUNE_CORE_STORE_STORE_LOCATION_HPP_
