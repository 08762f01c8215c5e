// `cotune import RUNS.csv --space llm [--map "source column=canonical" ...] [--store FILE]
// [--source NAME]`: loads measured runs of earlier jobs into the store as history (docs/history.md).
#include <cotune/core/errors.hpp>
#include <cotune/core/history_io.hpp>
#include <cotune/core/llm_runs.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store.hpp>

#include <boost/program_options.hpp>

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "cli/command.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;
using namespace cotune::core;

int run(int argc, char** argv) {
  po::options_description opts("cotune import RUNS.csv --space llm [options]");
  std::string file, space = "llm", store_path = default_store_path(), source;
  std::vector<std::string> maps;
  opts.add_options()("help,h", "show this help")("space", po::value(&space), "the space of the runs (llm)")(
      "map", po::value(&maps)->composing(), "\"source column=canonical name\" (repeatable)")(
      "store", po::value(&store_path), kStoreHelp)(
      "source", po::value(&source), "the name the rows are recorded under (default: the file path)");
  po::options_description hidden;
  hidden.add_options()("file", po::value(&file));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(e.what());
  }
  if (vm.count("help")) {
    std::cout << opts
              << "\nEach row of RUNS.csv (schema of docs/simulate.md, metric columns of docs/history.md) becomes a\n"
                 "history row of its workload. Bad rows are reported with their line and skipped; the others are\n"
                 "imported in one transaction. Importing the same file again adds nothing.\n"
                 "Exit status: 0 every row imported, 1 some rows rejected, 2 bad usage.\n";
    return 0;
  }
  if (file.empty()) throw UserError("usage: cotune import RUNS.csv --space llm [--map \"a=b\"] [--store FILE]");
  if (!vm.count("space")) throw UserError("--space: required (llm)");
  if (space != "llm")
    throw UserError("--space '" + space + "': only the llm space has a CSV schema for history (docs/simulate.md)");
  std::vector<std::pair<std::string, std::string>> mapping;
  for (const std::string& m : maps) mapping.push_back(parse_column_mapping(m));
  if (source.empty()) source = file;

  Registry registry;
  registry.load_default();
  const CsvTable table = read_csv_file(file);
  const LlmRuns runs = read_llm_runs(table, mapping, registry);
  for (const std::string& w : runs.warnings) std::cerr << "warning: " << w << "\n";
  for (const RejectedRow& r : runs.rejected)
    std::cerr << file << ": line " << r.line << ": rejected: " << r.reason << "\n";
  size_t memory_notes = 0;
  std::set<std::string> workloads;
  for (const LlmRun& r : runs.runs) {
    memory_notes += r.memory_note.empty() ? 0 : 1;
    workloads.insert(r.workload_key);
  }
  if (memory_notes > 0)
    std::cerr << "note: " << memory_notes
              << " imported rows are configurations the memory estimate says do not fit; kept as measured\n";

  Store store(store_path);
  const ImportCounts counts = store.import_history(history_rows(runs.runs, source));
  std::cout << file << ": " << table.rows.size() << " rows: " << counts.inserted << " imported, " << counts.duplicates
            << " already in the store, " << runs.rejected.size() << " rejected; " << workloads.size()
            << " workload(s); store " << store.path() << "\n";
  for (const std::string& key : workloads) std::cout << "  workload key " << key << "\n";
  return runs.rejected.empty() ? 0 : 1;
}

}  // namespace

COTUNE_COMMAND("import", "import measured runs of earlier jobs (CSV) into the store as history", run);

}  // namespace cotune::cli
