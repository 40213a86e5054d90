#include "daemon/github/webhook_signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>
#include <cstdlib>

namespace armhive {

namespace {

constexpr std::string_view kPrefix = "sha256=";
constexpr const char* kHeader = "X-Hub-Signature-256";

std::array<unsigned char, 32> hmac_sha256(std::string_view secret, std::string_view body) {
  std::array<unsigned char, 32> md{};
  unsigned int len = 0;
  // HMAC over in-memory data fails only on allocation failure.
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(body.data()), body.size(), md.data(),
           &len) == nullptr ||
      len != md.size()) {
    std::abort();
  }
  return md;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string webhook_signature(std::string_view secret, std::string_view body) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(kPrefix);
  for (unsigned char b : hmac_sha256(secret, body)) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

Status verify_webhook_signature(std::string_view secret, std::string_view body,
                                std::string_view header) {
  auto refuse = [](const std::string& why) {
    return Status(ErrorCode::kUnauthenticated, why, {}, kHeader);
  };
  if (secret.empty()) return refuse("no webhook secret is configured");
  if (header.empty()) return refuse("the delivery is not signed (no X-Hub-Signature-256)");
  if (header.substr(0, kPrefix.size()) != kPrefix || header.size() != kPrefix.size() + 64) {
    return refuse("X-Hub-Signature-256 must be sha256= and 64 hex digits");
  }
  std::array<unsigned char, 32> given{};
  for (size_t i = 0; i < given.size(); ++i) {
    int hi = hex_value(header[kPrefix.size() + 2 * i]);
    int lo = hex_value(header[kPrefix.size() + 2 * i + 1]);
    if (hi < 0 || lo < 0) return refuse("X-Hub-Signature-256 must be sha256= and 64 hex digits");
    given[i] = static_cast<unsigned char>(hi << 4 | lo);
  }
  const auto want = hmac_sha256(secret, body);
  if (CRYPTO_memcmp(given.data(), want.data(), want.size()) != 0) {
    return refuse("the signature does not match the body under the configured secret");
  }
  return Status::ok();
}

}  // namespace armhive
