#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/core/clock.h"

namespace armhive {

// GitHub App authentication (docs.github.com, "Authenticating as a GitHub App installation"):
// the App's private key signs a short JWT (RS256), which buys an installation access token
//   POST {api}/app/installations/{installation_id}/access_tokens
//        Authorization: Bearer <JWT>  ->  201 {"token": "ghs_...", "expires_at": RFC 3339, ...}
// that the REST calls then use like a fine-grained token. Tokens live an hour.

// The JWT: header {"alg":"RS256","typ":"JWT"}, payload {"iat": now-60s (clock drift, as GitHub
// recommends), "exp": now+9min (GitHub's limit is 10), "iss": app_id}, signed with the PEM RSA
// private key through OpenSSL EVP. kInvalidArgument naming github.app_private_key_file when the
// key does not parse or is not RSA. The key and the JWT are secrets. Any thread.
Result<std::string> github_app_jwt(int64_t app_id, const std::string& private_key_pem,
                                   TimePoint now);

struct InstallationToken {
  std::string token;  // a secret
  TimePoint expires_at;
};

// The 201 body of access_tokens: a non-empty one-line "token" and an "expires_at" of the form
// YYYY-MM-DDTHH:MM:SSZ; kUnavailable naming what is missing otherwise.
Result<InstallationToken> parse_installation_token(std::string_view body);

// The installation token, fetched when there is none or the one held expires within
// `refresh_before` (5 min), else the cached one. `fetch` does the POST; it runs without the
// lock held (two callers may both fetch once at expiry; either token is valid).
// Threading: get() from any thread.
class InstallationTokenCache {
 public:
  using Fetch = std::function<Result<InstallationToken>()>;
  InstallationTokenCache(Fetch fetch, const Clock& clock,
                         std::chrono::seconds refresh_before = std::chrono::minutes(5))
      : fetch_(std::move(fetch)), clock_(clock), refresh_before_(refresh_before) {}

  Result<std::string> get() EXCLUDES(mu_);
  // Drops the token held (new credentials): the next get() fetches. A fetch under way when
  // this is called does not store its token.
  void forget() EXCLUDES(mu_);

 private:
  const Fetch fetch_;
  const Clock& clock_;
  const std::chrono::seconds refresh_before_;
  Mutex mu_;
  InstallationToken held_ GUARDED_BY(mu_);
  uint64_t generation_ GUARDED_BY(mu_) = 0;  // forget() calls so far
};

}  // namespace armhive
