#include <cotune/support/state_blob.hpp>

#include <cotune/cotune.hpp>

#include <cstring>

namespace cotune::support {
namespace {

constexpr char kMagic[8] = {'c', 'o', 't', 'u', 'n', 'e', 'P', 'S'};

uint64_t fnv1a(std::string_view data) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

template <class T>
void put(std::string& out, T v) {
  char buf[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) buf[i] = char((uint64_t(v) >> (8 * i)) & 0xff);
  out.append(buf, sizeof(T));
}

template <class T>
T get(std::string_view bytes, size_t& pos) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t(static_cast<unsigned char>(bytes[pos + i])) << (8 * i);
  pos += sizeof(T);
  return static_cast<T>(v);
}

[[noreturn]] void bad(std::string_view plugin_id, const std::string& why, int32_t code = COTUNE_ERR_INVALID_ARGUMENT) {
  throw cotune::Error(code, std::string(plugin_id) + ": cannot load saved state: " + why);
}

}  // namespace

std::string wrap_state(std::string_view plugin_id, uint32_t version, std::string_view payload) {
  std::string out(kMagic, sizeof(kMagic));
  put<uint16_t>(out, uint16_t(plugin_id.size()));
  out.append(plugin_id);
  put<uint32_t>(out, version);
  put<uint64_t>(out, payload.size());
  put<uint64_t>(out, fnv1a(payload));
  out.append(payload);
  return out;
}

std::string_view unwrap_state(std::string_view bytes, std::string_view plugin_id, uint32_t oldest,
                              uint32_t newest, uint32_t* version) {
  size_t pos = 0;
  if (bytes.size() < sizeof(kMagic) + 2 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    bad(plugin_id, "the bytes are not saved cotune predictor state (" + std::to_string(bytes.size()) +
                       " bytes, wrong header)");
  pos = sizeof(kMagic);
  const size_t id_len = get<uint16_t>(bytes, pos);
  if (bytes.size() < pos + id_len + 4 + 8 + 8) bad(plugin_id, "the header is truncated");
  const std::string_view id = bytes.substr(pos, id_len);
  pos += id_len;
  if (id != plugin_id)
    bad(plugin_id, "the state was saved by '" + std::string(id) + "', not by this predictor");
  const uint32_t got_version = get<uint32_t>(bytes, pos);
  if (got_version < oldest || got_version > newest)
    bad(plugin_id, "state format version " + std::to_string(got_version) + " is not supported (expected " +
                       (oldest == newest ? std::to_string(newest)
                                         : std::to_string(oldest) + " to " + std::to_string(newest)) +
                       ")",
        COTUNE_ERR_VERSION);
  *version = got_version;
  const uint64_t length = get<uint64_t>(bytes, pos);
  const uint64_t checksum = get<uint64_t>(bytes, pos);
  if (length != bytes.size() - pos)
    bad(plugin_id, "the payload should be " + std::to_string(length) + " bytes but " +
                       std::to_string(bytes.size() - pos) + " are present (truncated or padded)");
  const std::string_view payload = bytes.substr(pos);
  if (fnv1a(payload) != checksum) bad(plugin_id, "the checksum does not match (corrupted bytes)");
  return payload;
}

}  // namespace cotune::support
