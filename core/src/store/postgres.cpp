#include "store/postgres.hpp"

#include <cotune/core/store/store_location.hpp>
#include <libpq-fe.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace cotune::core::postgres {
namespace {

// Type Oids of the parameters we send (pg_type.dat).
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kTextOid = 25;
constexpr Oid kFloat8Oid = 701;

// SQLSTATEs after which the whole transaction may succeed when run again.
bool retryable(std::string_view state) {
  return state == "40001" /* serialization_failure */ || state == "40P01" /* deadlock_detected */ ||
         state == "55P03" /* lock_not_available: lock_timeout */;
}

std::string trimmed(const char* message) {
  std::string s = message ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Replaces every occurrence of `secret` in `text` (libpq's messages name no password, but a server's
// might echo one back).
std::string without(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3))
    text.replace(at, secret.size(), "***");
  return text;
}

void ignore_notice(void*, const char*) {}

}  // namespace

std::string translate_parameters(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 8);
  int next = 1;
  bool quoted = false;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '\'') quoted = !quoted;  // '' inside a literal toggles twice: still quoted
    if (c != '?' || quoted) {
      out += c;
      continue;
    }
    size_t digits = i + 1;
    while (digits < sql.size() && sql[digits] >= '0' && sql[digits] <= '9') ++digits;
    out += '$';
    if (digits == i + 1) out += std::to_string(next++);
    else out += sql.substr(i + 1, digits - i - 1);
    i = digits - 1;
  }
  return out;
}

// ---------------------------------------------------------------- Statement

Statement::Statement(Connection& connection, std::string_view sql)
    : connection_(connection), sql_(translate_parameters(sql)) {}

Statement::~Statement() { PQclear(result_); }

Statement::Parameter& Statement::parameter(int index) {
  if (index < 1) throw std::logic_error("SQL parameters are numbered from 1");
  if (parameters_.size() < static_cast<size_t>(index)) parameters_.resize(static_cast<size_t>(index));
  Parameter& p = parameters_[static_cast<size_t>(index - 1)];
  p.null = false;
  p.binary = false;
  return p;
}

void Statement::bind(int index, std::int64_t value) {
  Parameter& p = parameter(index);
  p.value = std::to_string(value);
  p.type = kInt8Oid;
}

void Statement::bind(int index, double value) {
  Parameter& p = parameter(index);
  p.type = kFloat8Oid;
  if (std::isnan(value)) p.value = "NaN";
  else if (std::isinf(value)) p.value = value > 0 ? "Infinity" : "-Infinity";
  else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", value);  // round-trips exactly
    p.value = buf;
  }
}

void Statement::bind(int index, std::string_view value) {
  Parameter& p = parameter(index);
  p.value.assign(value.data(), value.size());
  p.type = kTextOid;
}

void Statement::bind_blob(int index, const std::vector<std::uint8_t>& value) {
  Parameter& p = parameter(index);
  p.value.assign(value.begin(), value.end());
  p.type = kByteaOid;
  p.binary = true;
}

void Statement::bind_null(int index) {
  Parameter& p = parameter(index);
  p.value.clear();
  p.type = 0;
  p.null = true;
}

bool Statement::step() {
  if (result_ == nullptr) {
    const size_t n = parameters_.size();
    std::vector<Oid> types(n);
    std::vector<const char*> values(n);
    std::vector<int> lengths(n), formats(n);
    for (size_t i = 0; i < n; ++i) {
      const Parameter& p = parameters_[i];
      types[i] = p.type;
      values[i] = p.null ? nullptr : p.value.c_str();
      lengths[i] = static_cast<int>(p.value.size());
      formats[i] = p.binary ? 1 : 0;
    }
    PGresult* r = PQexecParams(connection_.conn_, sql_.c_str(), static_cast<int>(n), types.data(), values.data(),
                               lengths.data(), formats.data(), 0);
    const ExecStatusType status = PQresultStatus(r);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
      connection_.fail(r, "running: " + sql_.substr(0, 80));
    result_ = r;
    row_ = -1;
    const char* changed = PQcmdTuples(r);
    connection_.changes_ = changed && *changed ? static_cast<int>(std::strtol(changed, nullptr, 10)) : 0;
  }
  ++row_;
  return row_ < PQntuples(result_);
}

void Statement::reset() {
  PQclear(result_);
  result_ = nullptr;
  row_ = -1;
  parameters_.clear();
}

const char* Statement::cell(int column) const { return PQgetvalue(result_, row_, column); }

bool Statement::is_null(int column) const { return PQgetisnull(result_, row_, column) != 0; }

std::int64_t Statement::int64(int column) const {
  const char* s = cell(column);
  std::int64_t value = 0;
  std::from_chars(s, s + std::strlen(s), value);
  return value;
}

double Statement::real(int column) const { return std::strtod(cell(column), nullptr); }

std::string Statement::text(int column) const {
  return std::string(cell(column), static_cast<size_t>(PQgetlength(result_, row_, column)));
}

std::vector<std::uint8_t> Statement::blob(int column) const {
  size_t length = 0;
  unsigned char* bytes = PQunescapeBytea(reinterpret_cast<const unsigned char*>(cell(column)), &length);
  if (bytes == nullptr) throw StoreError("store " + connection_.name() + ": out of memory reading a blob");
  std::vector<std::uint8_t> out(bytes, bytes + length);
  PQfreemem(bytes);
  return out;
}

// ---------------------------------------------------------------- Connection

Connection::Connection(const std::string& url, double lock_timeout_s) : name_(redact_store_location(url)) {
  // The URL comes last so that what it says (connect_timeout=...) wins over these defaults.
  const char* keys[] = {"connect_timeout", "fallback_application_name", "dbname", nullptr};
  const char* values[] = {"10", "cotune", url.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, 1);
  if (conn_ == nullptr) throw StoreError("store " + name_ + ": cannot connect: out of memory");
  if (const char* password = PQpass(conn_)) password_ = password;
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string why = without(trimmed(PQerrorMessage(conn_)), password_);
    PQfinish(conn_);
    conn_ = nullptr;
    throw StoreError("store " + name_ + ": cannot connect: " + why);
  }
  PQsetNoticeProcessor(conn_, ignore_notice, nullptr);
  const long long lock_ms = static_cast<long long>(std::min(lock_timeout_s * 1000.0, 2.0e9));
  const std::string setup =
      "SET lock_timeout = " + std::to_string(std::max(1LL, lock_ms)) + "; SET client_min_messages = warning";
  PQclear(run(setup.c_str()));
}

Connection::~Connection() {
  cache_.clear();
  PQfinish(conn_);
}

void Connection::fail(PGresult* result, std::string_view doing) {
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string code = state ? state : "";
  std::string message = result ? trimmed(PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY)) : std::string();
  if (message.empty()) message = trimmed(PQerrorMessage(conn_));
  PQclear(result);
  if (PQstatus(conn_) == CONNECTION_BAD)
    throw StoreError("store " + name_ + ": lost the connection to the server: " + without(message, password_));
  throw sql::Error("store " + name_ + ": " + without(message, password_) + " (while " + std::string(doing) + ")",
                   retryable(code), code.rfind("23", 0) == 0);
}

PGresult* Connection::run(const char* sql) {
  PGresult* r = PQexec(conn_, sql);
  const ExecStatusType status = PQresultStatus(r);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK)
    fail(r, "running: " + std::string(sql).substr(0, 80));
  return r;
}

void Connection::exec(const char* sql) { PQclear(run(sql)); }

std::string Connection::query_text(const char* sql) {
  PGresult* r = run(sql);
  std::string value = PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  return value;
}

std::int64_t Connection::query_int64(const char* sql) {
  const std::string text = query_text(sql);
  return text.empty() ? 0 : std::strtoll(text.c_str(), nullptr, 10);
}

sql::StatementUse Connection::prepare(const char* sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) it = cache_.emplace(sql, std::make_unique<Statement>(*this, sql)).first;
  return sql::StatementUse(*it->second);
}

void Connection::begin(sql::Access access) {
  exec(access == sql::Access::kWrite ? "BEGIN ISOLATION LEVEL SERIALIZABLE"
                                     : "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");
}

bool Connection::in_transaction() const {
  const PGTransactionStatusType s = PQtransactionStatus(conn_);
  return s == PQTRANS_INTRANS || s == PQTRANS_INERROR || s == PQTRANS_ACTIVE;
}

void Connection::rollback() noexcept { PQclear(PQexec(conn_, "ROLLBACK")); }

}  // namespace cotune::core::postgres
