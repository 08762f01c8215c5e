// `cotune plugins [--path DIR]... [--json]` lists every component found (and every library refused,
// with why); `cotune plugins check LIB` loads one library and exercises each component's
// create/destroy and self-description.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/abi/table_schema.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/studyfile/json_document.hpp>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/probe_search.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;
using namespace cotune::core;

std::string abi(const ComponentInfo& i) { return std::to_string(i.abi_major) + "." + std::to_string(i.abi_minor); }

void list(const Registry& reg) {
  std::printf("%-10s %-34s %-12s %-8s %-5s %s\n", "KIND", "ID", "NAME", "VERSION", "ABI", "FILE");
  for (const ComponentRef& c : reg.components())
    std::printf("%-10s %-34s %-12s %-8s %-5s %s\n", kind_name(c.info.kind), c.info.id.c_str(), c.info.name.c_str(),
                c.info.version.c_str(), abi(c.info).c_str(), c.info.file.c_str());
  for (const LoadProblem& p : reg.problems()) std::fprintf(stderr, "refused %s: %s\n", p.file.c_str(), p.reason.c_str());
}

// The listing as one JSON document (schema_version 1): {"components": [{kind, id, name, version,
// abi, file, description}], "refused": [{file, reason}]}.
void list_json(const Registry& reg) {
  nlohmann::json components = nlohmann::json::array(), refused = nlohmann::json::array();
  for (const ComponentRef& c : reg.components())
    components.push_back({{"kind", kind_name(c.info.kind)},
                          {"id", c.info.id},
                          {"name", c.info.name},
                          {"version", c.info.version},
                          {"abi", abi(c.info)},
                          {"file", c.info.file},
                          {"description", c.info.description}});
  for (const LoadProblem& p : reg.problems()) refused.push_back({{"file", p.file}, {"reason", p.reason}});
  std::cout << nlohmann::json{{"schema_version", 1}, {"components", components}, {"refused", refused}}.dump(2) << "\n";
}

// A minimal, valid workload for exercising a space's create(): spaces may refuse it, which is
// reported but is not a failure of the library.
const char* kProbeWorkload = "{}";

// A space created for a real workload: what searchers and the host rely on, on a sample of its
// configurations. Every sampled configuration is valid (check and explain agree), its JSON
// rendering reads back to itself, and it lowers to a step trace when the space lowers. Returns the
// failures, each printed.
int exercise_space(const Space& space) {
  constexpr size_t kSampled = 64;
  const size_t p = space.num_params();
  std::vector<double> configs(kSampled * p);
  const size_t n = space.sample(1, kSampled, configs.data());
  std::printf("  with the workload: %zu parameters, sample(64) gave %zu configurations\n", p, n);
  int failures = 0;
  auto fail = [&](size_t i, const std::string& what) {
    if (failures++ < 5) std::printf("  FAILED: sampled configuration %zu %s: %s\n", i + 1, space.key(&configs[i * p]).c_str(), what.c_str());
  };
  std::vector<int32_t> valid(n);
  if (n > 0) space.check(configs.data(), n, valid.data());
  size_t lowered = 0;
  for (size_t i = 0; i < n; ++i) {
    const double* c = &configs[i * p];
    try {
      const std::string why = space.explain(c);
      if (!valid[i] || !why.empty()) {
        fail(i, "sample() gave a configuration that check() or explain() refuses" + (why.empty() ? "" : " (" + why + ")"));
        continue;
      }
      const std::string rendered = space.render(c, COTUNE_RENDER_JSON);
      const std::vector<double> back = space.parse(rendered);
      if (space.key(back.data()) != space.key(c)) {  // the key formats values: a float's last digits aside
        fail(i, "its JSON rendering " + rendered + " reads back as another configuration");
        continue;
      }
      if (space.can_lower()) {
        (void)space.lower(c);
        ++lowered;
      }
    } catch (const std::exception& e) {
      fail(i, e.what());
    }
  }
  if (failures > 5) std::printf("  ... and %d more\n", failures - 5);
  if (failures == 0)
    std::printf("  every sampled configuration is valid and reads back from its JSON%s\n",
                space.can_lower() ? (", and lowered to a step trace (" + std::to_string(lowered) + ")").c_str() : "");
  return failures;
}

// Creates and destroys one instance of each component; returns the number of failures.
// `options`: the JSON options to create predictors and executors with (check --options); without
// them, an error object from create is taken as "options needed". `workload`: a workload to create
// spaces with and exercise them on (check --workload).
// `submit_timeout_s` > 0 (check --submit): each executor also runs one trial (exercise_executor).
int exercise(const Registry& reg, const std::optional<std::string>& options, const std::optional<std::string>& workload,
             double submit_timeout_s) {
  int failures = 0;
  for (const ComponentRef& c : reg.components()) {
    std::printf("%s %s (%s %s, ABI %s)\n", kind_name(c.info.kind), c.info.id.c_str(), c.info.name.c_str(),
                c.info.version.c_str(), abi(c.info).c_str());
    try {
      switch (c.info.kind) {
        case COTUNE_KIND_SPACE:
          if (workload) {
            try {
              Space s(c, *workload, options.value_or("{}"));
              failures += exercise_space(s);
            } catch (const PluginError& e) {
              std::printf("  FAILED: create refused the workload%s: %s\n", options ? " or the options" : "", e.what());
              ++failures;
            }
          } else try {
            Space s(c, kProbeWorkload, "{}");
            std::printf("  create/destroy ok: %zu parameters, %zu features\n", s.num_params(), s.feature_names().size());
          } catch (const PluginError& e) {
            // A space needs a real workload; a clean error object is the correct answer to "{}".
            std::printf("  create answered an error object (as expected without a workload): %s\n", e.what());
          }
          if (auto schema = TableSchema::find(reg, c.info.id)) {
            // A table schema (ABI 1.4): its description, and a clean refusal of a row without cells.
            std::printf("  table schema: %zu columns, %zu of them the configuration's\n", schema->columns().size(),
                        schema->config_columns().size());
            try {
              schema->read({});
              std::printf("  table_read of an empty row gave a run (no column is required)\n");
            } catch (const std::invalid_argument& e) {
              std::printf("  table_read of an empty row answered an error object: %s\n", e.what());
            }
          }
          break;
        case COTUNE_KIND_PREDICTOR: {
          Predictor p(c, options.value_or("{}"));
          std::printf("  create/destroy ok%s\n", p.can_save() ? ", saves state" : "");
          break;
        }
        case COTUNE_KIND_EXECUTOR: {
          Executor ex(c, options.value_or("{}"));
          std::printf("  create/destroy ok, capacity %d\n", ex.capacity());
          if (submit_timeout_s > 0) {
            try {
              std::printf("  %s\n", exercise_executor(ex, submit_timeout_s).c_str());
            } catch (const UserError& bad) {
              std::printf("  FAILED: %s\n", bad.what());
              ++failures;
            }
          }
          break;
        }
        case COTUNE_KIND_SEARCHER:
          try {
            std::printf("  %s\n", exercise_searcher(c).c_str());
          } catch (const UserError& e) {
            std::printf("  FAILED: %s\n", e.what());
            ++failures;
          }
          break;
      }
    } catch (const std::exception& e) {
      // Executors and predictors may need options; an error object is still a usable answer.
      const auto* pe = dynamic_cast<const PluginError*>(&e);
      if (pe != nullptr && pe->code() == COTUNE_ERR_INVALID_ARGUMENT && !options) {
        std::printf("  create answered an error object (options needed): %s\n", e.what());
      } else {
        std::printf("  FAILED: %s\n", e.what());
        ++failures;
      }
    }
  }
  return failures;
}

int run(int argc, char** argv) {
  po::options_description opts("cotune plugins [check LIB] [options]");
  std::vector<std::string> paths, positional;
  opts.add_options()("help,h", "show this help")(
      "path", po::value(&paths), "also search this directory (repeatable)")(
      "json", "the listing as one JSON document: components and refused libraries")(
      "options", po::value<std::string>(), "with check: JSON options to create its components with "
      "(a refusal then fails the check)")(
      "workload", po::value<std::string>(), "with check: a workload JSON file to create its spaces with; each is then "
      "exercised on 64 sampled configurations (valid, read back from their JSON, lowered)")(
      "submit", "with check: each executor also runs one trial of a built-in space to its end, and its answer is "
      "checked (a status the ABI defines, metrics a JSON object)")(
      "submit-timeout", po::value<double>()->default_value(60), "with --submit: seconds the trial may take before it "
      "is cancelled and the check fails");
  po::options_description hidden;
  hidden.add_options()("args", po::value(&positional));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("args", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UserError(e.what());
  }
  if (vm.count("help")) {
    std::cout << opts << "\nWithout arguments: list every component on the search path (the plugin\n"
                         "directory of this installation, then COTUNE_PLUGIN_PATH).\n"
                         "check LIB: load one library and exercise each component; exit 1 when unusable.\n";
    return 0;
  }
  Registry reg;
  if (!positional.empty()) {
    if (positional[0] != "check" || positional.size() != 2) throw UserError("usage: cotune plugins check LIB [--options JSON] [--workload W.json] [--submit]");
    if (!reg.load_file(positional[1])) {
      std::fprintf(stderr, "%s: unusable: %s\n", positional[1].c_str(), reg.problems().back().reason.c_str());
      return 1;
    }
    std::optional<std::string> options, workload;
    if (vm.count("options")) options = vm["options"].as<std::string>();
    if (vm.count("workload")) workload = read_json_file(vm["workload"].as<std::string>()).dump();
    const double submit_timeout = vm["submit-timeout"].as<double>();
    if (vm.count("submit") && !(submit_timeout > 0)) throw UserError("--submit-timeout: expected seconds > 0");
    const int failures = exercise(reg, options, workload, vm.count("submit") ? submit_timeout : 0);
    std::printf("%s: %s\n", positional[1].c_str(), failures == 0 ? "ok" : "unusable");
    return failures == 0 ? 0 : 1;
  }
  std::vector<std::string> dirs = Registry::default_search_path();
  dirs.insert(dirs.end(), paths.begin(), paths.end());
  reg.load_directories(dirs);
  if (vm.count("json")) list_json(reg);
  else list(reg);
  return 0;
}

COTUNE_COMMAND("plugins", "list the plugins found, or check one library", run);
}  // namespace
}  // namespace cotune::cli
