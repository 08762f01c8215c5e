// A seeded random-frame harness for the agent's frame decoder and message handler, run for a fixed
// number of iterations: random byte streams cut at random points, and random mutations of valid
// protocol messages fed to authenticated and unauthenticated sessions. Nothing may crash or throw
// out of the handler; every frame the decoder yields respects the size limit.
#include <gtest/gtest.h>

#include <cotune/core/agent/auth.hpp>
#include <cotune/core/agent/frame.hpp>
#include <cotune/core/registry.hpp>

#include "agent/session.hpp"
#include "agent/trial_book.hpp"
#include "support/agent_harness.hpp"

#include <random>

namespace {
using namespace cotune::core::agent;
using nlohmann::json;

TEST(AgentFuzz, FrameDecoderSurvivesRandomStreams) {
  std::mt19937_64 rng(20240611);
  constexpr size_t kLimit = 4096;
  size_t frames = 0, errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    FrameDecoder decoder(kLimit);
    std::string stream;
    const int parts = 1 + static_cast<int>(rng() % 6);
    for (int p = 0; p < parts; ++p) {
      if (rng() % 3 == 0) {
        std::string body(1 + rng() % 300, '\0');
        for (char& c : body) c = static_cast<char>(rng());
        stream += encode_frame(body);
      } else {
        std::string junk(rng() % 64, '\0');
        for (char& c : junk) c = static_cast<char>(rng());
        stream += junk;
      }
    }
    try {
      size_t at = 0;
      while (at < stream.size()) {
        const size_t n = std::min(stream.size() - at, size_t{1} + rng() % 97);
        decoder.feed(stream.data() + at, n);
        at += n;
        while (auto body = decoder.next()) {
          ASSERT_LE(body->size(), kLimit);
          ASSERT_FALSE(body->empty());
          ++frames;
        }
      }
    } catch (const FrameError&) {
      ++errors;
    }
  }
  EXPECT_GT(frames, 0u);
  EXPECT_GT(errors, 0u);
}

class SessionFuzz : public ::testing::Test {
 protected:
  cotune::core::Registry registry;
  std::unique_ptr<TrialBook> book;
  SessionContext context;
  cotune::testing::TempDir dir;

  void SetUp() override {
    ASSERT_TRUE(registry.load_file(cotune::testing::kTestPluginDir + "/libcotune-executor-testecho.so"));
    ASSERT_TRUE(registry.load_file(cotune::testing::kTestPluginDir + "/libcotune-space-testgrid.so"));
    TrialBook::Options o;
    o.max_parallel = 4;
    o.workdir = dir.path();
    book = std::make_unique<TrialBook>(registry, registry.make_executor("testecho", "{}"), o, [](const std::string&) {});
    context.secret = cotune::testing::kSecret;
    context.agent_name = "fuzz";
    context.trials = book.get();
    context.now_s = [] { return static_cast<int64_t>(std::time(nullptr)); };
  }
};

// Random JSON values of small depth.
json random_value(std::mt19937_64& rng, int depth = 0) {
  switch (rng() % (depth > 2 ? 5 : 7)) {
    case 0: return nullptr;
    case 1: return rng() % 2 == 0;
    case 2: return static_cast<int64_t>(rng() % 200) - 100;
    case 3: return std::ldexp(static_cast<double>(rng() % 1000), static_cast<int>(rng() % 80) - 40);
    case 4: {
      std::string s(rng() % 12, 'a');
      for (char& c : s) c = static_cast<char>('0' + rng() % 75);
      return s;
    }
    case 5: {
      json a = json::array();
      for (size_t i = rng() % 4; i > 0; --i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (size_t i = rng() % 4; i > 0; --i) o["k" + std::to_string(rng() % 5)] = random_value(rng, depth + 1);
      return o;
    }
  }
}

// A valid message of a random type, then (usually) mutated.
json random_message(std::mt19937_64& rng) {
  static const char* ids[] = {"f/1", "f/2", "f/3"};
  const std::string id = ids[rng() % 3];
  json m;
  switch (rng() % 6) {
    case 0: m = cotune::testing::submit_message(id, cotune::testing::grid_config(1 << (rng() % 6), rng() % 21)); break;
    case 1: m = {{"type", "attach"}, {"trial_id", id}}; break;
    case 2: m = {{"type", "cancel"}, {"trial_id", id}}; break;
    case 3: m = {{"type", "ack"}, {"trial_id", id}}; break;
    case 4: m = {{"type", "ping"}}; break;
    default: m = {{"type", "hello"}, {"client_nonce", random_nonce()}, {"time", std::time(nullptr)}}; break;
  }
  m["v"] = 1;
  const int mutations = static_cast<int>(rng() % 3);
  for (int i = 0; i < mutations; ++i) {
    static const char* fields[] = {"v", "type", "trial_id", "space", "workload", "config", "client_nonce", "time"};
    const char* f = fields[rng() % 8];
    if (rng() % 3 == 0)
      m.erase(f);
    else
      m[f] = random_value(rng);
    if (m.contains("config") && m["config"].is_object() && rng() % 2 == 0)
      m["config"][std::string(1, static_cast<char>('a' + rng() % 6))] = random_value(rng);
  }
  return m;
}

TEST_F(SessionFuzz, HandlerSurvivesRandomMessages) {
  std::mt19937_64 rng(77);
  size_t closed = 0, handled = 0;
  for (int s = 0; s < 4000; ++s) {
    std::vector<json> replies;
    Session session(context, 1000 + s, [&](const json& m) { replies.push_back(m); });
    // Half the sessions authenticate properly first, so the request handler gets fuzzed too.
    if (s % 2 == 0) {
      const std::string nonce = random_nonce();
      const int64_t now = std::time(nullptr);
      ASSERT_FALSE(session.handle(json{{"v", 1}, {"type", "hello"}, {"client_nonce", nonce}, {"time", now}}.dump()));
      const std::string agent_nonce = replies.back()["agent_nonce"];
      ASSERT_FALSE(session.handle(
          json{{"v", 1}, {"type", "auth"}, {"proof", client_proof(context.secret, nonce, agent_nonce, now)}}.dump()));
      ASSERT_TRUE(session.authenticated());
    }
    for (int i = 0; i < 60; ++i) {
      std::string body;
      if (rng() % 10 == 0) {
        body.resize(1 + rng() % 40);
        for (char& c : body) c = static_cast<char>(rng());
      } else {
        body = random_message(rng).dump();
      }
      std::optional<std::string> reason;
      ASSERT_NO_THROW(reason = session.handle(body)) << body;
      ++handled;
      if (reason) {
        EXPECT_FALSE(reason->empty());
        ++closed;
        break;
      }
      if (i % 7 == 0) book->tick();
    }
    for (const json& r : replies) ASSERT_EQ(r["v"], 1);
  }
  book->tick();
  EXPECT_GT(closed, 0u);
  EXPECT_GT(handled, 5000u);
}

}  // namespace
