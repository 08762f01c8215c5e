// Authentication of the agent protocol: a shared secret read from a private file, and a mutual
// challenge-response over fresh nonces from both sides (HMAC-SHA256), so the secret never crosses
// the wire. docs/remote-protocol.md gives the exact messages.
#ifndef COTUNE_CORE_AGENT_AUTH_HPP_
#define COTUNE_CORE_AGENT_AUTH_HPP_

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>

namespace cotune::core::agent {

constexpr size_t kMinSecretBytes = 16;
constexpr size_t kNonceBytes = 32;

// Reads the shared secret (trailing newlines dropped). Throws UserError when the file is missing,
// readable or writable by group or others, or shorter than kMinSecretBytes.
std::string load_secret_file(const std::string& path);

// kNonceBytes of cryptographic randomness as lowercase hex.
std::string random_nonce();
std::string hmac_sha256_hex(std::string_view key, std::string_view message);
std::string sha256_hex(std::string_view data);
bool constant_time_equal(std::string_view a, std::string_view b);
// True when `s` is kNonceBytes as lowercase hex.
bool is_nonce(std::string_view s);

// The agent proves it knows the secret by MACing both nonces; the client then does the same over
// the agent's nonce and its timestamp. The role labels stop a proof from being reflected.
std::string agent_proof(std::string_view secret, std::string_view client_nonce,
                        std::string_view agent_nonce);
std::string client_proof(std::string_view secret, std::string_view client_nonce,
                         std::string_view agent_nonce, int64_t client_time);

// Refuses handshakes whose timestamp is further than `max_skew_s` from now, and client nonces seen
// before within the window in which a timestamp stays acceptable.
class ReplayGuard {
 public:
  explicit ReplayGuard(int64_t max_skew_s = 300) : max_skew_s_(max_skew_s) {}
  // Empty when the hello is fresh (and records its nonce), else why it is refused.
  std::string admit(const std::string& client_nonce, int64_t client_time, int64_t now);

 private:
  int64_t max_skew_s_;
  std::deque<std::pair<int64_t, std::string>> order_;  // (time seen, nonce), oldest first
  std::unordered_set<std::string> seen_;
};

}  // namespace cotune::core::agent

#endif  // COTUNE_CORE_AGENT_AUTH_HPP_
