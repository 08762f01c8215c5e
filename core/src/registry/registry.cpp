#include <cotune/core/errors.hpp>
#include <cotune/core/abi/log.hpp>
#include <cotune/core/registry.hpp>
#include <cotune/support/likely_meant.hpp>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/filesystem.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "loader/plugin_library.hpp"

namespace cotune::core {
namespace fs = boost::filesystem;

std::vector<std::string> Registry::environment_search_path() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("COTUNE_PLUGIN_PATH")) {
    std::string all(env);
    size_t start = 0;
    while (start <= all.size()) {
      const size_t end = std::min(all.find(':', start), all.size());
      if (end > start) dirs.push_back(all.substr(start, end - start));
      start = end + 1;
    }
  }
  return dirs;
}

std::vector<std::string> Registry::default_search_path() {
  std::vector<std::string> dirs;
  boost::system::error_code ec;
  const fs::path exe = boost::dll::program_location(ec);
  if (!ec) {
    // <prefix>/bin/cotune -> <prefix>/lib/cotune/plugins (the build tree has the same layout).
    dirs.push_back((exe.parent_path().parent_path() / "lib" / "cotune" / "plugins").string());
    const fs::path installed = exe.parent_path().parent_path() / COTUNE_INSTALL_PLUGIN_SUBDIR;
    if (installed.string() != dirs.back()) dirs.push_back(installed.string());
  }
  for (std::string& dir : environment_search_path()) dirs.push_back(std::move(dir));
  return dirs;
}

void Registry::load_directories(const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) {
    boost::system::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<std::string> files;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.rfind("libcotune-", 0) == 0 && it->path().extension() == ".so") files.push_back(it->path().string());
    }
    std::sort(files.begin(), files.end());  // a stable order, so a duplicate id is refused predictably
    for (const std::string& f : files) load_file(f);
  }
}

void Registry::load_default() {
  load_directories(default_search_path());
  // The installation's own directories may be absent (a build tree has one of the two); a directory
  // a user named in COTUNE_PLUGIN_PATH that is not one would leave their plugins unloaded unsaid.
  for (const std::string& dir : environment_search_path()) note_missing_directory(dir, "COTUNE_PLUGIN_PATH");
}

void Registry::note_missing_directory(const std::string& dir, const std::string& named_by) {
  boost::system::error_code ec;
  if (fs::is_directory(dir, ec)) return;
  for (const LoadProblem& p : problems_)
    if (p.file == dir) return;
  const bool file = fs::is_regular_file(dir, ec);
  problems_.push_back({dir, file ? "a file, not a directory (" + named_by + " names directories to search for "
                                   "libcotune-*.so; a study's plugin_paths may name a library itself)"
                                 : "no such directory (named by " + named_by + ")"});
}

bool Registry::load_file(const std::string& path) {
  boost::system::error_code ec;
  const std::string canonical = fs::canonical(path, ec).string();
  if (ec) {
    problems_.push_back({path, "cannot open: " + ec.message()});
    return false;
  }
  if (std::find(loaded_files_.begin(), loaded_files_.end(), canonical) != loaded_files_.end()) return true;
  std::shared_ptr<const PluginLibrary> lib;
  try {
    lib = PluginLibrary::load(canonical);
  } catch (const std::exception& e) {
    // The message already starts with the path.
    const std::string what = e.what();
    const std::string prefix = canonical + ": ";
    problems_.push_back({path, what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what});
    return false;
  }
  // A component id may exist once across all libraries: the first loaded wins, the newcomer is refused.
  for (const ComponentInfo& info : lib->infos()) {
    for (const ComponentRef& have : components_) {
      if (have.info.id == info.id) {
        problems_.push_back({path, "component id '" + info.id + "' is already provided by " + have.info.file});
        return false;
      }
    }
  }
  for (size_t i = 0; i < lib->infos().size(); ++i) {
    ComponentRef ref;
    ref.library = lib;
    ref.component = lib->descriptor().components[i];
    ref.info = lib->infos()[i];
    components_.push_back(std::move(ref));
  }
  loaded_files_.push_back(canonical);
  return true;
}

const ComponentRef* Registry::try_find(int32_t kind, std::string_view name) const {
  for (const ComponentRef& c : components_)
    if (c.info.kind == kind && c.info.id == name) return &c;
  std::vector<const ComponentRef*> named;
  for (const ComponentRef& c : components_)
    if (c.info.kind == kind && c.info.name == name) named.push_back(&c);
  // Two libraries may give a component the same short name (a team's "slurm" beside the built-in
  // one): taking the first found would run the other one without a word.
  if (named.size() > 1) {
    std::string all;
    for (const ComponentRef* c : named) all += "\n  " + c->info.id + " (" + c->info.file + ")";
    throw UserError(std::string(kind_name(kind)) + " plugin name '" + std::string(name) +
                    "' is ambiguous: several loaded plugins have it; name the one to use by its id:" + all);
  }
  return named.empty() ? nullptr : named.front();
}

const ComponentRef& Registry::find(int32_t kind, std::string_view name) const {
  if (const ComponentRef* c = try_find(kind, name)) return *c;
  std::string available;
  std::vector<std::string> names;
  for (const ComponentRef& c : components_)
    if (c.info.kind == kind) {
      available += (available.empty() ? "" : ", ") + c.info.name;
      names.push_back(c.info.name);
    }
  std::string msg = std::string("no ") + kind_name(kind) + " plugin named '" + std::string(name) + "'" +
                    support::did_you_mean(name, names);
  msg += available.empty() ? std::string(" (none is loaded)") : " (available: " + available + ")";
  for (const LoadProblem& p : problems_) msg += "\n  refused " + p.file + ": " + p.reason;
  throw UserError(msg);
}

namespace {
ComponentRef isolated_if(const ComponentRef& ref, Isolation isolation) {
  return isolation == Isolation::kProcess ? isolate(ref) : ref;
}
}  // namespace

std::unique_ptr<Space> Registry::make_space(std::string_view name, std::string_view workload_json,
                                            std::string_view options_json, Isolation isolation) const {
  return std::make_unique<Space>(isolated_if(find(COTUNE_KIND_SPACE, name), isolation), workload_json, options_json);
}

std::unique_ptr<Predictor> Registry::make_predictor(std::string_view name, std::string_view options_json,
                                                    Isolation isolation) const {
  return std::make_unique<Predictor>(isolated_if(find(COTUNE_KIND_PREDICTOR, name), isolation), options_json);
}

std::unique_ptr<Searcher> Registry::make_searcher(std::string_view name, std::string_view options_json,
                                                  const Space& space, uint64_t seed, Isolation isolation) const {
  return std::make_unique<Searcher>(isolated_if(find(COTUNE_KIND_SEARCHER, name), isolation), options_json, space,
                                    seed);
}

std::unique_ptr<Executor> Registry::make_executor(std::string_view name, std::string_view options_json,
                                                  Isolation isolation) const {
  return std::make_unique<Executor>(isolated_if(find(COTUNE_KIND_EXECUTOR, name), isolation), options_json);
}

}  // namespace cotune::core
