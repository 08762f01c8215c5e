// The client's side of the agent protocol's framing and authentication (docs/remote-protocol.md).
// The agent's side lives in the host (core/src/agent); tests run the two against each other.
#ifndef COTUNE_REMOTE_WIRE_HPP_
#define COTUNE_REMOTE_WIRE_HPP_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cotune_remote {

constexpr int kProtocolVersion = 1;
constexpr size_t kMaxFrameBytes = size_t{16} << 20;  // what the client accepts from an agent

std::string encode_frame(std::string_view body);

// Incremental decoder; throws std::runtime_error on an empty or oversized frame.
class FrameDecoder {
 public:
  void feed(const char* data, size_t n);
  std::optional<std::string> next();

 private:
  std::string buffer_;
  size_t pos_ = 0;
};

// The shared secret; throws std::runtime_error when the file is missing, accessible by group or
// others, or shorter than 16 bytes.
std::string load_secret_file(const std::string& path);
// A path as a shell would read it in a study file: a leading "~/" is $HOME's ("~/.cotune/secret");
// any other path is as given (a relative one from the directory cotune runs in).
std::string home_expanded(const std::string& path);
std::string random_nonce();  // 32 random bytes as hex
std::string agent_proof(std::string_view secret, std::string_view client_nonce, std::string_view agent_nonce);
std::string client_proof(std::string_view secret, std::string_view client_nonce, std::string_view agent_nonce,
                         int64_t client_time);
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace cotune_remote

#endif  // COTUNE_REMOTE_WIRE_HPP_
