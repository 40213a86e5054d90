#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/core/clock.h"
#include "daemon/store/audit_log.h"  // AuditLog, which most users of tokens need too
#include "daemon/store/database.h"

namespace armhive {

// API bearer tokens. A secret ("ah_" + 40 random base64url characters) is shown once, when it
// is created; the database keeps only its SHA-256 (hex). Names are unique, also after a
// token is revoked (a revoked name stays taken, so the audit log's actors stay unambiguous).
//
// Roles: admin (everything, every lease), ci and dev (create and manage their own leases),
// read (GET only). Quotas: max_leases concurrent non-terminal leases and max_ttl per lease;
// 0 means "no token limit" (the pool's limits still apply).

enum class TokenRole { kAdmin, kCi, kDev, kRead };

std::string_view to_string(TokenRole role);
std::optional<TokenRole> token_role_from_string(std::string_view s);

// Names armhived acts under itself, so no token may carry them: "github" owns every lease the
// GitHub provider makes for a just-in-time runner (a token of that name would see, exec in and
// release them all), "armhived" signs the engine's own audit rows, "anonymous" the refusals of
// requests without a token. create() and put() refuse them (kInvalidArgument naming "name");
// a token made with one before they were reserved never authenticates (is_reserved_token_name
// lets armhived name it at start).
inline constexpr std::string_view kReservedTokenNames[] = {"github", "armhived", "anonymous"};
bool is_reserved_token_name(std::string_view name);

struct TokenSpec {
  std::string name;  // validate_name rules
  TokenRole role = TokenRole::kCi;
  int max_leases = 0;  // 0: unlimited
  Seconds max_ttl{0};  // 0: unlimited (the pool's max_ttl still applies)
  // Developer leases (purpose dev) of this token, besides the limits above (0: unlimited):
  // how many at once, the longest ttl per create or renew, and the hard maximum a renew may
  // extend one to, counted from its creation.
  int dev_max_leases = 0;
  Seconds dev_max_ttl{0};
  Seconds dev_max_lifetime{0};
};

struct TokenInfo {
  std::string name;
  TokenRole role = TokenRole::kRead;
  int max_leases = 0;
  Seconds max_ttl{0};
  int dev_max_leases = 0;  // TokenSpec's developer-lease limits
  Seconds dev_max_ttl{0};
  Seconds dev_max_lifetime{0};
  TimePoint created_at;
  std::optional<TimePoint> revoked_at;
  bool revoked() const { return revoked_at.has_value(); }
};

// SHA-256 of the secret as lower-case hex (OpenSSL EVP).
std::string hash_token(std::string_view secret);
// Whether `secret` looks like one of ours ("ah_" + 40 base64url characters).
bool looks_like_token(std::string_view secret);

// How long an Idempotency-Key's request fingerprint is kept (api/openapi.yaml says the same).
inline constexpr std::chrono::hours kIdempotencyWindow{24};

// Owns nothing but a reference to the Database (which must outlive it) and the Clock.
// Threading: thread-safe (every call is one Database statement or transaction).
class TokenStore {
 public:
  // Applies the "tokens" schema migrations.
  static Result<std::unique_ptr<TokenStore>> open(Database& db, const Clock& clock);

  // Returns the new secret. kConflict when the name is taken; kInvalidArgument for a bad
  // name, negative quota or TTL. create, put and revoke commit with synchronous=FULL
  // (Database::Durability::kFull): a power cut must not bring back a revoked token.
  Result<std::string> create(const TokenSpec& spec);
  // Creates or replaces the token `spec.name` with a secret chosen elsewhere (the bootstrap
  // admin token from a file or the environment); un-revokes it. kInvalidArgument when the
  // secret does not look like a token.
  Status put(const TokenSpec& spec, std::string_view secret);
  // kUnauthenticated for an unknown or revoked secret, or a token with a reserved name (the
  // message does not say which).
  Result<TokenInfo> authenticate(std::string_view secret);
  // kNotFound for an unknown name; revoking twice is ok.
  Status revoke(const std::string& name);
  Result<TokenInfo> get(const std::string& name);
  Result<std::vector<TokenInfo>> list();  // by name

  // The request fingerprint kept for (token, Idempotency-Key): stores `fingerprint` when the
  // key is new (or older than kIdempotencyWindow, whose rows are dropped) and returns the
  // fingerprint of the key's first request either way. A caller compares the two: different
  // means the key was reused with another request (422 in the API). Atomic per key.
  Result<std::string> remember_request(std::string_view token, std::string_view key,
                                       std::string_view fingerprint);
  // The fingerprint of a request (its canonical bytes) as remember_request() keeps it:
  // HMAC-SHA256 under this database's own random key (table server_secrets), so a kept
  // fingerprint is not the SHA-256 of a body that carries secret startup values, cannot be
  // checked against a guessed body without the key, and differs between databases.
  std::string request_fingerprint_of(std::string_view request) const;
  // The fingerprint kept for (token, key) within the window; empty when there is none.
  Result<std::optional<std::string>> request_fingerprint(std::string_view token,
                                                         std::string_view key);

 private:
  TokenStore(Database& db, const Clock& clock, std::string fingerprint_key)
      : db_(db), clock_(clock), fingerprint_key_(std::move(fingerprint_key)) {}
  Database& db_;
  const Clock& clock_;
  const std::string fingerprint_key_;  // set once in open()
};

}  // namespace armhive
