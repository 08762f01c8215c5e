// The host side of a space's table schema (see table_schema.hpp).
#include <cotune/core/abi/table_schema.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <stdexcept>
#include <utility>

#include "abi/component_helpers.hpp"

namespace cotune::core {

using namespace abi_detail;
using nlohmann::json;

namespace {

// A plugin's JSON answer, or a PluginError naming it and the call.
json parse_answer(const std::string& text, const std::string& who, const char* call) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object())
    throw PluginError(COTUNE_ERR_INTERNAL, who + ": " + call + "() wrote no JSON object: " + text.substr(0, 200));
  return j;
}

std::vector<std::string> string_list(const json& j, const char* member, const std::string& who) {
  std::vector<std::string> out;
  if (!j.contains(member)) return out;
  const json& list = j[member];
  bool ok = list.is_array();
  if (ok)
    for (const json& v : list) {
      if (!v.is_string() || v.get<std::string>().empty()) ok = false;
      else out.push_back(v.get<std::string>());
    }
  if (!ok) throw PluginError(COTUNE_ERR_INTERNAL, who + ": table_schema()'s \"" + member + "\" is not a list of names");
  return out;
}

// Calls a table function; an INVALID_ARGUMENT answer (a row the space cannot read) becomes
// std::invalid_argument with the space's own message, anything else stays a PluginError.
template <class F>
std::string call(const std::string& who, const char* name, F&& f) {
  StringSink s;
  cotune_error* err = f(&s.sink);
  if (err != nullptr) {
    const int code = err->struct_size >= COTUNE_STRUCT_SIZE(cotune_error, message) ? err->code : COTUNE_ERR_INTERNAL;
    const std::string message =
        err->struct_size >= COTUNE_STRUCT_SIZE(cotune_error, message) ? std::string(view(err->message)) : "";
    if (code == COTUNE_ERR_INVALID_ARGUMENT) {
      if (err->struct_size >= COTUNE_STRUCT_SIZE(cotune_error, destroy) && err->destroy != nullptr) err->destroy(err);
      throw std::invalid_argument(message);
    }
    throw_if_error(err, who + " " + name);
  }
  return s.data;
}

}  // namespace

TableSchema TableSchema::of(const Registry& registry, const std::string& space) {
  const ComponentRef* ref = registry.try_find(COTUNE_KIND_SPACE, space);
  if (ref == nullptr) {
    std::string names;
    for (const ComponentRef& c : registry.components())
      if (c.info.kind == COTUNE_KIND_SPACE) names += (names.empty() ? "" : ", ") + c.info.name;
    throw UserError("--space '" + space + "': no loaded space has that name (loaded: " + names + ")");
  }
  return TableSchema(*ref, space);
}

std::optional<TableSchema> TableSchema::find(const Registry& registry, const std::string& space) {
  const ComponentRef* ref = registry.try_find(COTUNE_KIND_SPACE, space);
  if (ref == nullptr || optional_fn(static_cast<const cotune_space_api*>(ref->component->api),
                                    &cotune_space_api::table_schema) == nullptr)
    return std::nullopt;
  return TableSchema(*ref, space);
}

TableSchema::TableSchema(ComponentRef ref, std::string space)
    : ref_(std::move(ref)), api_(static_cast<const cotune_space_api*>(ref_.component->api)), space_(std::move(space)) {
  const std::string& who = ref_.info.id;
  auto schema = optional_fn(api_, &cotune_space_api::table_schema);
  if (schema == nullptr)
    throw UserError("--space '" + space_ + "': the space " + who +
                    " has no table schema (ABI 1.4 table_schema), so its runs cannot be read from or written to a "
                    "table");
  const json j = parse_answer(call(who, "table_schema", [&](const cotune_sink* out) { return schema(host_services(), out); }),
                              who, "table_schema");
  columns_ = string_list(j, "columns", who);
  config_columns_ = string_list(j, "config_columns", who);
  if (columns_.empty()) throw PluginError(COTUNE_ERR_INTERNAL, who + ": table_schema() lists no columns");
  reads_.insert(columns_.begin(), columns_.end());
  for (const std::string& c : config_columns_)
    if (!reads_.count(c))
      throw PluginError(COTUNE_ERR_INTERNAL, who + ": table_schema()'s config column '" + c + "' is not in \"columns\"");
  for (const std::string& c : string_list(j, "reads", who)) reads_.insert(c);
  // The host writes a workload the columns cannot say whole in this column (export-history), so
  // it always reaches table_read.
  reads_.insert("workload_json");
}

TableRow TableSchema::read(const std::map<std::string, std::string>& cells) const {
  json row = json::object();
  for (const auto& [column, text] : cells)
    if (!text.empty()) row[column] = text;
  const std::string& who = ref_.info.id;
  const std::string text = row.dump();
  const json j = parse_answer(call(who, "table_read", [&](const cotune_sink* out) {
                                return api_->table_read(host_services(), str(text), out);
                              }),
                              who, "table_read");
  TableRow r;
  if (!j.contains("workload") || !j["workload"].is_object() || !j.contains("config") || !j["config"].is_object())
    throw PluginError(COTUNE_ERR_INTERNAL, who + ": table_read() wrote no workload or config object");
  r.workload = j["workload"];
  r.config = j["config"];
  r.options = j.value("options", json::object());
  if (!r.options.is_object()) throw PluginError(COTUNE_ERR_INTERNAL, who + ": table_read()'s options are not an object");
  // Per-GPU metrics are converted with it: a guess would store wrong figures.
  if (!j.contains("devices") || !j["devices"].is_number() || !(j["devices"].get<double>() >= 1))
    throw PluginError(COTUNE_ERR_INTERNAL, who + ": table_read() wrote no \"devices\" (the GPUs the run used, a number >= 1)");
  const json& devices = j["devices"];
  r.devices = devices.get<double>();
  return r;
}

TableCells TableSchema::write(const json& workload, const json* config) const {
  const std::string& who = ref_.info.id;
  const std::string w = workload.dump(), c = config != nullptr ? config->dump() : std::string();
  const json j = parse_answer(call(who, "table_write", [&](const cotune_sink* out) {
                                return api_->table_write(host_services(), str(w), str(c), out);
                              }),
                              who, "table_write");
  TableCells out;
  if (!j.contains("cells") || !j["cells"].is_object())
    throw PluginError(COTUNE_ERR_INTERNAL, who + ": table_write() wrote no cells object");
  for (auto it = j["cells"].begin(); it != j["cells"].end(); ++it) {
    if (!it.value().is_string())
      throw PluginError(COTUNE_ERR_INTERNAL, who + ": table_write()'s cell '" + it.key() + "' is not text");
    out.cells[it.key()] = it.value().get<std::string>();
  }
  const json inexact = j.value("inexact", json(""));
  out.inexact = inexact.is_string() ? inexact.get<std::string>() : inexact.dump();
  if (j.contains("read_back") && j["read_back"].is_object()) out.read_back = j["read_back"];
  return out;
}

}  // namespace cotune::core
