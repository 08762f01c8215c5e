// What `cotune run`, `show` and `export` share: loading a study's plugins and space, and the study
// document kept in the store (self-contained, so a study can be shown and exported after its files
// moved).
#ifndef COTUNE_CORE_RUN_STUDY_SETUP_HPP_
#define COTUNE_CORE_RUN_STUDY_SETUP_HPP_

#include <cotune/core/abi/components.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/core/store/store_records.hpp>
#include <cotune/core/studyfile/study_file.hpp>

#include <memory>
#include <string>

namespace cotune::core {

// Loads the plugins on the default search path, then the study's plugin_paths (each a directory of
// plugins or one plugin library; a path that does not exist is a UserError naming it).
void load_study_plugins(Registry& registry, const StudySpec& spec);

// Fails with the study file and `field` ("/searcher") when no plugin of `kind` is named `name`.
void require_component(const Registry& registry, const StudySpec& spec, int32_t kind, const std::string& name,
                       const std::string& field);

// The study's space over its workload, targeting the study's launch format (set_launch_target).
std::unique_ptr<Space> make_study_space(const Registry& registry, const StudySpec& spec);

// Space::set_target(target) unless target is empty; a target the space does not know is a UserError
// prefixed with `where`.
void set_launch_target(Space& space, const std::string& target, const std::string& where);
// The same from a format text as a study file's "format" writes it ("TorchTitan@v0.2.2"; empty or
// json: none); returns the launch target set. Errors are UserErrors prefixed with `where`.
std::string set_launch_format(Space& space, const std::string& format, const std::string& where);

// The study document as the store keeps it: the study file with its workload inlined and its plugin
// paths absolute.
std::string stored_study_json(const StudySpec& spec);

// The spec of a stored study (its hash is the one the store holds).
StudySpec spec_from_store(const StudyRecord& study);

// The launch format of a study's render format (COTUNE_RENDER_*).
int32_t render_format_code(RenderFormat format);

// A configuration in one line: "tp=8 pp=4 micro_batch=1 ..." (from Space::key).
std::string config_summary(const Space& space, const double* config);

}  // namespace cotune::core

#endif  // COTUNE_CORE_RUN_STUDY_SETUP_HPP_
