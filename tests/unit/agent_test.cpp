// `cotune agent` through real TCP on 127.0.0.1: authentication, framing limits, hostile clients,
// validation against the space, resume after a dropped connection, and graceful shutdown. The
// agent runs the testecho fixture executor over the testgrid fixture space.
#include <gtest/gtest.h>

#include <cotune/core/agent/agent.hpp>
#include <cotune/core/errors.hpp>

#include "support/agent_harness.hpp"
#include "support/cli_process.hpp"

#include <sys/resource.h>

#include <filesystem>

namespace {
namespace fs = std::filesystem;
using namespace cotune::testing;
using cotune::core::UserError;
using cotune::core::agent::AgentOptions;
using nlohmann::json;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

size_t count_substring(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

class AgentTest : public ::testing::Test {
 protected:
  TempDir dir;
  std::string secret_file = write_file(dir.file("secret"), kSecret + "\n");

  AgentOptions options(const std::string& echo = "{}") { return echo_agent_options(secret_file, echo); }
};

TEST_F(AgentTest, SecretFileReadableByOthersIsRefused) {
  write_file(dir.file("open"), kSecret, 0644);
  AgentOptions o = echo_agent_options(dir.file("open"), "{}");
  try {
    cotune::core::agent::AgentServer server(o);
    FAIL() << "expected a refusal";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("accessible by group or others (mode 0644)"), std::string::npos) << e.what();
  }
  write_file(dir.file("short"), "tooshort", 0600);
  EXPECT_THROW(cotune::core::agent::AgentServer(echo_agent_options(dir.file("short"), "{}")), UserError);
  EXPECT_THROW(cotune::core::agent::AgentServer(echo_agent_options(dir.file("missing"), "{}")), UserError);
}

TEST_F(AgentTest, NonLoopbackAddressWithoutTlsIsRefused) {
  AgentOptions o = options();
  o.listen_host = "0.0.0.0";
  try {
    cotune::core::agent::AgentServer server(o);
    FAIL() << "expected a refusal";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("requires TLS"), std::string::npos) << e.what();
  }
}

TEST_F(AgentTest, AuthenticatedClientRunsATrialAndAcknowledgesIt) {
  InProcessAgent agent(options());
  RawClient c(agent.port());
  ASSERT_TRUE(c.handshake(kSecret).welcomed);
  c.send(submit_message("s/1", grid_config(4, 3, "blue", true, 5)));
  auto accepted = c.read_type("accepted");
  ASSERT_TRUE(accepted);
  auto result = c.read_type("result");
  ASSERT_TRUE(result) << agent.log_text();
  EXPECT_EQ((*result)["trial_id"], "s/1");
  EXPECT_EQ((*result)["status"], "ok");
  // testecho: tokens_per_s = 1000 + sum of the configuration values (c=blue is index 2, d=1).
  EXPECT_DOUBLE_EQ((*result)["metrics"]["tokens_per_s"].get<double>(), 1000 + 4 + 3 + 2 + 1 + 5);
  // The agent re-rendered the configuration from its own space.
  EXPECT_EQ((*result)["metrics"]["config"]["c"], "blue");
  c.send({{"type", "ack"}, {"trial_id", "s/1"}});
  c.send({{"type", "attach"}, {"trial_id", "s/1"}});
  auto unknown = c.read_type("unknown");
  ASSERT_TRUE(unknown) << "an acknowledged result must be forgotten";
}

TEST_F(AgentTest, ClientWithWrongSecretIsRefused) {
  InProcessAgent agent(options());
  RawClient c(agent.port());
  auto h = c.handshake("a-different-secret-of-enough-length");
  EXPECT_FALSE(h.welcomed);
  EXPECT_TRUE(c.closed_by_agent());
  EXPECT_TRUE(wait_until([&] { return agent.logged("authentication failed"); }, 2000)) << agent.log_text();
}

TEST_F(AgentTest, AgentProofRevealsAWrongSecretToTheClient) {
  InProcessAgent agent(options());
  RawClient c(agent.port());
  const std::string nonce = cotune::core::agent::random_nonce();
  c.send({{"type", "hello"}, {"client_nonce", nonce}, {"time", std::time(nullptr)}});
  auto challenge = c.read();
  ASSERT_TRUE(challenge);
  const std::string agent_nonce = (*challenge)["agent_nonce"];
  EXPECT_EQ((*challenge)["proof"], cotune::core::agent::agent_proof(kSecret, nonce, agent_nonce));
  EXPECT_NE((*challenge)["proof"], cotune::core::agent::agent_proof("another-secret-0123456789", nonce, agent_nonce));
  // Nothing of the secret itself crossed the wire.
  EXPECT_EQ(challenge->dump().find(kSecret), std::string::npos);
}

TEST_F(AgentTest, ReplayedOrStaleHandshakeIsRefused) {
  InProcessAgent agent(options());
  RawClient first(agent.port());
  auto captured = first.handshake(kSecret);
  ASSERT_TRUE(captured.welcomed);

  // The captured hello again: its nonce was used.
  RawClient replay(agent.port());
  replay.send(captured.hello);
  EXPECT_TRUE(replay.closed_by_agent());
  EXPECT_TRUE(wait_until([&] { return agent.logged("replayed handshake"); }, 2000)) << agent.log_text();

  // A fresh hello followed by the captured proof: the agent's nonce differs, so the proof is wrong.
  RawClient spliced(agent.port());
  spliced.send({{"type", "hello"}, {"client_nonce", cotune::core::agent::random_nonce()}, {"time", captured.hello["time"]}});
  ASSERT_TRUE(spliced.read_type("challenge"));
  spliced.send(captured.auth);
  EXPECT_TRUE(spliced.closed_by_agent());

  // A hello from an hour ago.
  RawClient stale(agent.port());
  EXPECT_FALSE(stale.handshake(kSecret, std::time(nullptr) - 3600).welcomed);
  EXPECT_TRUE(wait_until([&] { return agent.logged("stale handshake"); }, 2000)) << agent.log_text();
}

TEST_F(AgentTest, HostileClientsAreClosedWhileAnotherClientsTrialCompletes) {
  AgentOptions o = options(R"({"delay_ms": 600})");
  o.max_frame_bytes = 4096;
  o.handshake_timeout_ms = 400;
  InProcessAgent agent(o);
  RawClient good(agent.port());
  ASSERT_TRUE(good.handshake(kSecret).welcomed);
  good.send(submit_message("good/1", grid_config()));
  ASSERT_TRUE(good.read_type("accepted"));

  RawClient oversized(agent.port());
  oversized.send_bytes(std::string("\x00\x10\x00\x00", 4));  // announces 1 MiB
  EXPECT_TRUE(oversized.closed_by_agent());

  RawClient truncated(agent.port());
  truncated.send_bytes(std::string("\x00\x00\x00\x64", 4) + "{\"v\":1,");  // 100 announced, 7 sent
  truncated.close();

  RawClient garbage(agent.port());
  garbage.send_bytes(cotune::core::agent::encode_frame("\xff\xfe not json at all \x01"));
  EXPECT_TRUE(garbage.closed_by_agent());

  RawClient slow(agent.port());  // a byte every 100 ms: never finishes its hello in time
  bool closed = false;
  const std::string hello = cotune::core::agent::encode_frame(R"({"v":1,"type":"hello"})");
  for (size_t i = 0; i < hello.size() && !closed; ++i) {
    closed = !slow.send_bytes(hello.substr(i, 1)) || slow.closed_by_agent(100);
  }
  EXPECT_TRUE(closed || slow.closed_by_agent(1000));

  auto result = good.read_type("result", 5000);
  ASSERT_TRUE(result) << agent.log_text();
  EXPECT_EQ((*result)["status"], "ok");
  EXPECT_TRUE(agent.logged("exceeds the limit of 4096 bytes")) << agent.log_text();
  EXPECT_TRUE(agent.logged("malformed frame")) << agent.log_text();
  EXPECT_TRUE(agent.logged("handshake not completed")) << agent.log_text();
}

TEST_F(AgentTest, OutOfOrderAndUnknownFramesCloseTheConnection) {
  InProcessAgent agent(options());
  RawClient early(agent.port());
  early.send(submit_message("x/1", grid_config()));
  EXPECT_TRUE(early.closed_by_agent());
  EXPECT_TRUE(wait_until([&] { return agent.logged("out-of-order frame: expected 'hello'"); }, 2000));

  RawClient version(agent.port());
  version.send({{"v", 99}, {"type", "hello"}});
  EXPECT_TRUE(version.closed_by_agent());

  RawClient unknown(agent.port());
  ASSERT_TRUE(unknown.handshake(kSecret).welcomed);
  unknown.send({{"type", "run-this-shell-command"}, {"trial_id", "x"}});
  EXPECT_TRUE(unknown.closed_by_agent());
  EXPECT_TRUE(wait_until([&] { return agent.logged("unknown message type"); }, 2000));
}

TEST_F(AgentTest, BeforeSignInFramesAreSmall) {
  // 500 connections each announcing a 1 MiB frame held 510 MiB of the agent before any signed in.
  InProcessAgent agent(options());  // 1 MiB frames once signed in
  RawClient early(agent.port());
  early.send_bytes(std::string("\x00\x01\x90\x00", 4));  // announces 100 KiB
  EXPECT_TRUE(early.closed_by_agent());
  EXPECT_TRUE(wait_until([&] { return agent.logged("exceeds the limit of 16384 bytes"); }, 2000)) << agent.log_text();
  // Signed in, a frame of 100 KiB is fine (its content is refused for what it says, not its size).
  RawClient in(agent.port());
  ASSERT_TRUE(in.handshake(kSecret).welcomed);
  nlohmann::json big = {{"type", "ping"}, {"pad", std::string(100 * 1024, 'x')}};
  in.send(big);
  EXPECT_TRUE(in.read_type("pong").has_value()) << agent.log_text();
}

TEST_F(AgentTest, WhatAClientSendsCannotForgeALogLine) {
  InProcessAgent agent(options());
  RawClient c(agent.port());
  c.send({{"type", "x\nFORGED: #9 signed in"}});
  EXPECT_TRUE(c.closed_by_agent());
  ASSERT_TRUE(wait_until([&] { return agent.logged("x\\x0aFORGED"); }, 2000)) << agent.log_text();
  const std::string log = agent.log_text();
  EXPECT_EQ(log.find("\nFORGED"), std::string::npos) << log;
}

TEST_F(AgentTest, ADeeplyNestedFrameClosesOnlyItsConnection) {
  // A signed-in client's submit whose workload is nested 100,000 deep (it crashed the agent: the
  // parsed value was dumped and destroyed recursively). Written as text: building it as a value
  // would recurse here too.
  InProcessAgent agent(options());
  RawClient deep(agent.port());
  ASSERT_TRUE(deep.handshake(kSecret).welcomed);
  std::string body = R"({"v": 1, "type": "submit", "trial_id": "deep/1", "workload": )";
  body += std::string(100000, '[') + std::string(100000, ']') + "}";
  ASSERT_TRUE(deep.send_bytes(cotune::core::agent::encode_frame(body)));
  EXPECT_TRUE(deep.closed_by_agent());
  EXPECT_TRUE(wait_until([&] { return agent.logged("nested deeper than 64 levels"); }, 2000)) << agent.log_text();
  // The agent still serves everyone else.
  RawClient other(agent.port());
  ASSERT_TRUE(other.handshake(kSecret).welcomed);
  other.send({{"type", "ping"}});
  EXPECT_TRUE(other.read_type("pong").has_value());
}

TEST_F(AgentTest, RateLimitClosesAFloodingConnection) {
  AgentOptions o = options();
  o.rate_per_s = 5;
  o.rate_burst = 10;
  InProcessAgent agent(o);
  RawClient flood(agent.port());
  ASSERT_TRUE(flood.handshake(kSecret).welcomed);
  for (int i = 0; i < 40; ++i) flood.send({{"type", "ping"}});
  EXPECT_TRUE(flood.closed_by_agent());
  EXPECT_TRUE(wait_until([&] { return agent.logged("rate limit exceeded"); }, 2000)) << agent.log_text();
}

TEST_F(AgentTest, ValuesOutsideTheSpaceAreRejected) {
  InProcessAgent agent(options());
  RawClient c(agent.port());
  ASSERT_TRUE(c.handshake(kSecret).welcomed);
  struct Case {
    json config;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {grid_config(3), "parameter 'a': value 3 is outside its domain"},
      {grid_config(1, 0, "purple"), "'purple' is not one of its choices"},
      {json{{"a", 1}, {"b", 0}, {"c", "red"}, {"d", false}}, "parameter 'e': missing"},
      {[] { json j = grid_config(); j["command"] = "rm -rf /"; return j; }(), "unknown parameter 'command'"},
      {grid_config(32, 0, "red", false, 12), "a*e must be at most 96"},
      {[] { json j = grid_config(); j["b"] = 1.5; return j; }(), "expected an integer"},
  };
  int n = 0;
  for (const Case& k : cases) {
    const std::string id = "bad/" + std::to_string(n++);
    c.send(submit_message(id, k.config));
    auto m = c.read();
    ASSERT_TRUE(m);
    EXPECT_EQ((*m)["type"], "rejected") << m->dump();
    EXPECT_NE((*m)["reason"].get<std::string>().find(k.reason), std::string::npos) << (*m)["reason"];
  }
  json unknown_space = submit_message("bad/space", grid_config());
  unknown_space["space"] = "no-such-space";
  c.send(unknown_space);
  auto m = c.read();
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)["type"], "rejected");
}

TEST_F(AgentTest, DroppedConnectionLosesNoResult) {
  InProcessAgent agent(options(R"({"delay_ms": 300})"));
  {
    RawClient c(agent.port());
    ASSERT_TRUE(c.handshake(kSecret).welcomed);
    c.send(submit_message("drop/1", grid_config()));
    ASSERT_TRUE(c.read_type("accepted"));
  }  // dropped before the result
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  RawClient again(agent.port());
  ASSERT_TRUE(again.handshake(kSecret).welcomed);
  // A resubmission of a known id does not run it again; it resumes it.
  again.send(submit_message("drop/1", grid_config()));
  auto result = again.read_type("result");
  ASSERT_TRUE(result);
  EXPECT_EQ((*result)["status"], "ok");
  EXPECT_EQ((*result)["attempts"], 1);
}

TEST_F(AgentTest, UnacknowledgedResultsSurviveARestartWithAStateDirectory) {
  AgentOptions o = options();
  o.state_dir = dir.file("state");
  const std::string journal = dir.file("journal");
  o.executor_options = json{{"journal", journal}}.dump();
  {
    InProcessAgent agent(o);
    RawClient c(agent.port());
    ASSERT_TRUE(c.handshake(kSecret).welcomed);
    c.send(submit_message("keep/1", grid_config(2)));
    ASSERT_TRUE(c.read_type("result"));
    c.close();  // never acknowledged
    agent.stop();
  }
  InProcessAgent restarted(o);
  RawClient c(restarted.port());
  ASSERT_TRUE(c.handshake(kSecret).welcomed);
  c.send({{"type", "attach"}, {"trial_id", "keep/1"}});
  auto result = c.read_type("result");
  ASSERT_TRUE(result) << restarted.log_text();
  EXPECT_EQ((*result)["status"], "ok");
  EXPECT_DOUBLE_EQ((*result)["metrics"]["tokens_per_s"].get<double>(), 1000 + 2 + 1);
  EXPECT_EQ(count_lines(journal, "keep/1"), 1u) << "the trial ran once";
}

TEST_F(AgentTest, ShutdownCancelsRunningTrialsWhenAskedTo) {
  AgentOptions o = options(R"({"delay_ms": 30000})");
  o.cancel_on_shutdown = true;
  InProcessAgent agent(o);
  RawClient c(agent.port());
  ASSERT_TRUE(c.handshake(kSecret).welcomed);
  c.send(submit_message("long/1", grid_config()));
  ASSERT_TRUE(c.read_type("accepted"));
  ASSERT_TRUE(c.read_type("status"));
  agent.server().shutdown();
  auto result = c.read_type("result", 5000);
  ASSERT_TRUE(result);
  EXPECT_EQ((*result)["status"], "cancelled");
  c.send({{"type", "ack"}, {"trial_id", "long/1"}});
  agent.stop();
  EXPECT_TRUE(agent.logged("shutting down"));
}

TEST_F(AgentTest, AcknowledgedTrialsLeaveNoFolderBehindUnlessAskedTo) {
  for (bool keep : {false, true}) {
    AgentOptions o = options();
    o.workdir = dir.file(keep ? "work-kept" : "work");
    o.keep_trial_dirs = keep;
    InProcessAgent agent(o);
    RawClient c(agent.port());
    ASSERT_TRUE(c.handshake(kSecret).welcomed);
    c.send(submit_message("dir/1", grid_config()));
    ASSERT_TRUE(c.read_type("result")) << agent.log_text();
    ASSERT_EQ(std::distance(fs::directory_iterator(o.workdir), fs::directory_iterator{}), 1) << "the trial's folder";
    c.send({{"type", "ack"}, {"trial_id", "dir/1"}});
    c.send({{"type", "attach"}, {"trial_id", "dir/1"}});
    ASSERT_TRUE(c.read_type("unknown"));  // the ack was handled
    EXPECT_EQ(std::distance(fs::directory_iterator(o.workdir), fs::directory_iterator{}), keep ? 1 : 0) << keep;
  }
}

TEST_F(AgentTest, HoldsAtMostMaxTrialsUntilResultsAreAcknowledged) {
  AgentOptions o = options();
  o.max_trials = 2;
  InProcessAgent agent(o);
  RawClient c(agent.port());
  ASSERT_TRUE(c.handshake(kSecret).welcomed);
  for (const char* id : {"held/1", "held/2"}) {
    c.send(submit_message(id, grid_config()));
    ASSERT_TRUE(c.read_type("result")) << id;
  }
  c.send(submit_message("held/3", grid_config()));
  auto rejected = c.read_type("rejected");
  ASSERT_TRUE(rejected);
  EXPECT_EQ((*rejected)["retry"], true) << "room comes back with acknowledgements";
  EXPECT_NE((*rejected)["reason"].get<std::string>().find("--max-trials"), std::string::npos) << *rejected;
  // A resubmission of a held trial is still answered.
  c.send(submit_message("held/2", grid_config()));
  ASSERT_TRUE(c.read_type("result"));
  c.send({{"type", "ack"}, {"trial_id", "held/1"}});
  c.send(submit_message("held/3", grid_config()));
  auto result = c.read_type("result");
  ASSERT_TRUE(result);
  EXPECT_EQ((*result)["trial_id"], "held/3");
}

// With its file descriptors used up, the agent waits before accepting again and logs about once a
// second, instead of spinning on accept() with a line per try; it serves again once they free up.
TEST_F(AgentTest, OutOfFileDescriptorsSlowsAcceptInsteadOfSpinning) {
#ifdef __SANITIZE_ADDRESS__
  // UBSan's vptr check probes memory through a pipe: with no descriptor left it cannot, and reports
  // every virtual call as one on a bad object. Out of descriptors is tested in the other builds.
  GTEST_SKIP() << "descriptor exhaustion breaks the sanitizer runtime's own checks";
#endif
  const std::string log = dir.file("agent.log");
  AgentProcess agent({"--listen", "127.0.0.1:0", "--secret-file", secret_file, "--executor", "testecho",
                      "--plugin-dir", kTestPluginDir, "--workdir", dir.file("work")},
                     log, [] {
                       rlimit limit{48, 48};
                       ::setrlimit(RLIMIT_NOFILE, &limit);
                     });
  std::vector<std::unique_ptr<RawClient>> crowd;
  for (int i = 0; i < 80; ++i) crowd.push_back(std::make_unique<RawClient>(agent.port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const size_t failures = count_substring(read_text(log), "accept failed");
  EXPECT_GE(failures, 1u) << read_text(log);
  EXPECT_LE(failures, 5u) << "at most a line a second:\n" << read_text(log);
  crowd.clear();
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    RawClient c(agent.port());
    served = c.handshake(kSecret).welcomed;
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served) << read_text(log);
}

TEST_F(AgentTest, TheCommandRefusesBadLimitsAndStrayWords) {
  ScratchDir scratch("agent-args");
  auto exit_of = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"agent", "--listen", "127.0.0.1:0", "--secret-file", secret_file, "--executor", "sim"};
    args.insert(args.end(), extra.begin(), extra.end());
    return wait_exit_within(spawn_cotune(scratch.path(), args, scratch.file("out"), scratch.file("err")),
                            std::chrono::seconds(20));
  };
  EXPECT_EQ(exit_of({"--max-trials", "-1"}), 2);
  EXPECT_NE(read_text(scratch.file("err")).find("--max-trials must be at least 1, got -1"), std::string::npos)
      << read_text(scratch.file("err"));
  EXPECT_EQ(exit_of({"--max-connections", "-1"}), 2);
  EXPECT_EQ(exit_of({"--keep-trial-dirs", "no"}), 2) << "a stray word is not ignored";
  EXPECT_NE(read_text(scratch.file("err")).find("unexpected argument"), std::string::npos) << read_text(scratch.file("err"));
}

}  // namespace
