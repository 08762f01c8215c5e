// The name a misspelt key most likely means, for "unknown field" errors that say what to write
// instead: `cotune run` checks study files with it, and plugins their own options.
#ifndef COTUNE_SUPPORT_LIKELY_MEANT_HPP_
#define COTUNE_SUPPORT_LIKELY_MEANT_HPP_

#include <string>
#include <string_view>
#include <vector>

namespace cotune::support {

// The Levenshtein distance: insertions, deletions and substitutions that turn `a` into `b`.
size_t edit_distance(std::string_view a, std::string_view b);

// The name among `names` that `word` most likely misspells (at most two edits apart, one edit for
// words under five letters; one spelled out further than the other; or the same '_'-separated words
// in another order; case and '-' for '_' do not count), or "" when none is close.
std::string likely_meant(std::string_view word, const std::vector<std::string>& names);

// " (did you mean \"NAME\"?)" for likely_meant's answer, "" when there is none: for the end of an
// error's first clause ("unknown field 'tp_comm_overlapp' (did you mean ...?); expected ...").
std::string did_you_mean(std::string_view word, const std::vector<std::string>& names);

// The same, the names read from the list an error prints ("noise, seed, hardware"), so that the two
// never disagree.
std::string did_you_mean_listed(std::string_view word, std::string_view comma_separated_names);

}  // namespace cotune::support

#endif  // COTUNE_SUPPORT_LIKELY_MEANT_HPP_
