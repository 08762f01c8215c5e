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

// What `plugins check --submit` does with an executor: submits one trial of that space (a sampled
// valid configuration, a working directory of its own) and polls it to its end within
// `timeout_s`, cancelling it past that. One line saying what it answered; throws UserError when the
// answer is one no host can use (a status no ABI defines, metrics that are not a JSON object, no
// end in time). An error object from submit or poll is an answer the host handles (the trial is
// unavailable or failed): the line says so. An executor that needs step traces is not submitted to
// (the space lowers none): the line says so.
std::string exercise_executor(core::Executor& executor, double timeout_s);

}  // namespace cotune::cli

#endif  // COTUNE_CLI_PROBE_SEARCH_HPP_
