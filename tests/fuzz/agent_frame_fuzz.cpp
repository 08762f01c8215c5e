// Fuzz target: the agent's frame decoder and message handler, as a connection sees them. The
// input's first byte chooses whether the session authenticates first (so that requests reach the
// trial book) and how the rest is cut into reads; the rest is the byte stream a client sends.
// Frames must respect the limit, the handler must never throw, every reply carries the protocol
// version, and a refusal comes with a reason. tests/unit/agent_fuzz_test.cpp is the seeded-random
// counterpart of this target.
#include <cotune/core/agent/auth.hpp>
#include <cotune/core/agent/frame.hpp>
#include <cotune/core/registry.hpp>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/session.hpp"
#include "agent/trial_book.hpp"
#include "fuzz/byte_reader.hpp"
#include "fuzz/fuzz_check.hpp"

namespace {

using namespace cotune::core;
using namespace cotune::core::agent;
using nlohmann::json;

constexpr size_t kFrameLimit = 4096;
const char* const kSecret = "0123456789abcdef0123456789abcdef";

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    reg.load_file(COTUNE_BINARY_DIR "/lib/cotune/test-plugins/libcotune-executor-testecho.so");
    reg.load_file(COTUNE_BINARY_DIR "/lib/cotune/test-plugins/libcotune-space-testgrid.so");
    return reg;
  }();
  return r;
}

// The trial books' folder, removed when the process exits normally.
struct ScratchFolder {
  std::string path = "/tmp/cotune-fuzz-agent-XXXXXX";
  ScratchFolder() {
    if (::mkdtemp(path.data()) == nullptr) std::abort();
  }
  ~ScratchFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
};

const std::string& workdir() {
  static const ScratchFolder dir;
  return dir.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cotune::fuzz::ByteReader in(data, size);
  const uint8_t mode = in.byte();
  const std::string stream = in.rest();

  // A fresh trial book per input, so that one input's trials do not change the next one's run.
  TrialBook::Options options;
  options.max_parallel = 2;
  options.workdir = workdir();
  TrialBook book(registry(), registry().make_executor("testecho", "{}"), options, [](const std::string&) {});
  SessionContext context;
  context.secret = kSecret;
  context.agent_name = "fuzz";
  context.trials = &book;
  context.now_s = [] { return static_cast<int64_t>(std::time(nullptr)); };

  std::vector<json> replies;
  Session session(context, 1, [&](const json& m) { replies.push_back(m); });
  if (mode & 1) {
    const std::string nonce = random_nonce();
    const int64_t now = context.now_s();
    FUZZ_CHECK(!session.handle(json{{"v", 1}, {"type", "hello"}, {"client_nonce", nonce}, {"time", now}}.dump()));
    const std::string agent_nonce = replies.back().at("agent_nonce");
    FUZZ_CHECK(!session.handle(
        json{{"v", 1}, {"type", "auth"}, {"proof", client_proof(kSecret, nonce, agent_nonce, now)}}.dump()));
    FUZZ_CHECK(session.authenticated());
  }

  // Reads of 1..32 bytes (mode's upper bits pick the step), as a socket might deliver them.
  const size_t step = 1 + (mode >> 3);
  FrameDecoder decoder(kFrameLimit);
  try {
    for (size_t at = 0; at < stream.size(); at += step) {
      decoder.feed(stream.data() + at, std::min(step, stream.size() - at));
      while (std::optional<std::string> body = decoder.next()) {
        FUZZ_CHECK(!body->empty() && body->size() <= kFrameLimit);
        const std::optional<std::string> reason = session.handle(*body);
        book.tick();
        if (reason) {
          FUZZ_CHECK(!reason->empty());
          at = stream.size();
          break;
        }
      }
    }
  } catch (const FrameError& e) {
    FUZZ_CHECK(e.what()[0] != '\0');
  }
  book.cancel_all();
  for (const json& r : replies) FUZZ_CHECK(r.is_object() && r.value("v", 0) == 1);
  return 0;
}
