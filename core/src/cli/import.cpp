// `cotune import FILE... --space SPACE [--format auto|csv|megatron-log|wandb|sacct] [--map "a=b" ...]
// [--set column=value ...] [--store FILE] [--source NAME]`: loads measured runs of earlier jobs into
// the store as history (docs/history.md).
#include <cotune/core/errors.hpp>
#include <cotune/core/history/csv.hpp>
#include <cotune/core/history/history_io.hpp>
#include <cotune/core/history/table_runs.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/history/run_logs.hpp>
#include <cotune/core/store/store.hpp>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/command.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;
using namespace cotune::core;

// "column=value" from --set; UserError naming the option otherwise.
std::pair<std::string, std::string> parse_setting(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UserError("--set \"" + text + "\": expected COLUMN=VALUE (--set gpu=a100-80gb)");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

// Imports one file; returns whether every run of it became a row (none rejected).
// With --json, `report` receives the file's outcome instead of the summary lines on stdout.
// Where a file's rows are recorded as coming from: its absolute path, with '.', '..' and links
// resolved, so that the file named from another directory (./runs.csv, ../team/runs.csv) is the same
// source and importing it again adds nothing. Stdin ("-") is as given.
// The workload as a person reads it: the table's cells read as doubles, so whole numbers are written
// as integers ("heads": 16, not 16.0).
nlohmann::json readable(nlohmann::json j) {
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.0e15) return static_cast<std::int64_t>(v);
    return j;
  }
  if (j.is_object() || j.is_array())
    for (auto& v : j) v = readable(v);
  return j;
}

std::string source_of(const std::string& file) {
  if (file == "-") return file;
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(file, ec), ec);
  return ec ? file : p.string();
}

bool import_file(const std::string& file, const std::string& format_option, const std::string& source_option,
                 const std::vector<std::pair<std::string, std::string>>& mapping,
                 const std::map<std::string, std::string>& settings, const Registry& registry,
                 const TableSchema& schema, Store& store, nlohmann::json* report) {
  RunsFormat format = RunsFormat::kCsv;
  if (format_option.empty() || format_option == "auto") {
    format = detect_runs_format(file);
  } else if (auto f = runs_format_named(format_option)) {
    format = *f;
  } else {
    throw UserError("--format '" + format_option + "': expected auto, csv, megatron-log, wandb or sacct");
  }
  const ConvertedRuns converted =
      read_runs_file(file, format, settings, [&](const std::string& c) { return schema.reads(c); });
  for (const std::string& n : converted.notes) std::cerr << file << ": note: " << n << "\n";
  for (const SkippedRun& k : converted.skipped) std::cerr << file << ": line " << k.line << ": skipped: " << k.reason << "\n";
  refuse_simulated_runs(converted.table);
  const TableRuns runs = read_table_runs(converted.table, mapping, registry, schema);
  if (!runs.misspelt_schema_columns.empty()) {
    std::string list;
    for (const std::string& c : runs.misspelt_schema_columns) list += (list.empty() ? "" : ", ") + c;
    throw UserError(file + ": column " + list + " is not read: every run would be stored with that parameter at " +
                    "its default, and runs that differ in it as one configuration; rename the column, or --map it to " +
                    "a name of its own to keep it as a metric (nothing of this file was imported)");
  }
  for (const std::string& w : runs.warnings) std::cerr << "warning: " << w << "\n";
  for (const std::string& n : runs.notes) std::cerr << "note: " << n << "\n";
  for (const RejectionGroup& g : rejection_groups(runs.rejected))
    std::cerr << file << ": " << g.where << ": rejected: " << g.reason << "\n";
  size_t memory_notes = 0;
  std::set<std::string> workloads;
  std::map<std::string, nlohmann::json> workload_of;  // key -> the workload as the rows read
  for (const TableRun& r : runs.runs) {
    // A run that ran out of memory agrees with the estimate: only runs that fit where the model
    // says they do not are worth a note.
    memory_notes += r.memory_note.empty() || r.status == TrialStatus::kOom ? 0 : 1;
    workloads.insert(r.workload_key);
    workload_of.emplace(r.workload_key, r.workload);
  }
  if (memory_notes > 0)
    std::cerr << "note: " << memory_notes
              << " imported rows ran where the memory estimate says they do not fit; kept as measured\n";
  // Rows export-history wrote from a study's trials ("study:NAME", the trial's number) count as in the
  // store where it holds that study (Store::import_history).
  std::vector<HistoryRow> rows =
      history_rows(runs.runs, source_option.empty() ? source_of(file) : source_option, schema.info().name);
  ImportCounts counts = store.import_history(rows);
  if (report != nullptr) {
    nlohmann::json rejected = nlohmann::json::array(), skipped = nlohmann::json::array();
    // Every note and warning the text prints (the columns kept as metrics or ignored among them).
    nlohmann::json notes = converted.notes;
    for (const std::string& n : runs.notes) notes.push_back(n);
    for (const std::string& w : runs.warnings) notes.push_back("warning: " + w);
    for (const RejectedRow& r : runs.rejected) rejected.push_back({{"line", r.line}, {"reason", r.reason}});
    for (const SkippedRun& k : converted.skipped) skipped.push_back({{"line", k.line}, {"reason", k.reason}});
    *report = {{"file", file},
               {"format", runs_format_name(format)},
               {"runs", converted.table.rows.size() + converted.skipped.size()},
               {"imported", counts.inserted},
               {"already_in_store", counts.duplicates},
               {"rejected", rejected},
               {"skipped", skipped},
               {"notes", notes},
               {"workload_keys", workloads}};
    return runs.rejected.empty();
  }
  if (format == RunsFormat::kCsv)
    std::cout << file << ": " << converted.table.rows.size() << " rows: ";
  else
    std::cout << file << " (" << runs_format_name(format) << "): "
              << converted.table.rows.size() + converted.skipped.size() << " runs: ";
  std::cout << counts.inserted << " imported, " << counts.duplicates << " already in the store, " << runs.rejected.size()
            << " rejected";
  if (format != RunsFormat::kCsv) std::cout << ", " << converted.skipped.size() << " skipped";
  std::cout << "; " << workloads.size() << " workload(s); store " << store.path() << "\n";
  // The workload as the rows read: a study seeded by these runs states it so (a preset named in the
  // study file is another workload than the dimensions a table gives; docs/history.md).
  for (const std::string& key : workloads)
    std::cout << "  workload key " << key << ": " << readable(workload_of[key]).dump() << "\n";
  return runs.rejected.empty();
}

int run(int argc, char** argv) {
  po::options_description opts("cotune import FILE... --space SPACE [options]");
  std::string space, store_path = default_store_path(), source, format = "auto";
  std::vector<std::string> files, maps, sets;
  opts.add_options()("help,h", "show this help")("space", po::value(&space), "the space of the runs (llm; any space with a table schema)")(
      "format", po::value(&format),
      "auto (the default: from each file's content), csv, megatron-log, wandb or sacct")(
      "map", po::value(&maps)->composing(), "\"source column=canonical name\" (repeatable)")(
      "set", po::value(&sets)->composing(),
      "COLUMN=VALUE for every run that does not say it, e.g. --set gpu=a100-80gb (repeatable)")(
      "store", po::value(&store_path), kStoreHelp)(
      "source", po::value(&source), "the name the rows are recorded under (default: each file's path)")(
      "json", "write one JSON document of each file's outcome instead of the summary lines (schema_version 1, "
              "docs/history.md); the per-line messages still go to stderr");
  po::options_description hidden;
  hidden.add_options()("file", po::value(&files)->composing());
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("file", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(e.what());
  }
  if (vm.count("help")) {
    std::cout << opts
              << "\nEach run becomes a history row of its workload (docs/history.md). Files are read as cotune's\n"
                 "CSV (the space's table schema: the llm space's columns are in docs/simulate.md; metric\n"
                 "columns of docs/history.md), Megatron-LM logs (the\n"
                 "argument dump and the 'elapsed time per iteration (ms)' lines), W&B runs exports (CSV with\n"
                 "config columns and State) or 'sacct -P' output (the configuration as key=value words or JSON\n"
                 "in Comment or JobName). Bad rows are reported with their line and skipped, as are runs that\n"
                 "are no measurement (still running, killed); the others are imported in one transaction per\n"
                 "file. Importing the same file again adds nothing.\n"
                 "Exit status: 0 every run imported or skipped with a reason, 1 some rows rejected, 2 bad usage.\n";
    return 0;
  }
  if (files.empty())
    throw UserError("usage: cotune import FILE... --space SPACE [--format F] [--map \"a=b\"] [--set col=value] [--store FILE]");
  if (!vm.count("space")) throw UserError("--space: required (the space of the runs, e.g. llm)");
  if (!source.empty() && files.size() > 1) throw UserError("--source names the rows of one file: give one file with it");
  std::vector<std::pair<std::string, std::string>> mapping;
  for (const std::string& m : maps) mapping.push_back(parse_column_mapping(m));
  std::map<std::string, std::string> settings;
  for (const std::string& x : sets) settings.insert(parse_setting(x));

  // Every file is checked before any is imported: a missing second file must not leave the first
  // imported behind an error.
  for (const std::string& file : files) {
    if (file == "-") continue;  // standard input (with --format csv)
    std::error_code ec;
    const auto type = std::filesystem::status(file, ec).type();
    if (ec || type == std::filesystem::file_type::not_found) throw UserError(file + ": no such file (nothing imported)");
    if (type != std::filesystem::file_type::regular)
      throw UserError(file + ": not a regular file (nothing imported)");
    // simulate's own output is refused before the store is opened (or made). A first line that is
    // not CSV (a log) is the format reader's to judge, below.
    std::ifstream in(file, std::ios::binary);
    CsvRecord first;
    bool read = false;
    try {
      CsvReader header(in, file);
      read = header.next(first);
    } catch (const std::exception&) {
    }
    if (read) refuse_simulated_runs(CsvTable{file, first.fields, {}});
  }
  Registry registry;
  registry.load_default();
  const TableSchema schema = TableSchema::of(registry, space);
  Store store(store_path);
  bool all_in = true;
  const bool as_json = vm.count("json") > 0;
  nlohmann::json reports = nlohmann::json::array();
  for (const std::string& file : files) {
    nlohmann::json report;
    all_in = import_file(file, format, source, mapping, settings, registry, schema, store, as_json ? &report : nullptr) &&
             all_in;
    if (as_json) reports.push_back(std::move(report));
  }
  if (as_json)
    std::cout << nlohmann::json{{"schema_version", 1}, {"store", store.path()}, {"files", reports}}.dump(2) << "\n";
  return all_in ? 0 : 1;
}

}  // namespace

COTUNE_COMMAND("import", "import measured runs of earlier jobs (CSV) into the store as history", run);

}  // namespace cotune::cli
