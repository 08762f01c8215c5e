// `cotune export STUDY --format megatron|torchtitan|json [--store FILE]`: prints the best
// configuration of a study rendered for a framework (by the first objective in a Pareto study).
#include <cotune/core/errors.hpp>
#include <cotune/core/store.hpp>
#include <cotune/core/study_report.hpp>
#include <cotune/core/study_setup.hpp>

#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "cli/command.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;
using namespace cotune::core;

int32_t format_code(const std::string& word) {
  if (word == "json") return COTUNE_RENDER_JSON;
  if (word == "megatron") return COTUNE_RENDER_MEGATRON;
  if (word == "torchtitan") return COTUNE_RENDER_TORCHTITAN;
  throw UserError("--format: expected megatron, torchtitan or json, got '" + word + "'");
}

int run(int argc, char** argv) {
  po::options_description opts("cotune export STUDY --format megatron|torchtitan|json [options]");
  std::string name, format = "json", store_path = kDefaultStorePath;
  opts.add_options()("help,h", "show this help")("format", po::value(&format),
                                                  "megatron, torchtitan or json (default json)")(
      "store", po::value(&store_path), "the study store (default: ./cotune.db)");
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
    std::cout << opts << "\nPrints the best measured feasible configuration of STUDY in the launch format.\n";
    return 0;
  }
  if (name.empty()) throw UserError("usage: cotune export STUDY --format megatron|torchtitan|json [--store FILE]");
  const int32_t code = format_code(format);

  Store::Options store_options;
  store_options.create = false;
  Store store(store_path, store_options);
  std::optional<StudyRecord> study = store.find_study(name);
  if (!study) throw UserError("store " + store.path() + ": no study named '" + name + "' (cotune show lists them)");
  StudySpec spec = spec_from_store(*study);
  std::vector<RankedTrial> best = best_trials(store.trials(study->id), spec.objectives, 1);
  if (best.empty()) {
    std::fprintf(stderr, "cotune export: study '%s' has no feasible measured configuration yet\n", name.c_str());
    return 1;
  }
  Registry registry;
  load_study_plugins(registry, spec);
  std::unique_ptr<Space> space = make_study_space(registry, spec);
  std::string text = render_stored_config(*space, best.front().trial.config_json, code);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (text.empty() || text.back() != '\n') std::fputc('\n', stdout);
  return 0;
}

COTUNE_COMMAND("export", "print a study's best configuration for a framework", run);
}  // namespace
}  // namespace cotune::cli
