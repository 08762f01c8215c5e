// Fuzz target: the CSV importer behind `cotune import` and `cotune predictor eval`: the RFC 4180
// reader, the llm schema row builder, metric conversion and the llm space's check of every row,
// then the history rows the store would receive. An optional first line "#map a=b|c=d" gives
// column mappings (--map). Header problems are UserErrors; a bad row is rejected, never fatal.
#include <cotune/core/history/csv.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/history/history_io.hpp>
#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/registry.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/fuzz_check.hpp"

namespace {

using namespace cotune::core;

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    reg.load_file(COTUNE_PLUGIN_DIR "/libcotune-space-llm.so");
    return reg;
  }();
  return r;
}

const TableSchema& schema() {
  static const TableSchema s = TableSchema::of(registry(), "llm");
  return s;
}

// Writing a table and reading it back gives the same table. (A one-column table cannot round-trip
// a record whose only field is empty: the reader drops it as a blank line.)
void check_round_trip(const CsvTable& table) {
  if (table.header.size() < 2) return;
  std::ostringstream out;
  write_csv_record(out, table.header);
  for (const CsvRecord& r : table.rows) write_csv_record(out, r.fields);
  std::istringstream in(out.str());
  const CsvTable back = read_csv_table(in, "round-trip.csv");
  FUZZ_CHECK(back.header == table.header);
  FUZZ_CHECK(back.rows.size() == table.rows.size());
  for (size_t i = 0; i < back.rows.size(); ++i) FUZZ_CHECK(back.rows[i].fields == table.rows[i].fields);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> mapping;
  if (text.rfind("#map ", 0) == 0) {
    const size_t eol = text.find('\n');
    const std::string line = text.substr(5, eol == std::string::npos ? std::string::npos : eol - 5);
    text.erase(0, eol == std::string::npos ? text.size() : eol + 1);
    std::istringstream maps(line);
    std::string one;
    try {
      while (std::getline(maps, one, '|')) mapping.push_back(parse_column_mapping(one));
    } catch (const UserError& e) {
      FUZZ_CHECK(e.what()[0] != '\0');
      return 0;
    }
  }

  std::istringstream in(text);
  CsvTable table;
  try {
    table = read_csv_table(in, "runs.csv");
  } catch (const UserError& e) {
    FUZZ_CHECK(std::string(e.what()).rfind("runs.csv: ", 0) == 0);
    return 0;
  }
  for (const CsvRecord& r : table.rows) FUZZ_CHECK(r.fields.size() == table.header.size() && r.line >= 2);
  check_round_trip(table);

  TableRuns runs;
  try {
    runs = read_table_runs(table, mapping, registry(), schema());
  } catch (const UserError& e) {
    FUZZ_CHECK(e.what()[0] != '\0');
    return 0;
  }
  // Every row is either read or rejected with a reason, once; a row of empty cells is skipped.
  size_t empty = 0;
  for (const CsvRecord& r : table.rows)
    empty += std::all_of(r.fields.begin(), r.fields.end(), [](const std::string& f) { return f.empty(); }) ? 1 : 0;
  FUZZ_CHECK(runs.runs.size() + runs.rejected.size() + empty == table.rows.size());
  for (const RejectedRow& r : runs.rejected) FUZZ_CHECK(r.line >= 2 && !r.reason.empty());
  for (const TableRun& r : runs.runs) {
    FUZZ_CHECK(r.space != nullptr && r.config.size() == r.space->num_params());
    FUZZ_CHECK(!r.workload_key.empty() && !r.config_json.empty());
  }
  const std::vector<HistoryRow> rows = history_rows(runs.runs, "runs.csv", "llm");
  FUZZ_CHECK(rows.size() == runs.runs.size());
  // What the store keeps must read back as JSON objects.
  for (const HistoryRow& h : rows) {
    FUZZ_CHECK(nlohmann::json::parse(h.metrics_json, nullptr, false).is_object());
    FUZZ_CHECK(nlohmann::json::parse(h.config_json, nullptr, false).is_object());
  }
  return 0;
}
