// The envelope around saved predictor state: magic, plugin id, format version, payload length and
// an FNV-1a checksum. load() checks all of them before the payload is parsed, so bytes from another
// plugin, an older format, or a truncated or corrupted file give a clear error and never a crash.
#ifndef COTUNE_SUPPORT_STATE_BLOB_HPP_
#define COTUNE_SUPPORT_STATE_BLOB_HPP_

#include <cstdint>
#include <string>
#include <string_view>

namespace cotune::support {

std::string wrap_state(std::string_view plugin_id, uint32_t version, std::string_view payload);

// Returns the payload and, in *version, its format version (oldest to newest are accepted), or
// throws cotune::Error(INVALID_ARGUMENT / VERSION) saying what is wrong.
std::string_view unwrap_state(std::string_view bytes, std::string_view plugin_id, uint32_t oldest,
                              uint32_t newest, uint32_t* version);

}  // namespace cotune::support

#endif  // COTUNE_SUPPORT_STATE_BLOB_HPP_
