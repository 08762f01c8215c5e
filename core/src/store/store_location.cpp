#include <cotune/core/store/store_location.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace cotune::core {
namespace {

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), s.begin(),
                    [](char p, char c) { return p == std::tolower(static_cast<unsigned char>(c)); });
}

// Where a URL's scheme ends ("scheme://"), for any scheme RFC 3986 allows: 0 for no URL.
size_t url_scheme_end(std::string_view location) {
  const size_t sep = location.find("://");
  if (sep == std::string_view::npos || sep == 0 || !std::isalpha(static_cast<unsigned char>(location[0]))) return 0;
  for (size_t i = 1; i < sep; ++i) {
    const char c = location[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return 0;
  }
  return sep + 3;
}

// The PostgreSQL schemes, in any case (RFC 3986: schemes are case-insensitive; libpq wants them in
// lower case, connection_url() gives them so).
size_t postgres_scheme_end(std::string_view location) {
  for (std::string_view scheme : {"postgresql://", "postgres://"})
    if (starts_with_nocase(location, scheme)) return scheme.size();
  return 0;
}

constexpr std::string_view kHidden = "***";

}  // namespace

bool is_postgres_url(std::string_view location) { return postgres_scheme_end(location) != 0; }

std::string connection_url(std::string_view location) {
  std::string out(location);
  const size_t end = postgres_scheme_end(location);
  std::transform(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(end), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string check_store_location(std::string_view location) {
  // " postgresql://..." (a stray space from a copied line) would be a file of that name.
  if (!location.empty() && (std::isspace(static_cast<unsigned char>(location.front())) != 0 ||
                            std::isspace(static_cast<unsigned char>(location.back())) != 0))
    return "store '" + redact_store_location(location) + "': begins or ends with white space; remove it";
  if (is_postgres_url(location)) return "";
  constexpr std::string_view kExpected =
      " (a PostgreSQL database is postgresql://user@host:port/dbname, or postgres://...; anything else is the "
      "path of an SQLite file)";
  if (url_scheme_end(location) != 0)
    return "store " + redact_store_location(location) + ": '" + std::string(location.substr(0, location.find("://"))) +
           "://' is not a store URL" + std::string(kExpected);
  // "postgres:db", "postgresql:/host/db", "postgresq:db": a URL mistyped, not a file name meant.
  std::error_code ec;
  if (location.find(':') != std::string_view::npos && starts_with_nocase(location, "postgres") &&
      !std::filesystem::exists(std::string(location), ec))
    return "store " + std::string(location) + ": looks like a PostgreSQL URL but is not one" + std::string(kExpected);
  return "";
}

namespace {

// The URL with its password replaced by kHidden, or left out (`drop`: user@host, no password=).
std::string without_password(std::string_view location, bool drop) {
  const size_t start = url_scheme_end(location);
  if (start == 0) return std::string(location);
  std::string out(location.substr(0, start));
  // The user information ends at an '@'; its password follows the first ':'. libpq takes the first
  // '@' before any '/', but a password typed with a raw '@' or '/' would then show in part: the
  // last '@' before the query hides all that libpq could take for a password, and more.
  const size_t query_start = location.find('?', start);
  const size_t at = location.rfind('@', query_start == std::string_view::npos ? std::string_view::npos : query_start);
  size_t rest = start;
  if (at != std::string_view::npos && at >= start) {
    std::string_view user_info = location.substr(start, at - start);
    size_t colon = user_info.find(':');
    out += user_info.substr(0, colon);
    if (colon != std::string_view::npos && !drop) out += ":" + std::string(kHidden);
    out += '@';
    rest = at + 1;
  }
  // Query parameters: password=... (any case of the key).
  const size_t query = location.find('?', rest);
  out += location.substr(rest, query == std::string_view::npos ? std::string_view::npos : query - rest);
  if (query == std::string_view::npos) return out;
  std::string_view params = location.substr(query + 1);
  std::string kept;
  while (true) {
    const size_t amp = params.find('&');
    std::string_view param = params.substr(0, amp);
    const bool password = starts_with_nocase(param, "password=");
    if (!(password && drop)) {
      kept += kept.empty() ? "" : "&";
      kept += password ? std::string(param.substr(0, 9)) + std::string(kHidden) : std::string(param);
    }
    if (amp == std::string_view::npos) break;
    params.remove_prefix(amp + 1);
  }
  if (!kept.empty() || !drop) out += "?" + kept;
  return out;
}

}  // namespace

std::string redact_store_location(std::string_view location) {
  // Any URL, a mistyped scheme's too: a password in it is hidden wherever it is printed.
  return without_password(location, false);
}

std::string store_location_for_command(const std::string& location, bool* password_left_out) {
  if (password_left_out != nullptr) *password_left_out = false;
  if (!is_postgres_url(location)) return store_location_for_display(location);
  std::string bare = without_password(location, true);
  if (password_left_out != nullptr) *password_left_out = bare != location;
  return bare;
}

std::string store_files_directory(const std::string& location) {
  namespace fs = std::filesystem;
  if (is_postgres_url(location)) return fs::current_path().string();
  return fs::absolute(location).parent_path().lexically_normal().string();
}

std::string store_location_for_display(const std::string& location) {
  if (is_postgres_url(location)) return redact_store_location(location);
  return std::filesystem::absolute(location).lexically_normal().string();
}

}  // namespace cotune::core
