// The SDK's headers as a plugin author's strict build sees them: this file includes each and is
// compiled with -Wconversion -Wsign-conversion -Wshadow -pedantic -Wold-style-cast
// -Wzero-as-null-pointer-constant -Werror (tests/abi/CMakeLists.txt), so that a header that warns
// there fails cotune's own build first. The ABI's macros are expanded below, as a plugin expands them.
#include <cotune/cotune.h>
#include <cotune/cotune.hpp>
#include <cotune/local_search.hpp>
#include <cotune/support/column_spellings.hpp>
#include <cotune/support/command_template.hpp>
#include <cotune/support/likely_meant.hpp>
#include <cotune/support/state_blob.hpp>
#include <cotune/support/training_data.hpp>
#include <cotune/support/trial_files.hpp>

namespace {
[[maybe_unused]] size_t known_size(const cotune_op* op) {
  return COTUNE_HAS_FIELD(op, kernels) ? COTUNE_STRUCT_SIZE(cotune_op, kernels) : 0;
}
}  // namespace
