// A loaded plugin library: the shared object, its validated descriptor and the components it offers.
#ifndef COTUNE_LOADER_PLUGIN_LIBRARY_HPP_
#define COTUNE_LOADER_PLUGIN_LIBRARY_HPP_

#include <cotune/cotune.h>
#include <cotune/core/abi/components.hpp>

#include <boost/dll/shared_library.hpp>
#include <memory>
#include <string>
#include <vector>

namespace cotune::core {

class PluginLibrary {
 public:
  // Loads `path` with RTLD_NOW, calls its entry point with the host table and validates everything
  // the descriptor says. Throws UserError("<path>: <reason>") when the library cannot be used.
  static std::shared_ptr<const PluginLibrary> load(const std::string& path);

  const std::string& path() const { return path_; }
  const cotune_plugin& descriptor() const { return *plugin_; }
  // One entry per component, in descriptor order (infos()[i] describes descriptor().components[i]).
  const std::vector<ComponentInfo>& infos() const { return infos_; }

 private:
  PluginLibrary() = default;
  std::string path_;
  boost::dll::shared_library library_;
  const cotune_plugin* plugin_ = nullptr;
  std::vector<ComponentInfo> infos_;
};

// Validates a descriptor as returned by a plugin's entry point and describes its components, in
// descriptor order. Throws UserError("<path>: <reason>") for anything a plugin must not claim.
// PluginLibrary::load uses it; it takes no library so that a descriptor built in memory (the fuzz
// target in tests/fuzz) goes through exactly the same checks.
std::vector<ComponentInfo> validate_descriptor(const std::string& path, const cotune_plugin* plugin);

// The smallest struct_size the host accepts for each table: the part every 1.x plugin must fill.
// Fields after it are optional and read only when struct_size covers them.
size_t min_api_size(int32_t kind);

}  // namespace cotune::core

#endif  // COTUNE_LOADER_PLUGIN_LIBRARY_HPP_
