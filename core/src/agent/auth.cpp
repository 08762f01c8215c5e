#include <cotune/core/agent/auth.hpp>
#include <cotune/core/errors.hpp>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cotune::core::agent {
namespace {
std::string to_hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 0xf];
  }
  return out;
}
}  // namespace

std::string load_secret_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw UserError("secret file '" + path + "' cannot be read");
  if (!S_ISREG(st.st_mode)) throw UserError("secret file '" + path + "' is not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw UserError("secret file '" + path + "' is accessible by group or others (mode " + mode +
                    "); expected mode 0600 or stricter (chmod 600 '" + path + "')");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("secret file '" + path + "' cannot be opened");
  std::ostringstream buf;
  buf << in.rdbuf();
  std::string secret = buf.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.size() < kMinSecretBytes)
    throw UserError("secret file '" + path + "' holds " + std::to_string(secret.size()) +
                    " bytes; expected at least " + std::to_string(kMinSecretBytes) +
                    " (e.g. openssl rand -hex 32 > '" + path + "')");
  return secret;
}

std::string random_nonce() {
  unsigned char bytes[kNonceBytes];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("RAND_bytes failed");
  return to_hex(bytes, sizeof bytes);
}

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len) == nullptr)
    throw std::runtime_error("HMAC-SHA256 failed");
  return to_hex(mac, len);
}

std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  return to_hex(md, len);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool is_nonce(std::string_view s) {
  if (s.size() != 2 * kNonceBytes) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string agent_proof(std::string_view secret, std::string_view client_nonce,
                        std::string_view agent_nonce) {
  std::string msg = "cotune-agent-v1|agent|";
  msg.append(client_nonce).append("|").append(agent_nonce);
  return hmac_sha256_hex(secret, msg);
}

std::string client_proof(std::string_view secret, std::string_view client_nonce,
                         std::string_view agent_nonce, int64_t client_time) {
  std::string msg = "cotune-agent-v1|client|";
  msg.append(agent_nonce).append("|").append(client_nonce).append("|").append(std::to_string(client_time));
  return hmac_sha256_hex(secret, msg);
}

std::string ReplayGuard::admit(const std::string& client_nonce, int64_t client_time, int64_t now) {
  if (client_time < now - max_skew_s_ || client_time > now + max_skew_s_)
    return "stale handshake: client time " + std::to_string(client_time) + " is more than " +
           std::to_string(max_skew_s_) + " s from the agent's clock " + std::to_string(now);
  // A nonce only needs remembering while a hello carrying it could still pass the time check.
  // Bounded, so a flood of hellos cannot exhaust memory; a replay that outlives its nonce here
  // still fails, because its proof does not cover the agent's fresh nonce.
  constexpr size_t kMaxRemembered = 1 << 16;
  while (!order_.empty() && (order_.front().first < now - 2 * max_skew_s_ || order_.size() >= kMaxRemembered)) {
    seen_.erase(order_.front().second);
    order_.pop_front();
  }
  if (!seen_.insert(client_nonce).second) return "replayed handshake: client nonce already used";
  order_.emplace_back(now, client_nonce);
  return {};
}

}  // namespace cotune::core::agent
