// `cotune report STUDY [-o FILE] [--store FILE]`: writes the study's self-contained HTML report.
#include <cotune/core/errors.hpp>
#include <cotune/core/report/study_html.hpp>
#include <cotune/core/store/store.hpp>

#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "cli/command.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;
using namespace cotune::core;

int run(int argc, char** argv) {
  po::options_description opts("cotune report STUDY [options]");
  std::string name, out_path, store_path = default_store_path();
  opts.add_options()("help,h", "show this help")("output,o", po::value(&out_path),
                                                  "the HTML file to write (default: cotune-reports/<STUDY>.html beside the store, where cotune run writes it)")(
      "store", po::value(&store_path), kStoreHelp);
  po::options_description hidden;
  hidden.add_options()("study", po::value(&name));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("study", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(e.what());
  }
  if (vm.count("help")) {
    std::cout << opts << "\nWrites one self-contained HTML file (inline styles and SVG charts, nothing fetched):\n"
                         "the study, its best configurations, convergence, predicted against measured, the\n"
                         "effect of each parameter, the step-time breakdown and the failed trials.\n";
    return 0;
  }
  if (name.empty()) throw UserError("cotune report: name the study (cotune show lists them)");
  Store::Options store_options;
  store_options.create = false;
  Store store(store_path, store_options);
  if (out_path.empty()) out_path = report::default_report_path(store_path, name);
  report::write_study_report(store, name, out_path);
  std::printf("report written to %s\n", out_path.c_str());
  return 0;
}

COTUNE_COMMAND("report", "write a study's HTML report", run);
}  // namespace
}  // namespace cotune::cli
