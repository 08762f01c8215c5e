// The llm space's table schema (cotune.h 1.4 table_schema/table_read/table_write; columns in
// docs/simulate.md): which column feeds which workload or configuration field, its defaults, and
// the inverse for export. Every function takes and gives JSON text and throws
// cotune::Error(INVALID_ARGUMENT) naming the column for a cell it cannot read.
#ifndef COTUNE_PLUGINS_SPACES_LLM_TABLE_HPP_
#define COTUNE_PLUGINS_SPACES_LLM_TABLE_HPP_

#include <string>
#include <string_view>

namespace cotune_llm {

std::string table_schema();
std::string table_read(std::string_view row_json);
std::string table_write(std::string_view workload_json, std::string_view config_json);

}  // namespace cotune_llm

#endif  // COTUNE_PLUGINS_SPACES_LLM_TABLE_HPP_
