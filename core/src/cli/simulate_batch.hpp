// `cotune simulate --batch`: one output row per input row of a CSV of configurations, in a space's
// table schema (the llm space's: docs/simulate.md).
#ifndef COTUNE_CLI_SIMULATE_BATCH_HPP_
#define COTUNE_CLI_SIMULATE_BATCH_HPP_

#include <cotune/core/abi/table_schema.hpp>
#include <cotune/core/registry.hpp>

#include <nlohmann/json.hpp>

#include <istream>
#include <ostream>
#include <string>

namespace cotune::cli {

// Reads CSV from `in` (named `source` in messages) and writes the result CSV to `out`. Returns the
// number of rows that were not ok. Throws core::UserError when the header itself is unusable.
// `calibration`, when not null, is the per-GPU constants of a calibration file, applied to every row.
size_t simulate_batch(const core::Registry& registry, const core::TableSchema& schema, std::istream& in,
                      const std::string& source, std::ostream& out, const nlohmann::json* calibration = nullptr);

}  // namespace cotune::cli

#endif
