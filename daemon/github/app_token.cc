#include "daemon/github/app_token.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <time.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "base/json_depth.h"

namespace armhive {
namespace {

using nlohmann::json;

std::string base64url(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) |
                 (static_cast<uint8_t>(bytes[i + 1]) << 8) | static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i + 1 == bytes.size()) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
  } else if (i + 2 == bytes.size()) {
    uint32_t v = (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
  }
  return out;
}

struct KeyFree {
  void operator()(EVP_PKEY* k) const noexcept { EVP_PKEY_free(k); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const noexcept { EVP_MD_CTX_free(c); }
};
struct BioFree {
  void operator()(BIO* b) const noexcept { BIO_free(b); }
};

Status bad_key(const std::string& why) {
  return invalid_argument("github.app_private_key_file", why);
}

}  // namespace

Result<std::string> github_app_jwt(int64_t app_id, const std::string& private_key_pem,
                                   TimePoint now) {
  if (app_id <= 0) return invalid_argument("github.app_id", "must be positive");
  std::unique_ptr<BIO, BioFree> bio(
      BIO_new_mem_buf(private_key_pem.data(), static_cast<int>(private_key_pem.size())));
  if (!bio) return internal_error("out of memory");
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return bad_key("holds no PEM private key (GitHub's .pem download)");
  if (EVP_PKEY_base_id(key.get()) != EVP_PKEY_RSA) return bad_key("the key must be RSA");
  const int64_t t =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  const std::string signing_input =
      base64url(R"({"alg":"RS256","typ":"JWT"})") + "." +
      base64url(json{{"iat", t - 60}, {"exp", t + 540}, {"iss", std::to_string(app_id)}}.dump());
  std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(EVP_MD_CTX_new());
  size_t len = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSignUpdate(ctx.get(), signing_input.data(), signing_input.size()) != 1 ||
      EVP_DigestSignFinal(ctx.get(), nullptr, &len) != 1) {
    return bad_key("cannot sign with it");
  }
  std::string sig(len, '\0');
  if (EVP_DigestSignFinal(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len) != 1) {
    return bad_key("cannot sign with it");
  }
  sig.resize(len);
  return signing_input + "." + base64url(sig);
}

Result<InstallationToken> parse_installation_token(std::string_view body) {
  // GitHub's reply, from the network: its nesting is bounded like every JSON from outside.
  json j = check_json_depth(body, "body").is_ok() ? json::parse(body, nullptr, false) : json();
  if (!j.is_object() || !j.contains("token") || !j["token"].is_string() ||
      !j.contains("expires_at") || !j["expires_at"].is_string()) {
    return unavailable("GitHub's access_tokens reply lacks token or expires_at");
  }
  InstallationToken out;
  out.token = j["token"].get<std::string>();
  if (out.token.empty() || out.token.size() > 1024 ||
      out.token.find_first_of(" \t\r\n") != std::string::npos) {
    return unavailable("GitHub's installation token is empty, too long or not one word");
  }
  const std::string at = j["expires_at"].get<std::string>();
  std::tm tm{};
  const char* end = strptime(at.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  if (end == nullptr || *end != '\0') {
    return unavailable("GitHub's expires_at is not YYYY-MM-DDTHH:MM:SSZ: " + at.substr(0, 40));
  }
  out.expires_at = std::chrono::system_clock::from_time_t(timegm(&tm));
  return out;
}

Result<std::string> InstallationTokenCache::get() {
  uint64_t generation = 0;
  {
    MutexLock lock(mu_);
    if (!held_.token.empty() && clock_.now() + refresh_before_ < held_.expires_at) {
      return held_.token;
    }
    generation = generation_;
  }
  ARMHIVE_ASSIGN_OR_RETURN(InstallationToken fresh, fetch_());
  if (clock_.now() + refresh_before_ >= fresh.expires_at) {
    return unavailable("GitHub's installation token expires too soon to use");
  }
  MutexLock lock(mu_);
  // Bought with credentials forget() replaced since: this call uses it, none after it.
  if (generation == generation_) held_ = fresh;
  return fresh.token;
}

void InstallationTokenCache::forget() {
  MutexLock lock(mu_);
  ++generation_;
  held_ = InstallationToken{};
}

}  // namespace armhive
