#include "run/searcher_state.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>

namespace cotune::core {
namespace {
constexpr const char* kFormat = "cotune-searcher-state";
constexpr int kVersion = 1;
}  // namespace

std::vector<std::uint8_t> encode_searcher_state(const SearcherState& state) {
  nlohmann::json header = {{"format", kFormat}, {"version", kVersion}, {"observed", state.observed}};
  std::string text = header.dump() + "\n" + state.plugin_bytes;
  return std::vector<std::uint8_t>(text.begin(), text.end());
}

SearcherState decode_searcher_state(const std::vector<std::uint8_t>& blob) {
  auto newline = std::find(blob.begin(), blob.end(), static_cast<std::uint8_t>('\n'));
  if (newline == blob.end()) throw std::runtime_error("saved searcher state: no header line");
  nlohmann::json header = nlohmann::json::parse(blob.begin(), newline, nullptr, false);
  if (!header.is_object() || header.value("format", "") != kFormat || !header.contains("observed") ||
      !header["observed"].is_array())
    throw std::runtime_error("saved searcher state: not a cotune searcher state");
  if (header.value("version", 0) != kVersion)
    throw std::runtime_error("saved searcher state: version " + header["version"].dump() + ", expected " +
                             std::to_string(kVersion));
  SearcherState state;
  for (const auto& seq : header["observed"]) {
    if (!seq.is_number_integer()) throw std::runtime_error("saved searcher state: observed trial is not a number");
    state.observed.insert(seq.get<std::int64_t>());
  }
  state.plugin_bytes.assign(newline + 1, blob.end());
  return state;
}

}  // namespace cotune::core
