// `cotune export-history [--space SPACE] [--workload-key K | --all] [--store FILE] [-o FILE]`: writes
// the history of a workload (imported rows and finished trials of its studies) as CSV, in the space's
// table schema, which `cotune import` reads (docs/history.md).
#include <cotune/core/abi/table_schema.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/history/history_io.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/run/study_setup.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <fstream>
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
  po::options_description opts("cotune export-history [--workload-key K | --all] [options]");
  std::string space = kDefaultSpace, key, store_path = default_store_path(), out_path;
  opts.add_options()("help,h", "show this help")("space", po::value(&space), (std::string("the space, one with a table schema (default ") + kDefaultSpace + ")").c_str())(
      "workload-key", po::value(&key), "the workload to export (cotune import prints the keys)")(
      "all", "every workload of the space")("store", po::value(&store_path), kStoreHelp)(
      "output,o", po::value(&out_path), "write to FILE instead of stdout");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(opts).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(e.what());
  }
  if (vm.count("help")) {
    std::cout << opts << "\nThe CSV re-imports with cotune import --space SPACE into this or another store.\n";
    return 0;
  }
  const bool all = vm.count("all") > 0;
  if (all == !key.empty()) throw UserError("give exactly one of --workload-key K and --all");
  Registry registry;
  registry.load_default();
  const TableSchema schema = TableSchema::of(registry, space);

  Store::Options store_options;
  store_options.create = false;
  Store store(store_path, store_options);
  std::vector<std::string> keys;
  if (all) {
    for (const auto& [k, s] : store.workloads())
      if (s == space) keys.push_back(k);
  } else {
    keys.push_back(key);
    // Runs imported from a table carry the key of the workload as its columns spell it (defaults
    // written out, a preset's dimensions); a study of the workload reads them under both, and so
    // does its export.
    for (const StudySummary& s : store.list_studies()) {
      if (s.study.workload_key != key || s.study.space != space) continue;
      for (const std::string& alt : imported_workload_keys(registry, spec_from_store(s.study).workload, space))
        if (std::find(keys.begin(), keys.end(), alt) == keys.end()) keys.push_back(alt);
    }
  }
  std::vector<HistoryRow> rows;
  for (const std::string& k : keys) {
    std::vector<HistoryRow> part = store.export_history(k, space);
    rows.insert(rows.end(), part.begin(), part.end());
  }
  if (!all && rows.empty()) {
    std::string other;  // the key's space, when it is another
    for (const auto& [k, s] : store.workloads())
      if (k == key && s != space) other = s;
    throw UserError("store " + store.path() + ": no history and no finished trials for workload key '" + key + "'" +
                    (other.empty() ? "" : " in the " + space + " space (it is a workload of the " + other +
                                              " space: --space " + other + ")"));
  }

  std::ofstream file;
  if (!out_path.empty()) {
    file.open(out_path, std::ios::binary);
    if (!file) throw UserError("-o " + out_path + ": cannot open the file for writing");
  }
  std::vector<std::string> warnings;
  const size_t written = write_history_csv(out_path.empty() ? std::cout : file, rows, store, schema, &warnings);
  for (const std::string& w : warnings) std::cerr << "warning: " << w << "\n";
  if (!out_path.empty()) {
    file.close();
    if (!file) throw std::runtime_error("-o " + out_path + ": writing failed");
  }
  // With one workload asked for, its other keys are spellings of it (the study's and a table's).
  std::set<std::string> with_rows;
  for (const HistoryRow& r : rows) with_rows.insert(r.workload_key);
  std::cerr << written << " of " << rows.size() << " rows written ("
            << (all ? std::to_string(with_rows.size()) + " workload(s)"
                    : "1 workload" + (with_rows.size() > 1 ? ", its rows under " + std::to_string(with_rows.size()) +
                                                                 " keys: the study's and as imported tables spell it"
                                                           : std::string()))
            << ")\n";
  return written == rows.size() ? 0 : 1;
}

}  // namespace

COTUNE_COMMAND("export-history", "write the history of a workload as CSV (re-importable)", run);

}  // namespace cotune::cli
