// RFC 4180 CSV: quoted fields (with "" for a quote, and line breaks inside quotes), CRLF or LF
// line ends, a header row. Records carry the line they start on so that messages can name it.
#ifndef COTUNE_CORE_HISTORY_CSV_HPP_
#define COTUNE_CORE_HISTORY_CSV_HPP_

#include <cstddef>
#include <istream>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace cotune::core {

struct CsvRecord {
  size_t line = 0;  // 1-based line of the file on which the record starts
  std::vector<std::string> fields;
};

// Reads records one at a time. A quote left open at the end of the input is a UserError naming
// `source` and the line where the field began.
class CsvReader {
 public:
  CsvReader(std::istream& in, std::string source) : in_(in), source_(std::move(source)) {}
  // False at the end of the input.
  bool next(CsvRecord& out);
  const std::string& source() const { return source_; }

 private:
  std::istream& in_;
  std::string source_;
  size_t line_ = 1;
};

// A whole CSV file: the header and its data records (blank lines dropped). Throws UserError for an
// empty input, a duplicated header name, or a record whose field count differs from the header's.
struct CsvTable {
  std::string source;
  std::vector<std::string> header;
  std::vector<CsvRecord> rows;

  // Column index by name; -1 when absent.
  long column(const std::string& name) const;
};
CsvTable read_csv_table(std::istream& in, const std::string& source);
// Reads a file ("-" for stdin); UserError when it cannot be opened.
CsvTable read_csv_file(const std::string& path);

// One field quoted as RFC 4180 requires (only when it holds a comma, quote or line break).
std::string csv_quote(const std::string& field);
// One record, fields quoted as needed, ending with "\n".
void write_csv_record(std::ostream& out, const std::vector<std::string>& fields);

}  // namespace cotune::core

#endif  // COTUNE_CORE_HISTORY_CSV_HPP_
