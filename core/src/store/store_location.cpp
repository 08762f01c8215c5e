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

// The schemes as libpq reads them (case-sensitive, like its own check).
size_t scheme_end(std::string_view location) {
  for (std::string_view scheme : {"postgresql://", "postgres://"})
    if (location.substr(0, scheme.size()) == scheme) return scheme.size();
  return 0;
}

constexpr std::string_view kHidden = "***";

}  // namespace

bool is_postgres_url(std::string_view location) { return scheme_end(location) != 0; }

std::string redact_store_location(std::string_view location) {
  const size_t start = scheme_end(location);
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
    if (colon != std::string_view::npos) out += ":" + std::string(kHidden);
    out += '@';
    rest = at + 1;
  }
  // Query parameters: password=... (any case of the key).
  const size_t query = location.find('?', rest);
  out += location.substr(rest, query == std::string_view::npos ? std::string_view::npos : query - rest);
  if (query == std::string_view::npos) return out;
  out += '?';
  std::string_view params = location.substr(query + 1);
  bool first = true;
  while (true) {
    const size_t amp = params.find('&');
    std::string_view param = params.substr(0, amp);
    if (!first) out += '&';
    first = false;
    if (starts_with_nocase(param, "password=")) out += std::string(param.substr(0, 9)) + std::string(kHidden);
    else out += param;
    if (amp == std::string_view::npos) break;
    params.remove_prefix(amp + 1);
  }
  return out;
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
