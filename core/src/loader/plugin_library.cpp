#include "loader/plugin_library.hpp"

#include "loader/elf_check.hpp"

#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <boost/dll/shared_library_load_mode.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cctype>
#include <set>

namespace cotune::core {
namespace {

// Limits on what a descriptor may claim; anything beyond is nonsense from a broken plugin.
constexpr size_t kMaxComponents = 256;
constexpr size_t kMaxStringLength = 4096;

[[noreturn]] void refuse(const std::string& path, const std::string& reason) {
  throw UserError(path + ": " + reason);
}

// True when s[0..n) is well-formed UTF-8 without NUL bytes (names and versions never hold NUL).
bool valid_utf8(const char* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t extra;
    if (c == 0) return false;
    if (c < 0x80) extra = 0;
    else if ((c >> 5) == 0x6) extra = 1;
    else if ((c >> 4) == 0xE) extra = 2;
    else if ((c >> 3) == 0x1E) extra = 3;
    else return false;
    if (extra > n - i - 1) return false;
    for (size_t k = 1; k <= extra; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    i += extra + 1;
  }
  return true;
}

// Copies a string the plugin describes, refusing NULL pointers, absurd lengths and bad UTF-8.
std::string take_string(const std::string& path, const char* what, cotune_str s, bool required) {
  if (s.data == nullptr) {
    if (s.len == 0 && !required) return {};
    refuse(path, std::string(what) + " is NULL");
  }
  if (s.len > kMaxStringLength) refuse(path, std::string(what) + " is longer than 4096 bytes");
  if (required && s.len == 0) refuse(path, std::string(what) + " is empty");
  if (!valid_utf8(s.data, s.len)) refuse(path, std::string(what) + " is not valid UTF-8");
  return std::string(s.data, s.len);
}

size_t api_struct_size(const void* api) { return *static_cast<const size_t*>(api); }

bool name_char(char ch) {
  return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '-' || ch == '_';
}

// "org.cotune.executor.sim": two or more dot-separated parts, none empty.
bool reverse_dns_id(const std::string& id) {
  if (id.find('.') == std::string::npos || id.front() == '.' || id.back() == '.' || id.find("..") != std::string::npos)
    return false;
  return std::all_of(id.begin(), id.end(), [](char ch) { return name_char(ch) || ch == '.'; });
}

// What a study file, a command line and a store key can carry as the component's name.
bool study_file_name(const std::string& name) {
  return std::all_of(name.begin(), name.end(), [](char ch) { return name_char(ch) || ch == '.'; });
}

// Checks that the functions every plugin of `kind` must provide are there.
void check_required_functions(const std::string& path, const ComponentInfo& info, const void* api) {
  auto missing = [&](const char* fn) {
    refuse(path, "component '" + info.id + "' (" + kind_name(info.kind) + ") has no " + fn + " function");
  };
  switch (info.kind) {
    case COTUNE_KIND_SPACE: {
      auto a = static_cast<const cotune_space_api*>(api);
      if (!a->create) missing("create");
      if (!a->destroy) missing("destroy");
      if (!a->describe) missing("describe");
      if (!a->check) missing("check");
      if (!a->explain) missing("explain");
      if (!a->sample) missing("sample");
      if (!a->describe_features) missing("describe_features");
      if (!a->featurize) missing("featurize");
      // 1.4: a table schema comes whole or not at all (a reader without its writer would import
      // runs that export-history then cannot write).
      auto has = [&](size_t end) { return api_struct_size(api) >= end; };
      const bool schema = has(COTUNE_STRUCT_SIZE(cotune_space_api, table_schema)) && a->table_schema != nullptr;
      const bool read = has(COTUNE_STRUCT_SIZE(cotune_space_api, table_read)) && a->table_read != nullptr;
      const bool write = has(COTUNE_STRUCT_SIZE(cotune_space_api, table_write)) && a->table_write != nullptr;
      if ((schema || read || write) && !(schema && read && write))
        refuse(path, "component '" + info.id + "' (space) offers part of a table schema: table_schema, table_read "
                     "and table_write come together");
      break;
    }
    case COTUNE_KIND_PREDICTOR: {
      auto a = static_cast<const cotune_predictor_api*>(api);
      if (!a->create) missing("create");
      if (!a->destroy) missing("destroy");
      if (!a->fit) missing("fit");
      if (!a->predict) missing("predict");
      break;
    }
    case COTUNE_KIND_SEARCHER: {
      auto a = static_cast<const cotune_searcher_api*>(api);
      if (!a->create) missing("create");
      if (!a->destroy) missing("destroy");
      if (!a->propose) missing("propose");
      if (!a->observe) missing("observe");
      break;
    }
    case COTUNE_KIND_EXECUTOR: {
      auto a = static_cast<const cotune_executor_api*>(api);
      if (!a->create) missing("create");
      if (!a->destroy) missing("destroy");
      if (!a->capacity) missing("capacity");
      if (!a->submit) missing("submit");
      if (!a->poll) missing("poll");
      if (!a->cancel) missing("cancel");
      if (!a->release) missing("release");
      break;
    }
  }
}

// MAJOR.MINOR.PATCH, optionally followed by a pre-release or build suffix ("1.2.0-rc1", "1.0.0+abc").
bool semantic_version(const std::string& v) {
  size_t i = 0;
  for (int part = 0; part < 3; ++part) {
    const size_t start = i;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') ++i;
    if (i == start) return false;
    if (part < 2) {
      if (i >= v.size() || v[i] != '.') return false;
      ++i;
    }
  }
  if (i == v.size()) return true;
  if (v[i] != '-' && v[i] != '+') return false;
  for (++i; i < v.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(v[i])) && v[i] != '.' && v[i] != '-' && v[i] != '+') return false;
  return true;
}

}  // namespace

size_t min_api_size(int32_t kind) {
  switch (kind) {
    case COTUNE_KIND_SPACE: return COTUNE_STRUCT_SIZE(cotune_space_api, featurize);
    case COTUNE_KIND_PREDICTOR: return COTUNE_STRUCT_SIZE(cotune_predictor_api, predict);
    case COTUNE_KIND_SEARCHER: return COTUNE_STRUCT_SIZE(cotune_searcher_api, observe);
    case COTUNE_KIND_EXECUTOR: return COTUNE_STRUCT_SIZE(cotune_executor_api, release);
    default: return 0;
  }
}

std::vector<ComponentInfo> validate_descriptor(const std::string& path, const cotune_plugin* plugin) {
  if (plugin == nullptr) refuse(path, "the entry point returned NULL (the plugin refused this host)");
  if (plugin->struct_size < COTUNE_STRUCT_SIZE(cotune_plugin, num_components))
    refuse(path, "plugin descriptor struct_size " + std::to_string(plugin->struct_size) + " is smaller than " +
                     std::to_string(COTUNE_STRUCT_SIZE(cotune_plugin, num_components)));
  if (plugin->abi_major != COTUNE_ABI_MAJOR)
    refuse(path, "built for ABI " + std::to_string(plugin->abi_major) + "." + std::to_string(plugin->abi_minor) +
                     ", this host speaks ABI " + std::to_string(COTUNE_ABI_MAJOR) + ".x");
  if (plugin->num_components == 0) refuse(path, "the plugin declares no components");
  if (plugin->num_components > kMaxComponents)
    refuse(path, "the plugin declares " + std::to_string(plugin->num_components) + " components (limit 256)");
  if (plugin->components == nullptr) refuse(path, "the component list is NULL");

  std::vector<ComponentInfo> infos;
  std::set<std::string> ids;
  for (size_t i = 0; i < plugin->num_components; ++i) {
    const cotune_component* c = plugin->components[i];
    const std::string where = "component " + std::to_string(i);
    if (c == nullptr) refuse(path, where + " is NULL");
    if (c->struct_size < COTUNE_STRUCT_SIZE(cotune_component, api))
      refuse(path, where + ": struct_size " + std::to_string(c->struct_size) + " is smaller than " +
                       std::to_string(COTUNE_STRUCT_SIZE(cotune_component, api)));
    ComponentInfo info;
    info.kind = c->kind;
    if (kind_name(c->kind)[0] == '?') refuse(path, where + ": unknown kind " + std::to_string(c->kind));
    info.capabilities = c->capabilities;
    info.id = take_string(path, (where + " id").c_str(), c->id, true);
    if (!reverse_dns_id(info.id))
      refuse(path, where + " id '" + info.id + "' is not a reverse-DNS id: dot-separated parts of letters, digits, "
                           "'-' and '_', such as com.example.executor.mycluster");
    // From here on the id names the component.
    const std::string named = "component '" + info.id + "'";
    info.name = take_string(path, (named + " name").c_str(), c->name, true);
    if (!study_file_name(info.name))
      refuse(path, named + " name '" + info.name + "' is not one a study file can name it by: letters, digits, "
                           "'.', '-' and '_'");
    info.description = take_string(path, (named + " description").c_str(), c->description, false);
    info.version = take_string(path, (named + " version").c_str(), c->version, true);
    if (!semantic_version(info.version))
      refuse(path, named + " version '" + info.version + "' is not MAJOR.MINOR.PATCH, such as 1.0.0" +
                       (info.version.find(' ') != std::string::npos
                            ? " (it reads as a description: the C++ helper's ComponentInfo takes the description "
                              "before the version, {id, name, description, version})"
                            : ""));
    info.abi_major = plugin->abi_major;
    info.abi_minor = plugin->abi_minor;
    info.file = path;
    if (!ids.insert(info.id).second) refuse(path, "component id '" + info.id + "' appears twice");
    if (c->api == nullptr) refuse(path, "component '" + info.id + "' has a NULL function table");
    const size_t have = api_struct_size(c->api), need = min_api_size(c->kind);
    if (have < need)
      refuse(path, "component '" + info.id + "': " + kind_name(c->kind) + " table struct_size " +
                       std::to_string(have) + " is smaller than the " + std::to_string(need) +
                       " bytes every ABI 1.x table has");
    check_required_functions(path, info, c->api);
    infos.push_back(std::move(info));
  }
  return infos;
}

std::shared_ptr<const PluginLibrary> PluginLibrary::load(const std::string& path) {
  std::shared_ptr<PluginLibrary> lib(new PluginLibrary());
  lib->path_ = path;
  if (const std::string problem = elf_problem(path); !problem.empty()) refuse(path, "cannot load: " + problem);
  try {
    // rtld_now: a missing symbol fails here, not in the middle of a study.
    lib->library_.load(path, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const boost::system::system_error& e) {
    refuse(path, std::string("cannot load: ") + e.what());
  }
  if (!lib->library_.has(COTUNE_ENTRY_SYMBOL))
    refuse(path, "no entry symbol " COTUNE_ENTRY_SYMBOL " (not a cotune plugin, or built for another ABI major)");
  auto entry = lib->library_.get<const cotune_plugin*(const cotune_host*)>(COTUNE_ENTRY_SYMBOL);
  const cotune_plugin* plugin = entry(host_services());
  lib->infos_ = validate_descriptor(path, plugin);
  lib->plugin_ = plugin;
  return lib;
}

}  // namespace cotune::core
