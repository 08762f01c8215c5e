// The recsys space's table schema (cotune.h 1.4; columns in docs/workloads-recsys.md): a run is a
// model preset, the training and cluster columns and the thirteen parameters; a model the preset
// column cannot say (tables of its own, a generator) comes whole in workload_json. JSON text in and
// out; a cell it cannot read is cotune::Error(INVALID_ARGUMENT) naming the column.
#ifndef COTUNE_PLUGINS_SPACES_RECSYS_TABLE_HPP_
#define COTUNE_PLUGINS_SPACES_RECSYS_TABLE_HPP_

#include <string>
#include <string_view>

namespace cotune_recsys {

std::string table_schema();
std::string table_read(std::string_view row_json);
std::string table_write(std::string_view workload_json, std::string_view config_json);

}  // namespace cotune_recsys

#endif  // COTUNE_PLUGINS_SPACES_RECSYS_TABLE_HPP_
