// Fuzz target: the host's validation of what a plugin's entry point returns. The input describes a
// cotune_plugin descriptor, its components, their strings and function tables (NULL pointers,
// struct sizes from zero to larger than known, any kind, counts up to (size_t)-1, strings of any
// bytes and lengths), built in memory with every buffer exactly as large as it claims, so that a
// read beyond what the descriptor states is caught by AddressSanitizer. The host must accept or
// refuse with "<file>: <reason>"; nothing else.
#include <cotune/cotune.h>
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fuzz/byte_reader.hpp"
#include "fuzz/fuzz_check.hpp"
#include "loader/plugin_library.hpp"

namespace {

using cotune::fuzz::ByteReader;

// Fills every present function slot of a fuzzed table: validation only checks that a slot is
// non-NULL and never calls it.
void never_called_slot() {}

// Owns the buffers of one descriptor; each is exactly the size asked for.
class Arena {
 public:
  unsigned char* alloc(size_t n) {
    blocks_.emplace_back(new unsigned char[n == 0 ? 1 : n]());
    return blocks_.back().get();
  }

 private:
  std::vector<std::unique_ptr<unsigned char[]>> blocks_;
};

size_t full_table_size(int32_t kind) {
  switch (kind) {
    case COTUNE_KIND_SPACE: return sizeof(cotune_space_api);
    case COTUNE_KIND_PREDICTOR: return sizeof(cotune_predictor_api);
    case COTUNE_KIND_SEARCHER: return sizeof(cotune_searcher_api);
    case COTUNE_KIND_EXECUTOR: return sizeof(cotune_executor_api);
    default: return sizeof(size_t);
  }
}

// A struct_size: 0, something small, exactly `exact`, or larger (a newer minor).
size_t struct_size(ByteReader& in, size_t exact) {
  const uint8_t sel = in.byte();
  switch (sel % 4) {
    case 0: return 0;
    case 1: return in.byte();
    case 2: return exact;
    default: return exact + in.byte();
  }
}

cotune_str make_string(ByteReader& in, Arena& arena, const cotune_str* earlier_id) {
  const uint8_t mode = in.byte();
  switch (mode % 8) {
    case 0: return {nullptr, 0};
    case 1: return {nullptr, size_t{1} + in.byte()};
    // A stated length beyond the limit over a one-byte buffer: must be refused unread.
    case 2: return {reinterpret_cast<const char*>(arena.alloc(1)), mode & 8 ? SIZE_MAX : 4097 + size_t{in.byte()}};
    case 3:
      if (earlier_id != nullptr) return *earlier_id;
      [[fallthrough]];
    default: {
      const std::string bytes = in.bytes(in.byte() % 48);
      char* data = reinterpret_cast<char*>(arena.alloc(bytes.size()));
      std::memcpy(data, bytes.data(), bytes.size());  // no terminator: the length is the string
      return {data, bytes.size()};
    }
  }
}

const void* make_table(ByteReader& in, Arena& arena, int32_t kind) {
  if (in.byte() & 1) return nullptr;
  const size_t full = full_table_size(kind);
  const size_t claimed = struct_size(in, cotune::core::min_api_size(kind));
  // As large as claimed, capped at the real table (the host reads no further than it needs).
  const size_t bytes = std::max(sizeof(size_t), std::min(claimed, full));
  unsigned char* table = arena.alloc(bytes);
  std::memcpy(table, &claimed, sizeof(size_t));
  const uint32_t present = in.u32();
  const uintptr_t fn = reinterpret_cast<uintptr_t>(&never_called_slot);
  for (size_t slot = 0; sizeof(size_t) + (slot + 1) * sizeof(void*) <= bytes; ++slot)
    if (present & (uint32_t{1} << (slot % 32)))
      std::memcpy(table + sizeof(size_t) + slot * sizeof(void*), &fn, sizeof(void*));
  return table;
}

const cotune_component* make_component(ByteReader& in, Arena& arena, const cotune_component* first) {
  if (in.byte() & 1) return nullptr;
  auto* c = reinterpret_cast<cotune_component*>(arena.alloc(sizeof(cotune_component)));
  c->struct_size = struct_size(in, COTUNE_STRUCT_SIZE(cotune_component, api));
  const uint8_t k = in.byte();
  c->kind = k < 128 ? 1 + k % 4 : static_cast<int8_t>(k);  // mostly known kinds, else anything
  c->capabilities = in.byte();
  c->id = make_string(in, arena, first ? &first->id : nullptr);
  c->name = make_string(in, arena, first ? &first->name : nullptr);
  c->description = make_string(in, arena, nullptr);
  c->version = make_string(in, arena, nullptr);
  c->api = make_table(in, arena, c->kind);
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cotune::core;
  const std::string file = "fuzz-plugin.so";
  if (size == 0) {
    try {
      validate_descriptor(file, nullptr);
      FUZZ_CHECK(false);
    } catch (const UserError&) {
    }
    return 0;
  }
  ByteReader in(data, size);
  Arena arena;
  auto* plugin = reinterpret_cast<cotune_plugin*>(arena.alloc(sizeof(cotune_plugin)));
  plugin->struct_size = struct_size(in, COTUNE_STRUCT_SIZE(cotune_plugin, num_components));
  const uint8_t major = in.byte();
  plugin->abi_major = major < 200 ? COTUNE_ABI_MAJOR : major - 200u;
  plugin->abi_minor = in.byte();
  const uint8_t count = in.byte();
  plugin->num_components = count == 255 ? SIZE_MAX : count == 254 ? 257 : count == 253 ? 256 : count % 5;
  // The list is as long as the count says, up to the host's limit of 256; the first few entries are
  // built from the input, the rest NULL.
  const size_t listed = std::min<size_t>(plugin->num_components, 256);
  if (!(in.byte() & 1)) {
    auto** list = reinterpret_cast<const cotune_component**>(arena.alloc(listed * sizeof(cotune_component*)));
    for (size_t i = 0; i < std::min<size_t>(listed, 4); ++i) list[i] = make_component(in, arena, i ? list[0] : nullptr);
    plugin->components = list;
  }

  std::vector<ComponentInfo> infos;
  try {
    infos = validate_descriptor(file, plugin);
  } catch (const UserError& e) {
    const std::string what = e.what();
    FUZZ_CHECK(what.rfind(file + ": ", 0) == 0 && what.size() > file.size() + 2);
    return 0;
  }
  FUZZ_CHECK(infos.size() == plugin->num_components);
  std::set<std::string> ids;
  for (const ComponentInfo& info : infos) {
    FUZZ_CHECK(!info.id.empty() && !info.name.empty() && !info.version.empty());
    FUZZ_CHECK(ids.insert(info.id).second);
    FUZZ_CHECK(info.kind >= COTUNE_KIND_SPACE && info.kind <= COTUNE_KIND_EXECUTOR);
    FUZZ_CHECK(info.abi_major == COTUNE_ABI_MAJOR && info.file == file);
  }
  return 0;
}
