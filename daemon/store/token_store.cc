#include "daemon/store/token_store.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>

#include "daemon/core/lease.h"
#include "daemon/store/state_schema.h"

namespace armhive {
namespace {

constexpr std::string_view kPrefix = "ah_";
constexpr size_t kSecretChars = 40;  // 30 random bytes in base64url
constexpr std::string_view kB64Url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

Result<std::string> random_secret() {
  std::array<unsigned char, 30> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return internal_error("OpenSSL RAND_bytes failed");
  }
  std::string out(kPrefix);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out += kB64Url[v >> 18];
    out += kB64Url[(v >> 12) & 63];
    out += kB64Url[(v >> 6) & 63];
    out += kB64Url[v & 63];
  }
  return out;
}

Status check_spec(const TokenSpec& spec) {
  ARMHIVE_RETURN_IF_ERROR(validate_name("name", spec.name));
  if (is_reserved_token_name(spec.name)) {
    return invalid_argument("name", "\"" + spec.name +
                                        "\" is reserved: armhived acts under that name itself "
                                        "(github, armhived and anonymous are); choose another");
  }
  if (spec.max_leases < 0) return invalid_argument("max_leases", "must not be negative");
  if (spec.max_ttl.count() < 0) return invalid_argument("max_ttl", "must not be negative");
  if (spec.dev_max_leases < 0) return invalid_argument("dev_max_leases", "must not be negative");
  if (spec.dev_max_ttl.count() < 0) return invalid_argument("dev_max_ttl", "must not be negative");
  if (spec.dev_max_lifetime.count() < 0) {
    return invalid_argument("dev_max_lifetime", "must not be negative");
  }
  return Status::ok();
}

TokenInfo row_to_info(const SqlRow& r) {
  TokenInfo t;
  t.name = sql_text(r[0]);
  t.role = token_role_from_string(sql_text(r[1])).value_or(TokenRole::kRead);
  t.max_leases = static_cast<int>(sql_int(r[2]));
  t.max_ttl = Seconds(sql_int(r[3]));
  t.created_at = from_unix_ms(sql_int(r[4]));
  if (!sql_is_null(r[5])) t.revoked_at = from_unix_ms(sql_int(r[5]));
  t.dev_max_leases = static_cast<int>(sql_int(r[6]));
  t.dev_max_ttl = Seconds(sql_int(r[7]));
  t.dev_max_lifetime = Seconds(sql_int(r[8]));
  return t;
}

constexpr std::string_view kColumns =
    "name, role, max_leases, max_ttl_s, created_at, revoked_at, dev_max_leases, dev_max_ttl_s, "
    "dev_max_lifetime_s";

const std::vector<std::string> kTokenSteps = {
    "CREATE TABLE tokens ("
    " name TEXT PRIMARY KEY,"
    " hash TEXT NOT NULL UNIQUE,"
    " role TEXT NOT NULL,"
    " max_leases INTEGER NOT NULL DEFAULT 0,"
    " max_ttl_s INTEGER NOT NULL DEFAULT 0,"
    " created_at INTEGER NOT NULL,"
    " revoked_at INTEGER)",
    // Idempotency-Key fingerprints (remember_request): additive, one row per token and key.
    "CREATE TABLE idempotency_keys ("
    " token TEXT NOT NULL,"
    " key TEXT NOT NULL,"
    " fingerprint TEXT NOT NULL,"
    " created_at INTEGER NOT NULL,"
    " PRIMARY KEY (token, key));"
    "CREATE INDEX idempotency_keys_age ON idempotency_keys(created_at)",
    // Developer-lease limits (additive; 0: unlimited).
    "ALTER TABLE tokens ADD COLUMN dev_max_leases INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tokens ADD COLUMN dev_max_ttl_s INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE tokens ADD COLUMN dev_max_lifetime_s INTEGER NOT NULL DEFAULT 0",
    // The key of the Idempotency-Key fingerprints (request_fingerprint_of): one per database,
    // made at the first open (issue 33 finding 9). Fingerprints kept before it are plain
    // SHA-256 and match no keyed one: a retry across the upgrade is 422, never a second lease.
    "CREATE TABLE server_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
};

}  // namespace

std::string_view to_string(TokenRole role) {
  switch (role) {
    case TokenRole::kAdmin:
      return "admin";
    case TokenRole::kCi:
      return "ci";
    case TokenRole::kDev:
      return "dev";
    case TokenRole::kRead:
      return "read";
  }
  return "read";
}

std::optional<TokenRole> token_role_from_string(std::string_view s) {
  if (s == "admin") return TokenRole::kAdmin;
  if (s == "ci") return TokenRole::kCi;
  if (s == "dev") return TokenRole::kDev;
  if (s == "read") return TokenRole::kRead;
  return std::nullopt;
}

namespace {

std::string to_hex(const unsigned char* bytes, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 15];
  }
  return out;
}

}  // namespace

std::string hash_token(std::string_view secret) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  // EVP_Digest cannot fail for SHA-256 on in-memory data short of allocation failure.
  if (EVP_Digest(secret.data(), secret.size(), md.data(), &len, EVP_sha256(), nullptr) != 1) {
    std::abort();
  }
  return to_hex(md.data(), len);
}

bool looks_like_token(std::string_view secret) {
  if (secret.size() != kPrefix.size() + kSecretChars || secret.substr(0, 3) != kPrefix) {
    return false;
  }
  for (char c : secret.substr(3)) {
    if (kB64Url.find(c) == std::string_view::npos) return false;
  }
  return true;
}

bool is_reserved_token_name(std::string_view name) {
  for (std::string_view r : kReservedTokenNames) {
    if (name == r) return true;
  }
  return false;
}

const std::vector<std::string>& token_schema_steps() { return kTokenSteps; }

Result<std::unique_ptr<TokenStore>> TokenStore::open(Database& db, const Clock& clock) {
  ARMHIVE_RETURN_IF_ERROR(db.migrate("tokens", kTokenSteps));
  // The fingerprint key: made once per database (ON CONFLICT DO NOTHING: two processes opening
  // a new database at once agree on the first one written).
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return internal_error("OpenSSL RAND_bytes failed");
  }
  ARMHIVE_RETURN_IF_ERROR(
      db.execute("INSERT INTO server_secrets (name, value) VALUES ('idempotency_fingerprint', ?) "
                 "ON CONFLICT DO NOTHING",
                 {to_hex(bytes.data(), bytes.size())}));
  ARMHIVE_ASSIGN_OR_RETURN(
      auto rows,
      db.query("SELECT value FROM server_secrets WHERE name = 'idempotency_fingerprint'"));
  if (rows.empty()) return internal_error("the idempotency fingerprint key vanished", db.path());
  return std::unique_ptr<TokenStore>(new TokenStore(db, clock, sql_text(rows[0][0])));
}

std::string TokenStore::request_fingerprint_of(std::string_view request) const {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  // HMAC over in-memory data fails only on allocation failure.
  if (HMAC(EVP_sha256(), fingerprint_key_.data(), static_cast<int>(fingerprint_key_.size()),
           reinterpret_cast<const unsigned char*>(request.data()), request.size(), md.data(),
           &len) == nullptr) {
    std::abort();
  }
  return to_hex(md.data(), len);
}

Result<std::string> TokenStore::create(const TokenSpec& spec) {
  ARMHIVE_RETURN_IF_ERROR(check_spec(spec));
  ARMHIVE_ASSIGN_OR_RETURN(std::string secret, random_secret());
  Status s = db_.transaction(
      [&](Database::Tx& tx) -> Status {
        ARMHIVE_ASSIGN_OR_RETURN(auto rows,
                                 tx.query("SELECT 1 FROM tokens WHERE name = ?", {spec.name}));
        if (!rows.empty()) {
          return conflict("a token named \"" + spec.name +
                          "\" exists already (names stay taken after revoke; choose another)");
        }
        return tx.execute(
            "INSERT INTO tokens (name, hash, role, max_leases, max_ttl_s, created_at, "
            "dev_max_leases, "
            "dev_max_ttl_s, dev_max_lifetime_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            {spec.name, hash_token(secret), std::string(to_string(spec.role)),
             int64_t{spec.max_leases}, int64_t{spec.max_ttl.count()}, to_unix_ms(clock_.now()),
             int64_t{spec.dev_max_leases}, int64_t{spec.dev_max_ttl.count()},
             int64_t{spec.dev_max_lifetime.count()}});
      },
      Database::Durability::kFull);
  if (!s.is_ok()) return s;
  return secret;
}

Status TokenStore::put(const TokenSpec& spec, std::string_view secret) {
  ARMHIVE_RETURN_IF_ERROR(check_spec(spec));
  if (!looks_like_token(secret)) {
    return invalid_argument("token",
                            "must be \"ah_\" followed by 40 base64url characters "
                            "(create one with `armhived token create`)");
  }
  return db_.transaction(
      [&](Database::Tx& tx) -> Status {
        // Another name holding the same secret would make authentication ambiguous.
        ARMHIVE_RETURN_IF_ERROR(tx.execute("DELETE FROM tokens WHERE hash = ? AND name != ?",
                                           {hash_token(secret), spec.name}));
        return tx.execute(
            "INSERT INTO tokens (name, hash, role, max_leases, max_ttl_s, created_at, "
            "dev_max_leases, "
            "dev_max_ttl_s, dev_max_lifetime_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET hash = excluded.hash, "
            "role = excluded.role, max_leases = excluded.max_leases, max_ttl_s = "
            "excluded.max_ttl_s, "
            "dev_max_leases = excluded.dev_max_leases, dev_max_ttl_s = excluded.dev_max_ttl_s, "
            "dev_max_lifetime_s = excluded.dev_max_lifetime_s, revoked_at = NULL",
            {spec.name, hash_token(secret), std::string(to_string(spec.role)),
             int64_t{spec.max_leases}, int64_t{spec.max_ttl.count()}, to_unix_ms(clock_.now()),
             int64_t{spec.dev_max_leases}, int64_t{spec.dev_max_ttl.count()},
             int64_t{spec.dev_max_lifetime.count()}});
      },
      Database::Durability::kFull);
}

Result<TokenInfo> TokenStore::authenticate(std::string_view secret) {
  if (!looks_like_token(secret)) {
    return Status(ErrorCode::kUnauthenticated, "invalid or revoked token");
  }
  // Only SHA-256 hashes are stored and looked up: the index lookup compares hashes, never the
  // secret, and the row found is checked again in constant time (CRYPTO_memcmp) so no
  // comparison on the way depends on how much of a guess was right.
  const std::string hash = hash_token(secret);
  ARMHIVE_ASSIGN_OR_RETURN(
      auto rows,
      db_.query("SELECT " + std::string(kColumns) + ", hash FROM tokens WHERE hash = ?", {hash}));
  if (rows.empty()) return Status(ErrorCode::kUnauthenticated, "invalid or revoked token");
  const std::string stored = sql_text(rows[0].back());
  if (stored.size() != hash.size() || CRYPTO_memcmp(stored.data(), hash.data(), hash.size()) != 0) {
    return Status(ErrorCode::kUnauthenticated, "invalid or revoked token");
  }
  TokenInfo t = row_to_info(rows[0]);
  if (t.revoked()) return Status(ErrorCode::kUnauthenticated, "invalid or revoked token");
  // Made before the name was reserved: it would act as armhived's own GitHub runner leases.
  if (is_reserved_token_name(t.name)) {
    return Status(ErrorCode::kUnauthenticated, "invalid or revoked token");
  }
  return t;
}

Status TokenStore::revoke(const std::string& name) {
  return db_.transaction(
      [&](Database::Tx& tx) -> Status {
        ARMHIVE_ASSIGN_OR_RETURN(auto rows,
                                 tx.query("SELECT revoked_at FROM tokens WHERE name = ?", {name}));
        if (rows.empty()) return not_found("no token named \"" + name + "\"");
        if (!sql_is_null(rows[0][0])) return Status::ok();
        return tx.execute("UPDATE tokens SET revoked_at = ? WHERE name = ?",
                          {to_unix_ms(clock_.now()), name});
      },
      Database::Durability::kFull);
}

Result<TokenInfo> TokenStore::get(const std::string& name) {
  ARMHIVE_ASSIGN_OR_RETURN(
      auto rows,
      db_.query("SELECT " + std::string(kColumns) + " FROM tokens WHERE name = ?", {name}));
  if (rows.empty()) return not_found("no token named \"" + name + "\"");
  return row_to_info(rows[0]);
}

Result<std::vector<TokenInfo>> TokenStore::list() {
  ARMHIVE_ASSIGN_OR_RETURN(
      auto rows, db_.query("SELECT " + std::string(kColumns) + " FROM tokens ORDER BY name"));
  std::vector<TokenInfo> out;
  for (const auto& r : rows) out.push_back(row_to_info(r));
  return out;
}

Result<std::string> TokenStore::remember_request(std::string_view token, std::string_view key,
                                                 std::string_view fingerprint) {
  int64_t now = to_unix_ms(clock_.now());
  int64_t oldest =
      now - std::chrono::duration_cast<std::chrono::milliseconds>(kIdempotencyWindow).count();
  std::string stored;
  Status s = db_.transaction([&](Database::Tx& tx) -> Status {
    ARMHIVE_RETURN_IF_ERROR(
        tx.execute("DELETE FROM idempotency_keys WHERE created_at < ?", {oldest}));
    ARMHIVE_RETURN_IF_ERROR(
        tx.execute("INSERT INTO idempotency_keys (token, key, fingerprint, created_at) "
                   "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                   {std::string(token), std::string(key), std::string(fingerprint), now}));
    ARMHIVE_ASSIGN_OR_RETURN(
        auto rows, tx.query("SELECT fingerprint FROM idempotency_keys WHERE token = ? AND key = ?",
                            {std::string(token), std::string(key)}));
    if (rows.empty()) return internal_error("idempotency key row vanished", std::string(key));
    stored = sql_text(rows[0][0]);
    return Status::ok();
  });
  if (!s.is_ok()) return s;
  return stored;
}

Result<std::optional<std::string>> TokenStore::request_fingerprint(std::string_view token,
                                                                   std::string_view key) {
  int64_t oldest =
      to_unix_ms(clock_.now()) -
      std::chrono::duration_cast<std::chrono::milliseconds>(kIdempotencyWindow).count();
  ARMHIVE_ASSIGN_OR_RETURN(
      auto rows, db_.query("SELECT fingerprint FROM idempotency_keys WHERE token = ? AND key = ? "
                           "AND created_at >= ?",
                           {std::string(token), std::string(key), oldest}));
  if (rows.empty()) return std::optional<std::string>();
  return std::optional<std::string>(sql_text(rows[0][0]));
}

}  // namespace armhive
