// The plugin registry: finds plugin libraries, loads and validates them, and creates components by
// kind and name. A library that cannot be used is refused with a reason; the others still load.
#ifndef COTUNE_CORE_REGISTRY_HPP_
#define COTUNE_CORE_REGISTRY_HPP_

#include <cotune/core/abi/components.hpp>
#include <cotune/core/abi/isolation.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cotune::core {

// Why a library was refused.
struct LoadProblem {
  std::string file;
  std::string reason;
};

class Registry {
 public:
  Registry() = default;

  // The default search path, in order: the plugin directory beside the running executable
  // (<exe>/../lib/cotune/plugins: the build tree and the install prefix), then every directory in
  // COTUNE_PLUGIN_PATH (colon-separated).
  static std::vector<std::string> default_search_path();
  // The directories of COTUNE_PLUGIN_PATH alone.
  static std::vector<std::string> environment_search_path();

  // Loads every libcotune-*.so in each directory (missing directories are skipped).
  void load_directories(const std::vector<std::string>& dirs);
  // The default search path; a COTUNE_PLUGIN_PATH entry that is no directory is a LoadProblem.
  void load_default();
  // Records a LoadProblem for `dir` (named by `named_by`, for the message) when it is no directory.
  void note_missing_directory(const std::string& dir, const std::string& named_by);
  // Loads one library. Returns false (and records a LoadProblem) when it is refused.
  bool load_file(const std::string& path);

  const std::vector<ComponentRef>& components() const { return components_; }
  const std::vector<LoadProblem>& problems() const { return problems_; }

  // The component of `kind` whose id is `name`, else the one whose name is `name`; throws UserError
  // listing the available ones. Both throw UserError when several components have that name.
  const ComponentRef& find(int32_t kind, std::string_view name) const;
  const ComponentRef* try_find(int32_t kind, std::string_view name) const;

  // With Isolation::kProcess, every call of the instance runs in a child process (isolation.hpp).
  std::unique_ptr<Space> make_space(std::string_view name, std::string_view workload_json,
                                    std::string_view options_json = "{}",
                                    Isolation isolation = Isolation::kNone) const;
  std::unique_ptr<Predictor> make_predictor(std::string_view name, std::string_view options_json = "{}",
                                            Isolation isolation = Isolation::kNone) const;
  std::unique_ptr<Searcher> make_searcher(std::string_view name, std::string_view options_json,
                                          const Space& space, uint64_t seed,
                                          Isolation isolation = Isolation::kNone) const;
  std::unique_ptr<Executor> make_executor(std::string_view name, std::string_view options_json = "{}",
                                          Isolation isolation = Isolation::kNone) const;

 private:
  std::vector<ComponentRef> components_;
  std::vector<LoadProblem> problems_;
  std::vector<std::string> loaded_files_;  // canonical paths, so a library is loaded once
};

// The host services table handed to every plugin (static; lives for the whole process).
const cotune_host* host_services();

}  // namespace cotune::core

#endif  // COTUNE_CORE_REGISTRY_HPP_
