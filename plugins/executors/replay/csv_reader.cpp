#include "csv_reader.hpp"

#include <cotune/cotune.hpp>

#include <utility>

namespace cotune_replay {

CsvReader::CsvReader(std::istream& in, std::string source, const CsvLimits& limits)
    : in_(in.rdbuf()), source_(std::move(source)), limits_(limits) {}

void CsvReader::fail(size_t line, const std::string& what) const {
  throw cotune::Error(COTUNE_ERR_INVALID_ARGUMENT, source_ + " line " + std::to_string(line) + ": " + what);
}

int CsvReader::get() { return in_ == nullptr ? EOF : in_->sbumpc(); }
int CsvReader::peek() { return in_ == nullptr ? EOF : in_->sgetc(); }

void CsvReader::end_of_line(int c) {
  if (c == '\r' && peek() == '\n') get();
  ++line_;
}

bool CsvReader::next(std::vector<std::string>& fields, size_t* line) {
  fields.clear();
  if (!started_) {
    started_ = true;
    // A UTF-8 byte-order mark (as spreadsheet programs write) is not part of the first column's name.
    if (peek() == 0xEF) {
      get();
      if (get() != 0xBB || get() != 0xBF) fail(1, "starts with a broken UTF-8 byte-order mark");
    }
  }
  // Blank lines between records carry nothing.
  int c = peek();
  while (c == '\r' || c == '\n') {
    end_of_line(get());
    c = peek();
  }
  if (c == EOF) return false;
  const size_t start = line_;
  *line = start;
  size_t record_bytes = 0;
  std::string field;
  auto add = [&](int ch) {
    if (field.size() >= limits_.max_field_bytes)
      fail(start, "field " + std::to_string(fields.size() + 1) + " is longer than " +
                      std::to_string(limits_.max_field_bytes) + " bytes");
    if (++record_bytes > limits_.max_record_bytes)
      fail(start, "the record is longer than " + std::to_string(limits_.max_record_bytes) + " bytes");
    field.push_back(static_cast<char>(ch));
  };
  for (;;) {
    // One field, then its delimiter.
    field.clear();
    c = get();
    if (c == '"') {
      for (;;) {
        c = get();
        if (c == EOF)
          fail(start, "field " + std::to_string(fields.size() + 1) + ": the quote that opens it is never closed");
        if (c == '"') {
          if (peek() != '"') break;
          get();
        } else if (c == '\n' || (c == '\r' && peek() != '\n')) {
          ++line_;
        }
        add(c);
      }
      c = get();
      if (c != ',' && c != '\r' && c != '\n' && c != EOF)
        fail(start, "field " + std::to_string(fields.size() + 1) +
                        ": text after its closing quote (a quote inside a field is written \"\")");
    } else {
      while (c != ',' && c != '\r' && c != '\n' && c != EOF) {
        if (c == '"')
          fail(start, "field " + std::to_string(fields.size() + 1) +
                          ": a quote inside an unquoted field (quote the whole field and double the quote)");
        add(c);
        c = get();
      }
    }
    if (fields.size() >= limits_.max_fields)
      fail(start, "more than " + std::to_string(limits_.max_fields) + " fields");
    fields.push_back(std::move(field));
    if (c == ',') continue;
    if (c != EOF) end_of_line(c);
    return true;
  }
}

}  // namespace cotune_replay
