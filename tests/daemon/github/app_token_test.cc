// GitHub App authentication: the RS256 JWT (verified with the key's public half, as GitHub
// does), the access_tokens reply, and the installation token cached until shortly before expiry.
#include "daemon/github/app_token.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "tests/support/manual_clock.h"

namespace armhive {
namespace {

std::string base64url_decode(std::string s) {
  for (char& c : s) c = c == '-' ? '+' : c == '_' ? '/' : c;
  while (s.size() % 4) s += '=';
  std::string out(s.size() * 3 / 4, '\0');
  int n =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  REQUIRE(n >= 0);
  out.resize(static_cast<size_t>(n) - (s.size() - s.find_last_not_of('=') - 1));
  return out;
}

struct TestKey {
  EVP_PKEY* key = EVP_RSA_gen(2048);
  ~TestKey() { EVP_PKEY_free(key); }
  std::string pem() const {
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<size_t>(n));
    BIO_free(bio);
    return out;
  }
  bool verifies(const std::string& input, const std::string& sig) const {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    bool ok =
        EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, key) == 1 &&
        EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                         reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
  }
};

TEST_CASE("github app: the JWT is RS256 over iat/exp/iss and verifies", "[github][app]") {
  TestKey k;
  REQUIRE(k.key != nullptr);
  ManualClock clock;
  auto jwt = github_app_jwt(12345, k.pem(), clock.now());
  REQUIRE(jwt.is_ok());
  size_t d1 = jwt->find('.'), d2 = jwt->rfind('.');
  REQUIRE(d1 != d2);
  auto header = nlohmann::json::parse(base64url_decode(jwt->substr(0, d1)));
  CHECK(header["alg"] == "RS256");
  auto payload = nlohmann::json::parse(base64url_decode(jwt->substr(d1 + 1, d2 - d1 - 1)));
  const int64_t now = to_unix_ms(clock.now()) / 1000;
  CHECK(payload["iss"] == "12345");
  CHECK(payload["iat"] == now - 60);
  CHECK(payload["exp"] == now + 540);                     // within GitHub's 10 minutes
  CHECK(jwt->find_first_of("+/=") == std::string::npos);  // base64url, unpadded
  CHECK(k.verifies(jwt->substr(0, d2), base64url_decode(jwt->substr(d2 + 1))));

  auto bad = github_app_jwt(12345, "-----BEGIN PRIVATE KEY-----\nnope\n", clock.now());
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().field() == "github.app_private_key_file");
  CHECK(github_app_jwt(0, k.pem(), clock.now()).status().field() == "github.app_id");
}

TEST_CASE("github app: access_tokens replies parse strictly", "[github][app]") {
  auto ok = parse_installation_token(R"({"token":"ghs_abc","expires_at":"2026-12-01T17:00:00Z"})");
  REQUIRE(ok.is_ok());
  CHECK(ok->token == "ghs_abc");
  CHECK(to_rfc3339(ok->expires_at) == "2026-12-01T17:00:00.000Z");
  for (const char* bad :
       {R"({"token":"ghs_abc"})", R"({"token":"","expires_at":"2026-12-01T17:00:00Z"})",
        R"({"token":"a b","expires_at":"2026-12-01T17:00:00Z"})",
        R"({"token":"x","expires_at":"tomorrow"})", "[]", "garbage"}) {
    INFO(bad);
    CHECK(parse_installation_token(bad).status().code() == ErrorCode::kUnavailable);
  }
}

TEST_CASE("github app: the installation token is reused until 5 minutes before expiry",
          "[github][app]") {
  ManualClock clock;
  int fetches = 0;
  InstallationTokenCache cache(
      [&]() -> Result<InstallationToken> {
        ++fetches;
        return InstallationToken{"ghs_" + std::to_string(fetches),
                                 clock.now() + std::chrono::hours(1)};
      },
      clock);
  CHECK(*cache.get() == "ghs_1");
  clock.advance(std::chrono::minutes(54));
  CHECK(*cache.get() == "ghs_1");
  CHECK(fetches == 1);
  clock.advance(std::chrono::minutes(1) + std::chrono::seconds(1));  // 4:59 left
  CHECK(*cache.get() == "ghs_2");
  CHECK(fetches == 2);

  InstallationTokenCache failing(
      []() -> Result<InstallationToken> {
        return Status(ErrorCode::kPermissionDenied, "GitHub installation access token: HTTP 401");
      },
      clock);
  CHECK(failing.get().status().code() == ErrorCode::kPermissionDenied);
}

TEST_CASE("github app: new credentials drop the token held and one bought meanwhile is not kept",
          "[github][app][reload]") {
  ManualClock clock;
  int fetches = 0;
  std::function<void()> during_fetch;
  InstallationTokenCache cache(
      [&]() -> Result<InstallationToken> {
        ++fetches;
        if (during_fetch) during_fetch();
        return InstallationToken{"ghs_" + std::to_string(fetches),
                                 clock.now() + std::chrono::hours(1)};
      },
      clock);
  CHECK(*cache.get() == "ghs_1");
  cache.forget();  // a reload changed the key
  CHECK(*cache.get() == "ghs_2");
  CHECK(*cache.get() == "ghs_2");
  // A reload while a token is being bought with the old key: that call uses it, no later one.
  cache.forget();
  during_fetch = [&] { cache.forget(); };
  CHECK(*cache.get() == "ghs_3");
  during_fetch = nullptr;
  CHECK(*cache.get() == "ghs_4");
  CHECK(*cache.get() == "ghs_4");
  CHECK(fetches == 4);
}

}  // namespace
}  // namespace armhive
