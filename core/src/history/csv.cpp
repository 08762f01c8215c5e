#include <cotune/core/history/csv.hpp>
#include <cotune/core/errors.hpp>

#include <fstream>
#include <iostream>

namespace cotune::core {
namespace {
// No run description comes near this; a longer record is a wrong file (binary, one huge line),
// refused after reading this much rather than after reading it all.
constexpr size_t kMaxRecordBytes = 1u << 20;
}  // namespace

bool CsvReader::next(CsvRecord& out) {
  out.fields.clear();
  out.line = line_;
  std::string field;
  bool quoted = false, any = false;
  size_t quote_line = 0;
  char ch;
  size_t bytes = 0;
  while (in_.get(ch)) {
    any = true;
    if (++bytes > kMaxRecordBytes)
      throw UserError(source_ + ": line " + std::to_string(out.line) + ": the record is longer than " +
                      std::to_string(kMaxRecordBytes >> 20) + " MiB (a binary file, or a line without its end?)");
    if (quoted) {
      if (ch == '"') {
        if (in_.peek() == '"') field += static_cast<char>(in_.get());
        else quoted = false;
      } else {
        if (ch == '\n') ++line_;
        field += ch;
      }
    } else if (ch == '"') {
      quoted = true;
      quote_line = line_;
    } else if (ch == ',') {
      out.fields.push_back(std::move(field));
      field.clear();
    } else if (ch == '\n') {
      ++line_;
      break;
    } else if (ch == '\r') {
      // CR LF ends a record, and so does a lone CR (old Mac files): it is never part of a field.
      if (in_.peek() == '\n') in_.get();
      ++line_;
      break;
    } else {
      field += ch;
    }
  }
  if (quoted)
    throw UserError(source_ + ": line " + std::to_string(quote_line) +
                    ": a quoted field is not closed before the end of the file");
  if (!any) return false;
  out.fields.push_back(std::move(field));
  return true;
}

long CsvTable::column(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<long>(i);
  return -1;
}

CsvTable read_csv_table(std::istream& in, const std::string& source) {
  CsvTable t;
  t.source = source;
  CsvReader reader(in, source);
  CsvRecord rec;
  if (!reader.next(rec) || (rec.fields.size() == 1 && rec.fields[0].empty()))
    throw UserError(source + ": empty CSV (expected a header row)");
  t.header = rec.fields;
  // A spreadsheet's UTF-8 byte-order mark is no part of the first column's name.
  if (t.header[0].rfind("\xEF\xBB\xBF", 0) == 0) t.header[0].erase(0, 3);
  for (size_t i = 0; i < t.header.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (t.header[i] == t.header[j])
        throw UserError(source + ": line 1: column '" + t.header[i] + "' appears twice in the header");
  while (reader.next(rec)) {
    if (rec.fields.size() == 1 && rec.fields[0].empty()) continue;  // blank line
    if (rec.fields.size() != t.header.size())
      throw UserError(source + ": line " + std::to_string(rec.line) + ": has " + std::to_string(rec.fields.size()) +
                      " fields, the header " + std::to_string(t.header.size()));
    t.rows.push_back(rec);
  }
  return t;
}

CsvTable read_csv_file(const std::string& path) {
  if (path == "-") return read_csv_table(std::cin, "<stdin>");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open the file for reading");
  return read_csv_table(in, path);
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

void write_csv_record(std::ostream& out, const std::vector<std::string>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) out << (i ? "," : "") << csv_quote(fields[i]);
  out << "\n";
}

}  // namespace cotune::core
