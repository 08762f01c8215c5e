#include <cotune/core/agent/frame.hpp>

namespace cotune::core::agent {
namespace {
uint32_t read_be32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}
}  // namespace

std::string encode_frame(std::string_view body) {
  if (body.size() > 0xffffffffu) throw FrameError("frame body too large to encode");
  const auto n = static_cast<uint32_t>(body.size());
  std::string out;
  out.reserve(kFrameHeaderBytes + body.size());
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
  out.append(body);
  return out;
}

void FrameDecoder::check_header() const {
  if (buffer_.size() - pos_ < kFrameHeaderBytes) return;
  const uint32_t n = read_be32(buffer_.data() + pos_);
  if (n == 0) throw FrameError("empty frame");
  if (n > max_)
    throw FrameError("frame of " + std::to_string(n) + " bytes exceeds the limit of " +
                     std::to_string(max_) + " bytes");
}

void FrameDecoder::feed(const char* data, size_t n) {
  // Drop consumed bytes first so that the buffer never holds more than one frame plus a read.
  if (pos_ > 0) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  buffer_.append(data, n);
  check_header();
}

std::optional<std::string> FrameDecoder::next() {
  if (buffer_.size() - pos_ < kFrameHeaderBytes) return std::nullopt;
  check_header();
  const uint32_t n = read_be32(buffer_.data() + pos_);
  if (buffer_.size() - pos_ - kFrameHeaderBytes < n) return std::nullopt;
  std::string body = buffer_.substr(pos_ + kFrameHeaderBytes, n);
  pos_ += kFrameHeaderBytes + n;
  check_header();  // the following frame's header, if it is already here
  return body;
}

}  // namespace cotune::core::agent
