// `cotune export STUDY [--format FRAMEWORK[@VERSION]] [--trial N | --recommended | --best] [--out FILE]`:
// one configuration of a study in the launch format of a framework version (docs/exports.md).
#include <cotune/core/errors.hpp>
#include <cotune/core/io/output_file.hpp>
#include <cotune/core/store/store.hpp>
#include <cotune/core/run/study_report.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <system_error>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "cli/command.hpp"

namespace cotune::cli {
namespace {
namespace po = boost::program_options;
using namespace cotune::core;

const char* const kUsage =
    "cotune export STUDY [--format FRAMEWORK[@VERSION]] [--trial N | --recommended | --best] [--out FILE]\n"
    "                    [--json] [--store PATH]";

// The trial to export and how it was chosen ("trial 12", "recommended trial 12", "best trial 7").
struct Chosen {
  TrialRecord trial;
  std::string how;
};

Chosen choose_trial(Store& store, const StudyRecord& study, const StudySpec& spec, std::int64_t seq,
                    bool recommended, bool best) {
  std::vector<TrialRecord> trials = store.trials(study.id);
  if (seq > 0) {
    for (TrialRecord& t : trials)
      if (t.seq == seq) {
        if (t.status != TrialStatus::kOk)
          std::fprintf(stderr, "cotune export: note: trial %lld ended %s; exporting it all the same\n",
                       static_cast<long long>(seq), std::string(to_string(t.status)).c_str());
        return {std::move(t), "trial " + std::to_string(seq)};
      }
    throw UserError("study '" + study.name + "' has no trial " + std::to_string(seq) + " (cotune show lists them)");
  }
  if (!best && study.recommended_trial_id) {
    for (TrialRecord& t : trials)
      if (t.id == *study.recommended_trial_id) {
        std::string how = "recommended trial " + std::to_string(t.seq);
        return {std::move(t), std::move(how)};
      }
  }
  std::vector<RankedTrial> ranked = best_trials(trials, spec.objectives, 1);
  if (recommended)
    throw UserError("study '" + study.name + "' has no recommended trial yet (" +
                    (spec.pareto() ? std::string("a Pareto study recommends a front, not one trial")
                                   : std::string("it is written when a run ends with a feasible trial")) +
                    (ranked.empty() ? "); no trial is feasible yet either: use --trial N"
                                    : "); use --best or --trial N"));
  if (ranked.empty())
    throw UserError("study '" + study.name + "' has no feasible measured configuration yet (--trial N exports any trial)");
  const std::int64_t s = ranked.front().trial.seq;
  return {ranked.front().trial, "best trial " + std::to_string(s)};
}

// Writes `text` to `path` through a temporary file in the same directory and a rename, so that a
// reader never sees half of it. A symbolic link is written through (the file it names is replaced).
void write_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  if (path.empty()) throw UserError("--out: expected a file name");
  std::error_code ec;
  fs::path target(path);
  if (fs::is_symlink(target, ec)) target = fs::weakly_canonical(target, ec);
  if (fs::is_directory(target, ec)) throw UserError("--out " + path + ": is a directory (expected a file name)");
  if (writes_in_place(path)) {  // a device or a FIFO (/dev/stdout): written into, never replaced
    std::ofstream f(path, std::ios::binary);
    if (!(f << text) || !f.flush())
      throw UserError("--out " + path + ": write failed: " + std::generic_category().message(errno));
    return;
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) throw UserError("--out " + path + ": the directory " + dir.string() + " does not exist");
  const fs::path tmp = dir / (target.filename().string() + ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw UserError("--out " + path + ": cannot write " + tmp.string() + ": " + std::generic_category().message(errno));
    f << text;
    if (!f.flush()) throw UserError("--out " + path + ": write failed: " + std::generic_category().message(errno));
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    throw UserError("--out " + path + ": cannot replace it: " + why);
  }
}

int run(int argc, char** argv) {
  po::options_description opts(kUsage);
  std::string name, format, out_path, store_path = default_store_path();
  std::int64_t seq = 0;
  opts.add_options()("help,h", "show this help")(
      "format", po::value(&format),
      "megatron, torchtitan, nemo, deepspeed, torchrec or json, optionally @version (docs/exports.md); "
      "default: the study's format")("trial", po::value(&seq), "export this trial (its number in cotune show)")(
      "recommended", "export the recommended trial (the default when the study has one)")(
      "best", "export the best measured feasible trial")("out", po::value(&out_path),
                                                         "write to this file instead of standard output")(
      "json", "write one JSON document: the study, the trial, how it was chosen, its configuration and the "
              "rendered text (docs/show-json.md)")(
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
    std::cout << opts
              << "\nWrites one configuration of STUDY in the launch format of a framework version, checked\n"
                 "against that framework's rules: the recommended trial when the study has one, else the\n"
                 "best measured feasible one.\n";
    return 0;
  }
  if (name.empty()) throw UserError(std::string("usage: ") + kUsage);
  if (vm.count("out") && out_path.empty()) throw UserError("--out: expected a file name");
  if ((vm.count("trial") > 0) + (vm.count("recommended") > 0) + (vm.count("best") > 0) > 1)
    throw UserError("--trial, --recommended and --best choose the trial: give one of them");
  if (vm.count("trial") && seq < 1) throw UserError("--trial: expected a trial number (1 or more)");

  Store::Options store_options;
  store_options.create = false;
  Store store(store_path, store_options);
  std::optional<StudyRecord> study = store.find_study(name);
  if (!study) throw UserError("store " + store.path() + ": no study named '" + name + "' (cotune show lists them)");
  StudySpec spec = spec_from_store(*study);
  if (!format.empty()) parse_launch_format(format, "--format", &spec.format, &spec.format_version);

  Registry registry;
  load_study_plugins(registry, spec);
  StudySpec untargeted = spec;
  untargeted.format = RenderFormat::kJson;
  std::unique_ptr<Space> space = make_study_space(registry, untargeted);
  set_launch_target(*space, spec.launch_target(), "--format");

  const Chosen chosen = choose_trial(store, *study, spec, seq, vm.count("recommended") > 0, vm.count("best") > 0);
  // A trial that ran but breaks the study's constraints (memory over the limit, say) has no objective.
  if (chosen.trial.status == TrialStatus::kOk && !chosen.trial.objective)
    std::fprintf(stderr, "cotune export: note: %s does not meet the study's constraints (cotune show %s lists them); "
                         "exporting it all the same\n",
                 chosen.how.c_str(), name.c_str());
  const std::vector<double> config = space->parse(chosen.trial.config_json);
  const std::string why = space->explain(config.data());
  // A measured trial ran whatever the memory estimate says; only a framework rule stops an export.
  if (why.rfind("out of memory", 0) == 0)
    std::fprintf(stderr, "cotune export: note: %s: the memory estimate says %s\n", chosen.how.c_str(), why.c_str());
  else if (!why.empty())
    throw UserError("study '" + name + "', " + chosen.how + ": " + why);
  const int32_t code = render_format_code(spec.format);
  std::string text;
  if (!space->try_render(config.data(), code, &text))
    throw UserError("--format " + std::string(to_string(spec.format)) + ": the space '" + spec.space.name +
                    "' cannot render it");
  if (text.empty() || text.back() != '\n') text += '\n';
  if (vm.count("json")) {
    const nlohmann::json doc = {
        {"schema_version", 1},
        {"study", name},
        {"trial", chosen.trial.seq},
        {"chosen", chosen.how},
        {"format", std::string(to_string(spec.format))},
        {"target", spec.launch_target()},
        {"config", nlohmann::json::parse(space->render(config.data(), COTUNE_RENDER_JSON))},
        {"objective", chosen.trial.objective ? nlohmann::json(*chosen.trial.objective) : nlohmann::json()},
        {"text", text}};
    text = doc.dump(2) + "\n";
  }
  if (out_path.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    write_atomically(out_path, text);
    std::fprintf(stderr, "cotune export: %s of study '%s' written to %s\n", chosen.how.c_str(), name.c_str(),
                 out_path.c_str());
  }
  return 0;
}

COTUNE_COMMAND("export", "write a study's recommended or best configuration for a framework", run);
}  // namespace
}  // namespace cotune::cli
