// A small RFC 4180 CSV reader: comma-separated fields, records ended by CRLF or LF, fields in double
// quotes may hold commas, line breaks and doubled quotes (""). Blank lines are skipped and a UTF-8
// byte-order mark before the header is dropped. Every error names the source and the line the
// record starts on; fields, records and the number of fields are bounded so that a file that is not
// CSV (or a quote that is never closed) fails with a clear message instead of exhausting memory.
#ifndef COTUNE_EXECUTOR_REPLAY_CSV_READER_HPP_
#define COTUNE_EXECUTOR_REPLAY_CSV_READER_HPP_

#include <cstddef>
#include <istream>
#include <string>
#include <vector>

namespace cotune_replay {

struct CsvLimits {
  size_t max_field_bytes = size_t(1) << 20;    // 1 MiB per field
  size_t max_record_bytes = size_t(16) << 20;  // 16 MiB per record
  size_t max_fields = 10000;                   // per record
};

class CsvReader {
 public:
  // `source` names the input in errors ("runs.csv"). The stream must outlive the reader.
  CsvReader(std::istream& in, std::string source, const CsvLimits& limits = {});

  // Reads the next record into `fields`; false at the end of the input. `*line` (1-based) receives
  // the line the record starts on. Throws cotune::Error(INVALID_ARGUMENT) on malformed input.
  bool next(std::vector<std::string>& fields, size_t* line);

 private:
  [[noreturn]] void fail(size_t line, const std::string& what) const;
  int get();   // the next byte, or EOF
  int peek();  // the next byte without taking it, or EOF
  void end_of_line(int c);  // consumes the LF of a CRLF and counts the line

  std::streambuf* in_;
  std::string source_;
  CsvLimits limits_;
  size_t line_ = 1;
  bool started_ = false;
};

}  // namespace cotune_replay

#endif  // COTUNE_EXECUTOR_REPLAY_CSV_READER_HPP_
