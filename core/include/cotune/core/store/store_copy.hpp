// `cotune store copy SRC DST`: copies every study (trials, searcher and predictor state, the
// recommended trial) and all imported history from one store to another, SQLite or PostgreSQL in
// either direction.
//
// Idempotent: a study already in DST (same name, same study hash) only gets the trials it lacks,
// history rows already there are left alone, so running the copy twice changes nothing. A study
// whose name DST holds with another study hash is refused, before anything is written. Each study is
// written in one transaction: a copy that fails midway leaves whole studies, never half of one.
#ifndef COTUNE_CORE_STORE_STORE_COPY_HPP_
#define COTUNE_CORE_STORE_STORE_COPY_HPP_

#include <cotune/core/store/store.hpp>

#include <cstdint>

namespace cotune::core {

struct StoreCopyCounts {
  std::int64_t studies_created = 0;
  std::int64_t studies_updated = 0;    // already there, trials added or brought up to date
  std::int64_t studies_unchanged = 0;  // already there with every trial as the source has it
  std::int64_t trials_added = 0;
  std::int64_t trials_updated = 0;     // in flight in the destination, finished in the source
  ImportCounts history;  // rows inserted, rows already there
};

StoreCopyCounts copy_store(Store& source, Store& destination);

}  // namespace cotune::core

#endif  // COTUNE_CORE_STORE_STORE_COPY_HPP_
