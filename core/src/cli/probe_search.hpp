// What `cotune plugins check` does with a searcher: creates it on a small built-in space (three
// parameters, two of them coupled) and asks it for configurations three times, telling it each
// batch's results, through a search context that scores every valid configuration alike.
#ifndef COTUNE_CLI_PROBE_SEARCH_HPP_
#define COTUNE_CLI_PROBE_SEARCH_HPP_

#include <cotune/core/abi/components.hpp>

#include <string>

namespace cotune::cli {

// One line saying what was checked. Throws UserError when the searcher proposes nothing, an invalid
// configuration or one it proposed before; PluginError from the searcher itself.
std::string exercise_searcher(const core::ComponentRef& searcher);

}  // namespace cotune::cli

#endif  // COTUNE_CLI_PROBE_SEARCH_HPP_
