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

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
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

// A space's self-description: names that parse() and render() can tell apart, and defaults inside
// their domains (a parameter absent from a configuration's JSON takes its default).
int check_params(const Space& space) {
  int failures = 0;
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < space.num_params(); ++i) {
    const Param& q = space.params()[i];
    std::string problem;
    if (q.name.empty()) problem = "has no name";
    else if (auto [at, fresh] = seen.emplace(q.name, i); !fresh)
      problem = "has the name of parameter " + std::to_string(at->second + 1) + " ('" + q.name + "')";
    else if (!q.contains(q.default_value))
      problem = "'" + q.name + "' has the default " + q.format(q.default_value) + ", outside its domain";
    if (problem.empty()) continue;
    std::printf("  FAILED: parameter %zu %s\n", i + 1, problem.c_str());
    ++failures;
  }
  return failures;
}

// featurize() on `n` configurations writes exactly n x feature_names() values: a sentinel before the
// call finds a value not written, a guard after the buffer a value written past it. The line is
// printed first, so that a crash inside the call is seen to be there.
int check_featurize(const Space& space, const double* configs, size_t n) {
  const size_t f = space.feature_names().size();
  std::printf("  featurize(%zu configurations) into %zu features: ", n, f);
  std::fflush(stdout);
  constexpr size_t kGuard = 64;
  constexpr double kUnwritten = -7.25e301;
  std::vector<double> out(n * f + kGuard, kUnwritten);
  try {
    space.featurize(configs, n, out.data());
  } catch (const std::exception& e) {
    std::printf("FAILED: featurize answered an error: %s\n", e.what());
    return 1;
  }
  const auto written_end = out.begin() + static_cast<std::ptrdiff_t>(n * f);
  const auto first_unwritten = std::find(out.begin(), written_end, kUnwritten);
  const bool overran = std::any_of(written_end, out.end(), [](double v) { return v != kUnwritten; });
  if (first_unwritten == written_end && !overran) {
    std::printf("ok\n");
    return 0;
  }
  std::printf("FAILED: ");
  if (overran)
    std::printf("it wrote past the %zu values its %zu feature names ask for\n", n * f, f);
  else
    std::printf("value %zu of configuration %zu was not written (%zu feature names, fewer values a row?)\n",
                static_cast<size_t>(first_unwritten - out.begin()) % std::max<size_t>(f, 1) + 1,
                static_cast<size_t>(first_unwritten - out.begin()) / std::max<size_t>(f, 1) + 1, f);
  return 1;
}

// parse() of "{}": every parameter absent, so every one takes its default (cotune.h).
int check_parse_defaults(const Space& space) {
  std::vector<double> defaults;
  for (const Param& q : space.params()) defaults.push_back(q.default_value);
  try {
    const std::vector<double> parsed = space.parse("{}");
    if (space.key(parsed.data()) == space.key(defaults.data())) return 0;  // Space::parse gives every value
    std::printf("  FAILED: parse({}) gave %s, not the defaults %s (parameters absent from the JSON take their "
                "defaults)\n", space.key(parsed.data()).c_str(), space.key(defaults.data()).c_str());
  } catch (const std::exception& e) {
    std::printf("  FAILED: parse({}) refused it: %s (parameters absent from the JSON take their defaults)\n", e.what());
  }
  return 1;
}

// A space created for a real workload: what searchers and the host rely on, on a sample of its
// configurations. Its parameters are well formed; the workload has valid configurations; every
// sampled one is valid (check and explain agree), its JSON rendering reads back to itself, it
// featurizes into as many values as the space names features, and it lowers to a step trace when
// the space lowers. Returns the failures, each printed.
int exercise_space(const Space& space) {
  constexpr size_t kSampled = 64;
  const size_t p = space.num_params();
  int failures = check_params(space);
  std::vector<double> configs(kSampled * p);
  size_t n = 0;
  try {
    n = space.sample(1, kSampled, configs.data());
  } catch (const std::exception& e) {
    std::printf("  FAILED: sample(64) answered an error: %s\n", e.what());
    return failures + 1;
  }
  std::printf("  with the workload: %zu parameters, sample(64) gave %zu configurations\n", p, n);
  if (n == 0) {
    std::printf("  FAILED: sample() gave no configuration: a study of this workload would have nothing to run\n");
    ++failures;
  }
  failures += check_parse_defaults(space);
  int sampled_failures = 0;
  auto fail = [&](size_t i, const std::string& what) {
    if (sampled_failures++ < 5) std::printf("  FAILED: sampled configuration %zu %s: %s\n", i + 1, space.key(&configs[i * p]).c_str(), what.c_str());
  };
  std::vector<int32_t> valid(n);
  try {
    if (n > 0) space.check(configs.data(), n, valid.data());
  } catch (const std::exception& e) {
    std::printf("  FAILED: check() of the sampled configurations answered an error: %s\n", e.what());
    return failures + 1;
  }
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
      std::vector<double> back;
      try {
        back = space.parse(rendered);
      } catch (const std::exception& e) {
        fail(i, "its JSON rendering " + rendered + " does not read back: " + e.what());
        continue;
      }
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
  if (sampled_failures > 5) std::printf("  ... and %d more\n", sampled_failures - 5);
  if (sampled_failures == 0 && n > 0)
    std::printf("  every sampled configuration is valid and reads back from its JSON%s\n",
                space.can_lower() ? (", and lowered to a step trace (" + std::to_string(lowered) + ")").c_str() : "");
  failures += sampled_failures;
  if (n > 0) failures += check_featurize(space, configs.data(), n);
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
          if (!workload && options)
            std::printf("  its --options were not checked: a space is created with them only with --workload\n");
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
          // A C++ member whose signature is not the helper's is not seen (cotune.hpp detects each by
          // its exact signature): what the host found is printed, so a missing one shows.
          const auto yes_no = [](bool b) { return b ? "yes" : "no"; };
          std::printf("  optional entry points: attach %s (a restarted host re-attaches to running jobs), "
                      "candidates %s, metrics %s, check_study %s\n",
                      yes_no(ex.can_attach()), yes_no(ex.has_candidates()), yes_no(ex.has_metrics()),
                      yes_no(ex.has_check_study()));
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
      "exercised: distinct parameter names, defaults in their domains, parse({}) gives the defaults, and 64 sampled "
      "configurations valid, read back from their JSON, featurized into as many values as it names features, lowered")(
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
    // Each line as it is found: a library that crashes the check leaves what was checked before it.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (!reg.load_file(positional[1])) {
      std::fprintf(stderr, "%s: unusable: %s\n", positional[1].c_str(), reg.problems().back().reason.c_str());
      return 1;
    }
    std::optional<std::string> options, workload;
    if (vm.count("options")) {
      options = vm["options"].as<std::string>();
      const nlohmann::json parsed = nlohmann::json::parse(*options, nullptr, false);
      if (!parsed.is_object()) throw UserError("--options: expected a JSON object, got '" + *options + "'");
    }
    if (vm.count("workload")) workload = read_json_file(vm["workload"].as<std::string>()).dump();
    const double submit_timeout = vm["submit-timeout"].as<double>();
    if (vm.count("submit") && !(submit_timeout > 0 && submit_timeout <= 1e6))
      throw UserError("--submit-timeout: expected seconds > 0 and at most 1e6");
    const int failures = exercise(reg, options, workload, vm.count("submit") ? submit_timeout : 0);
    // A plugin directory is searched for libcotune-*.so alone (Registry::load_directories): a
    // library named otherwise loads when named itself, but no search path finds it.
    const std::filesystem::path lib(positional[1]);
    if (lib.filename().string().rfind("libcotune-", 0) != 0 || lib.extension() != ".so")
      std::printf("note: a plugin directory is searched for libcotune-*.so files only: as '%s' it loads when a "
                  "study's plugin_paths names the file itself, not from a directory\n",
                  lib.filename().string().c_str());
    std::printf("%s: %s\n", positional[1].c_str(), failures == 0 ? "ok" : "unusable");
    return failures == 0 ? 0 : 1;
  }
  reg.load_default();
  reg.load_directories(paths);
  for (const std::string& dir : paths) reg.note_missing_directory(dir, "--path");
  if (vm.count("json")) list_json(reg);
  else list(reg);
  return 0;
}

COTUNE_COMMAND("plugins", "list the plugins found, or check one library", run);
}  // namespace
}  // namespace cotune::cli
