#include <cotune/cotune.h>
#include <cotune/core/abi/log.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/run/study_setup.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

namespace cotune::core {

void load_study_plugins(Registry& registry, const StudySpec& spec) {
  namespace fs = std::filesystem;
  registry.load_default();
  for (const std::string& path : spec.plugin_paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      // A library the study names but the registry refuses (most often: a component id an installed
      // copy already registered) would leave the study running another build without a word.
      const size_t before = registry.problems().size();
      registry.load_directories({path});
      for (size_t i = before; i < registry.problems().size(); ++i)
        log(COTUNE_LOG_WARN, "study",
            spec.file + ": /plugin_paths: " + registry.problems()[i].file + " is not used: " + registry.problems()[i].reason);
    } else if (fs::is_regular_file(path, ec)) {
      if (!registry.load_file(path)) {
        const LoadProblem& p = registry.problems().back();
        throw UserError(spec.file + ": /plugin_paths: cannot load " + p.file + ": " + p.reason);
      }
    } else {
      throw UserError(spec.file + ": /plugin_paths: " + path + " is neither a plugin directory nor a plugin library");
    }
  }
}

void require_component(const Registry& registry, const StudySpec& spec, int32_t kind, const std::string& name,
                       const std::string& field) {
  try {
    (void)registry.find(kind, name);
  } catch (const UserError& e) {
    throw UserError(spec.file + ": " + field + ": " + e.what());
  }
}

std::unique_ptr<Space> make_study_space(const Registry& registry, const StudySpec& spec) {
  require_component(registry, spec, COTUNE_KIND_SPACE, spec.space.name, "/space");
  std::unique_ptr<Space> space;
  try {
    space = registry.make_space(spec.space.name, spec.workload.dump(), spec.space.options.dump(), spec.space.isolation);
  } catch (const PluginError& e) {
    // The space names the field inside the workload or its options; say which file that was. A
    // field it needs and does not find (NOT_FOUND, as cotune::json_number answers) and a plugin's
    // own exception on an option it did not expect (INTERNAL from cotune.hpp) are the same bad
    // input; a process that cannot start or a crash is not (exit 1).
    if (e.code() != COTUNE_ERR_INVALID_ARGUMENT && e.code() != COTUNE_ERR_FAILED_PRECONDITION &&
        e.code() != COTUNE_ERR_NOT_FOUND && !(e.code() == COTUNE_ERR_INTERNAL && spec.space.isolation == Isolation::kNone))
      throw;
    std::string where = spec.workload_file.empty() ? "/workload" : "/workload (" + spec.workload_file + ")";
    throw UserError(spec.file + ": " + where + " or /space/options: the space '" + spec.space.name +
                    (e.code() == COTUNE_ERR_INVALID_ARGUMENT || e.code() == COTUNE_ERR_NOT_FOUND ? "' refused them: "
                                                                                                 : "' failed on them: ") + e.what());
  }
  set_launch_target(*space, spec.launch_target(), spec.file + ": /format");
  return space;
}

void set_launch_target(Space& space, const std::string& target, const std::string& where) {
  if (target.empty()) return;
  try {
    space.set_target(target);  // a space without launch targets renders its formats unversioned
  } catch (const PluginError& e) {
    if (e.code() != COTUNE_ERR_INVALID_ARGUMENT) throw;
    throw UserError(where + ": " + e.what());
  }
}

std::string set_launch_format(Space& space, const std::string& format, const std::string& where) {
  const std::string target = format.empty() ? "" : launch_target_of(format, where);
  set_launch_target(space, target, where);
  return target;
}

std::string stored_study_json(const StudySpec& spec) {
  nlohmann::json doc = nlohmann::json::parse(spec.text);
  doc["workload"] = spec.workload;
  if (!spec.plugin_paths.empty()) {
    nlohmann::json paths = nlohmann::json::array();
    for (const std::string& p : spec.plugin_paths)
      paths.push_back(std::filesystem::absolute(p).lexically_normal().string());
    doc["plugin_paths"] = paths;
  }
  return doc.dump(2);
}

StudySpec spec_from_store(const StudyRecord& study) {
  // A store written before the study-name rule may hold any name: the stored study is read as it
  // was accepted then, its name taken from the store rather than checked again.
  nlohmann::json doc = nlohmann::json::parse(study.study_json, nullptr, false);
  std::string text = study.study_json;
  // The stored workload carries the calibration's constants (cluster.calibration) as the run applied
  // them: the file is not read again. Its path, as the study file gave it (relative to where that
  // was), would resolve against nothing here, and the file may have changed or gone since.
  std::string calibration_file;
  if (doc.is_object() && doc.contains("calibration") && doc["calibration"].is_string() &&
      doc.contains(nlohmann::json::json_pointer("/workload/cluster/calibration"))) {
    calibration_file = doc["calibration"].get<std::string>();
    doc.erase("calibration");
    text = doc.dump();
  }
  if (doc.is_object() && doc.contains("name")) {
    doc["name"] = "stored-study";
    text = doc.dump();
  }
  StudySpec spec = parse_study_file(text, "study '" + study.name + "' in the store", "/");
  spec.name = study.name;
  spec.hash = study.study_hash;
  if (!calibration_file.empty()) spec.calibration_file = calibration_file;
  return spec;
}

int32_t render_format_code(RenderFormat format) {
  switch (format) {
    case RenderFormat::kMegatron: return COTUNE_RENDER_MEGATRON;
    case RenderFormat::kTorchtitan: return COTUNE_RENDER_TORCHTITAN;
    case RenderFormat::kNemo: return COTUNE_RENDER_NEMO;
    case RenderFormat::kDeepspeed: return COTUNE_RENDER_DEEPSPEED;
    case RenderFormat::kTorchrec: return COTUNE_RENDER_TORCHREC;
    case RenderFormat::kJson: break;
  }
  return COTUNE_RENDER_JSON;
}

std::string config_summary(const Space& space, const double* config) {
  std::string s = space.key(config);
  std::replace(s.begin(), s.end(), ';', ' ');
  return s;
}

}  // namespace cotune::core
