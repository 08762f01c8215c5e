// Files compiled into the host (core/data/*.json), looked up by file name.
#ifndef COTUNE_CORE_EMBEDDED_HPP_
#define COTUNE_CORE_EMBEDDED_HPP_
#include <string_view>
namespace cotune::core {
// The contents of core/data/<name>, or an empty view when no such file was embedded.
std::string_view embedded_file(std::string_view name);
}  // namespace cotune::core
#endif
