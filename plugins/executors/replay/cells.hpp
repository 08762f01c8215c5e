// Reading and comparing table cells: numbers, booleans and text, as a CSV of runs spells them.
#ifndef COTUNE_EXECUTOR_REPLAY_CELLS_HPP_
#define COTUNE_EXECUTOR_REPLAY_CELLS_HPP_

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace cotune_replay {

// The cell without surrounding spaces and tabs.
std::string_view trim(std::string_view s);

// A finite number spelled in full ("8", "8.0", "1e-3"), else nullopt.
std::optional<double> parse_number(std::string_view cell);

// true/false, 1/0, yes/no in any case, else nullopt.
std::optional<bool> parse_bool(std::string_view cell);

// A canonical spelling of a number, the same for every way of writing it ("8", "8.0", "8e0").
std::string number_key(double v);

// A name in any case, with '_' and ' ' read as '-' ("LLAMA3_70B", "Llama3-70b" and "llama3-70b" are
// "llama3-70b"; "H100_SXM" is "h100-sxm"), as the llm space reads GPU and preset names. Other
// characters stay: "0.12.0" and "0.1.20" are two versions.
std::string name_key(std::string_view text);

// The cell in a canonical form: a number as number_key, a boolean word as true/false, otherwise
// its name_key.
std::string canonical(std::string_view cell);

// Whether the cell holds the JSON value: numbers compared as numbers, booleans as booleans,
// strings by name_key (tables spell one model LLAMA3_70B and LLAMA3-70B); an array when the cell
// matches one of its values. Other JSON values (objects, null) match nothing.
bool cell_matches(std::string_view cell, const nlohmann::json& value);

// A JSON scalar as a cell would spell it (for messages and defaults).
std::string cell_text(const nlohmann::json& value);

// The scalar fields of a workload JSON by their own name, at any depth of nested objects (arrays
// are not descended into). A name found twice with different values decides nothing (nullopt).
void collect_fields(const nlohmann::json& obj, std::map<std::string, std::optional<nlohmann::json>>& out);

}  // namespace cotune_replay

#endif  // COTUNE_EXECUTOR_REPLAY_CELLS_HPP_
