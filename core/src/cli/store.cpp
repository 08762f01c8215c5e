// `cotune store copy SRC DST`: copies the studies and history of one store into another (SQLite
// files and PostgreSQL databases, either way), idempotently (store_copy.hpp).
// `cotune store delete STUDY`: removes a study no run is working on, with its trials.
#include <cotune/core/errors.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/store/store_copy.hpp>
#include <cotune/core/store/store_location.hpp>

#include <boost/program_options.hpp>

#include <cstdio>
#include <filesystem>
#include <optional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "run/lease.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;
using namespace cotune::core;

constexpr const char* kUsage = "usage: cotune store copy SRC DST | cotune store delete STUDY [--store PATH]";

int copy(const std::string& from, const std::string& to) {
  Store::Options source_options;
  source_options.create = false;  // a mistyped source is an error, not a new empty store
  Store source(from, source_options);
  // One store on both sides (the same URL, or two names of one file) would count everything as
  // already there: a mistake, said as one.
  std::error_code ec;
  const bool same = is_postgres_url(from) || is_postgres_url(to)
                        ? source.path() == redact_store_location(to)
                        : std::filesystem::exists(to, ec) && std::filesystem::equivalent(from, to, ec);
  if (same) throw UserError("store copy: " + source.path() + " is the destination too; name another store");
  Store destination(to);
  StoreCopyCounts c = copy_store(source, destination);
  std::printf("copied %s -> %s: studies %lld new, %lld brought up to date, %lld already there; %lld trials added, "
              "%lld finished since an earlier copy; history rows %lld new, %lld already there\n",
              source.path().c_str(), destination.path().c_str(), static_cast<long long>(c.studies_created),
              static_cast<long long>(c.studies_updated), static_cast<long long>(c.studies_unchanged),
              static_cast<long long>(c.trials_added), static_cast<long long>(c.trials_updated),
              static_cast<long long>(c.history.inserted), static_cast<long long>(c.history.duplicates));
  return 0;
}

int remove_study(const std::string& name, const std::string& store_path) {
  Store::Options options;
  options.create = false;  // a mistyped store is an error, not a new empty one
  std::unique_ptr<Store> opened;
  try {
    opened = std::make_unique<Store>(store_path, options);
  } catch (const StoreError& e) {
    throw UserError(std::string("--store: ") + e.what());
  }
  Store& store = *opened;
  const std::optional<StudyRecord> study = store.find_study(name);
  if (!study) throw UserError("store " + store.path() + ": no study named '" + name + "' (cotune show lists them)");
  const std::vector<TrialRecord> trials = store.trials(study->id);
  if (const std::optional<StudyLease> holder = store.delete_study(study->id, lease_may_hold))
    throw UserError("study '" + name + "' is being run by pid " + std::to_string(holder->pid) + " on " + holder->host +
                    "; stop that run (Ctrl-C) before deleting it");
  std::printf("deleted study '%s' from %s: %zu trial(s) and its searcher and predictor state\n", name.c_str(),
              store.path().c_str(), trials.size());
  const std::string runs = store_files_directory(store_path) + "/cotune-runs/" + name;
  std::error_code ec;
  if (std::filesystem::exists(runs, ec)) std::printf("its trials' files are left in %s\n", runs.c_str());
  const std::string report = store_files_directory(store_path) + "/cotune-reports/" + name + ".html";
  if (std::filesystem::exists(report, ec)) std::printf("its report is left in %s\n", report.c_str());
  return 0;
}

int run(int argc, char** argv) {
  po::options_description opts("options");
  std::string store_path = default_store_path();
  opts.add_options()("help,h", "show this help")("store", po::value(&store_path),
                                                  kStoreHelp);
  po::options_description hidden;
  std::vector<std::string> words;
  hidden.add_options()("words", po::value(&words));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("words", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(e.what());
  }
  if (vm.count("help")) {
    std::cout << kUsage << "\n\n"
              << "Copies every study (its trials, searcher and predictor state, recommended trial) and all\n"
                 "imported history from the store SRC into the store DST. Each is an SQLite file or a\n"
                 "PostgreSQL URL (postgresql://user@host:port/dbname). Running it again changes nothing;\n"
                 "a study DST already holds gets the trials it lacks, and the results of those it holds in\n"
                 "flight (a study copied while it ran) that have finished since. A study of the same name with a\n"
                 "different study file in DST stops the copy before anything is written. Each study is\n"
                 "copied in one transaction.\n\n"
                 "delete STUDY removes the study, its trials and its saved searcher and predictor state from\n"
                 "the store, in one transaction, unless a run or a worker is working on it. Imported history\n"
                 "is kept, and so are the trials' files (cotune-runs/STUDY) and its report\n"
                 "(cotune-reports/STUDY.html) beside an SQLite store. A study whose trials should no longer\n"
                 "seed later studies of its workload goes this way. A study whose run was killed (kill -9)\n"
                 "can be deleted: nothing will then stop its jobs still running (scancel them).\n\n"
              << opts;
    return 0;
  }
  if (words.empty()) throw UserError(kUsage);
  if (words[0] == "delete") {
    if (words.size() != 2) throw UserError(kUsage);
    return remove_study(words[1], store_path);
  }
  if (words[0] != "copy") throw UserError("unknown action '" + words[0] + "' (" + kUsage + ")");
  if (words.size() != 3) throw UserError(kUsage);
  return copy(words[1], words[2]);
}

}  // namespace

COTUNE_COMMAND("store", "copy studies and history between stores (SQLite, PostgreSQL), or delete a study: store copy SRC DST, store delete STUDY", run);

}  // namespace cotune::cli
