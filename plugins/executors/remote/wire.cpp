#include "wire.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace cotune_remote {
namespace {
uint32_t read_be32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}

std::string to_hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 0xf];
  }
  return out;
}

std::string hmac_hex(std::string_view key, const std::string& message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len) == nullptr)
    throw std::runtime_error("HMAC-SHA256 failed");
  return to_hex(mac, len);
}
}  // namespace

std::string encode_frame(std::string_view body) {
  const auto n = static_cast<uint32_t>(body.size());
  std::string out;
  out.reserve(4 + body.size());
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
  out.append(body);
  return out;
}

void FrameDecoder::feed(const char* data, size_t n) {
  if (pos_ > 0) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  buffer_.append(data, n);
}

std::optional<std::string> FrameDecoder::next() {
  if (buffer_.size() - pos_ < 4) return std::nullopt;
  const uint32_t n = read_be32(buffer_.data() + pos_);
  if (n == 0) throw std::runtime_error("empty frame from the agent");
  if (n > kMaxFrameBytes) throw std::runtime_error("oversized frame from the agent (" + std::to_string(n) + " bytes)");
  if (buffer_.size() - pos_ - 4 < n) return std::nullopt;
  std::string body = buffer_.substr(pos_ + 4, n);
  pos_ += 4 + n;
  return body;
}

std::string home_expanded(const std::string& path) {
  if (path != "~" && path.rfind("~/", 0) != 0) return path;
  const char* home = std::getenv("HOME");  // NOLINT(concurrency-mt-unsafe): read, never set, by cotune
  if (home == nullptr || home[0] == '\0') throw std::runtime_error("'" + path + "': HOME is not set, so '~' means nothing");
  return std::string(home) + path.substr(1);
}

std::string load_secret_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw std::runtime_error("secret file '" + path + "' cannot be read: " + std::generic_category().message(errno));
  if (!S_ISREG(st.st_mode)) throw std::runtime_error("secret file '" + path + "' is not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw std::runtime_error("secret file '" + path + "' is accessible by group or others (mode " + mode +
                             "); expected mode 0600 or stricter");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string secret = buf.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.size() < 16) throw std::runtime_error("secret file '" + path + "' holds fewer than 16 bytes");
  return secret;
}

std::string random_nonce() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("RAND_bytes failed");
  return to_hex(bytes, sizeof bytes);
}

std::string agent_proof(std::string_view secret, std::string_view client_nonce, std::string_view agent_nonce) {
  std::string msg = "cotune-agent-v1|agent|";
  msg.append(client_nonce).append("|").append(agent_nonce);
  return hmac_hex(secret, msg);
}

std::string client_proof(std::string_view secret, std::string_view client_nonce, std::string_view agent_nonce,
                         int64_t client_time) {
  std::string msg = "cotune-agent-v1|client|";
  msg.append(agent_nonce).append("|").append(client_nonce).append("|").append(std::to_string(client_time));
  return hmac_hex(secret, msg);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace cotune_remote
