// Length-prefixed frames of the agent protocol (docs/remote-protocol.md): a 4-byte big-endian body
// length, then that many bytes of UTF-8 JSON. The decoder is incremental, so a frame may arrive in
// any number of pieces, and refuses a frame longer than its limit before buffering it.
#ifndef COTUNE_CORE_AGENT_FRAME_HPP_
#define COTUNE_CORE_AGENT_FRAME_HPP_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cotune::core::agent {

constexpr int kProtocolVersion = 1;
constexpr size_t kFrameHeaderBytes = 4;
constexpr size_t kDefaultMaxFrameBytes = size_t{1} << 20;

// A frame that breaks the framing rules (empty or oversized). The connection must close.
class FrameError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The header and body of one frame, ready to write.
std::string encode_frame(std::string_view body);

class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame_bytes = kDefaultMaxFrameBytes) : max_(max_frame_bytes) {}

  // Appends received bytes. Throws FrameError as soon as a header announces an empty frame or one
  // longer than the limit.
  void feed(const char* data, size_t n);
  // The next complete frame body, if one is buffered.
  std::optional<std::string> next();
  // True while part of a frame (header or body) has arrived but not all of it.
  bool mid_frame() const { return pos_ < buffer_.size(); }
  // A new limit for the frames still to come (the agent raises it once a client has signed in).
  void set_limit(size_t max_frame_bytes) { max_ = max_frame_bytes; }

 private:
  void check_header() const;
  size_t max_;
  std::string buffer_;
  size_t pos_ = 0;  // start of the first unconsumed byte
};

}  // namespace cotune::core::agent

#endif  // COTUNE_CORE_AGENT_FRAME_HPP_
