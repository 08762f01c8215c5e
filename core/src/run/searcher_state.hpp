// The searcher's state blob in the store, wrapped with the trials it has observed, so that a study
// resumed after a crash between committing a trial and saving the state still tells the searcher
// about every finished trial exactly once.
//
// Layout: one JSON line {"format": "cotune-searcher-state", "version": 1, "observed": [seq, ...]},
// a newline, then the plugin's bytes as they are.
#ifndef COTUNE_RUN_SEARCHER_STATE_HPP_
#define COTUNE_RUN_SEARCHER_STATE_HPP_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace cotune::core {

struct SearcherState {
  std::set<std::int64_t> observed;  // seq of the trials the state has seen
  std::string plugin_bytes;
};

std::vector<std::uint8_t> encode_searcher_state(const SearcherState& state);
// Throws std::runtime_error when the blob is not in this layout.
SearcherState decode_searcher_state(const std::vector<std::uint8_t>& blob);

}  // namespace cotune::core

#endif  // COTUNE_RUN_SEARCHER_STATE_HPP_
