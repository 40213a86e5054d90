#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <vector>

#include "daemon/store/token_store.h"
#include "tests/support/store_backends.h"

namespace armhive {
namespace {

class FixedClock final : public Clock {
 public:
  TimePoint now() const override { return from_unix_ms(1'700'000'000'000); }
};

TEST_CASE("tokens: created secrets authenticate, are stored only as hashes", "[store][tokens]") {
  FixedClock clock;
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  std::string secret;
  {
    auto db = (*backend)->open();
    REQUIRE(db.is_ok());
    auto store = TokenStore::open(**db, clock);
    REQUIRE(store.is_ok());
    auto created = (*store)->create({"gitlab-runner", TokenRole::kCi, 4, Seconds(4 * 3600)});
    REQUIRE(created.is_ok());
    secret = *created;
    CHECK(secret.rfind("ah_", 0) == 0);
    CHECK(looks_like_token(secret));

    // The secret itself is nowhere in the database.
    auto rows = (*db)->query("SELECT hash FROM tokens WHERE name = 'gitlab-runner'");
    REQUIRE(rows.is_ok());
    REQUIRE(rows->size() == 1);
    CHECK(sql_text((*rows)[0][0]) == hash_token(secret));
    CHECK(sql_text((*rows)[0][0]) != secret);
    CHECK(sql_text((*rows)[0][0]).size() == 64);
  }
  // Reopening keeps the token.
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto store = TokenStore::open(**db, clock);
  REQUIRE(store.is_ok());
  auto who = (*store)->authenticate(secret);
  REQUIRE(who.is_ok());
  CHECK(who->name == "gitlab-runner");
  CHECK(who->role == TokenRole::kCi);
  CHECK(who->max_leases == 4);
  CHECK(who->max_ttl == Seconds(4 * 3600));
  CHECK(who->created_at == clock.now());
}

TEST_CASE("tokens: unknown, malformed and revoked secrets are unauthenticated", "[store][tokens]") {
  FixedClock clock;
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto store = TokenStore::open(**db, clock);
  REQUIRE(store.is_ok());
  auto secret = (*store)->create({"dev-alice", TokenRole::kDev, 0, Seconds(0)});
  REQUIRE(secret.is_ok());

  CHECK((*store)->authenticate("").status().code() == ErrorCode::kUnauthenticated);
  CHECK((*store)->authenticate("Bearer x").status().code() == ErrorCode::kUnauthenticated);
  std::string other = *secret;
  other.back() = other.back() == 'A' ? 'B' : 'A';
  CHECK((*store)->authenticate(other).status().code() == ErrorCode::kUnauthenticated);

  REQUIRE((*store)->revoke("dev-alice").is_ok());
  CHECK((*store)->revoke("dev-alice").is_ok());  // twice is fine
  CHECK((*store)->authenticate(*secret).status().code() == ErrorCode::kUnauthenticated);
  CHECK((*store)->revoke("nobody").code() == ErrorCode::kNotFound);

  auto all = (*store)->list();
  REQUIRE(all.is_ok());
  REQUIRE(all->size() == 1);
  CHECK((*all)[0].revoked());
}

TEST_CASE("tokens: names are unique and validated, secrets differ", "[store][tokens]") {
  FixedClock clock;
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto store = TokenStore::open(**db, clock);
  REQUIRE(store.is_ok());
  REQUIRE((*store)->create({"ci", TokenRole::kCi, 0, Seconds(0)}).is_ok());
  CHECK((*store)->create({"ci", TokenRole::kRead, 0, Seconds(0)}).status().code() ==
        ErrorCode::kConflict);
  auto bad = (*store)->create({"Bad Name", TokenRole::kCi, 0, Seconds(0)});
  CHECK(bad.status().code() == ErrorCode::kInvalidArgument);
  CHECK(bad.status().field() == "name");
  CHECK((*store)->create({"neg", TokenRole::kCi, -1, Seconds(0)}).status().field() == "max_leases");

  std::set<std::string> secrets;
  for (int i = 0; i < 20; ++i) {
    auto s = (*store)->create({"t" + std::to_string(i), TokenRole::kRead, 0, Seconds(0)});
    REQUIRE(s.is_ok());
    secrets.insert(*s);
  }
  CHECK(secrets.size() == 20);
}

TEST_CASE("tokens: a bootstrap secret can be put and replaces the old one", "[store][tokens]") {
  FixedClock clock;
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto store = TokenStore::open(**db, clock);
  REQUIRE(store.is_ok());
  std::string first = "ah_" + std::string(40, 'a');
  std::string second = "ah_" + std::string(40, 'b');
  CHECK((*store)->put({"admin", TokenRole::kAdmin, 0, Seconds(0)}, "short").code() ==
        ErrorCode::kInvalidArgument);
  REQUIRE((*store)->put({"admin", TokenRole::kAdmin, 0, Seconds(0)}, first).is_ok());
  REQUIRE((*store)->authenticate(first).is_ok());
  REQUIRE((*store)->revoke("admin").is_ok());
  REQUIRE((*store)->put({"admin", TokenRole::kAdmin, 0, Seconds(0)}, second).is_ok());
  CHECK((*store)->authenticate(first).status().code() == ErrorCode::kUnauthenticated);
  auto who = (*store)->authenticate(second);
  REQUIRE(who.is_ok());
  CHECK(who->role == TokenRole::kAdmin);
}

TEST_CASE("audit log records lease actions with the actor, newest first", "[store][audit]") {
  FixedClock clock;
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto audit = AuditLog::open(**db, clock);
  REQUIRE(audit.is_ok());
  REQUIRE((*audit)->record("ci", "lease.create", "l-1", "pool=tiny").is_ok());
  REQUIRE((*audit)->record("alice", "lease.release", "l-2").is_ok());
  REQUIRE((*audit)->record("ci", "lease.release", "l-1").is_ok());
  auto all = (*audit)->recent(10);
  REQUIRE(all.is_ok());
  REQUIRE(all->size() == 3);
  CHECK((*all)[0].action == "lease.release");
  CHECK((*all)[0].actor == "ci");
  CHECK((*all)[2].detail == "pool=tiny");
  auto one = (*audit)->recent(10, "l-2");
  REQUIRE(one.is_ok());
  REQUIRE(one->size() == 1);
  CHECK((*one)[0].actor == "alice");
  // Opening again (a second daemon start) does not fail on the existing table.
  CHECK(AuditLog::open(**db, clock).is_ok());
}

}  // namespace
}  // namespace armhive

namespace armhive {
namespace {

class SettableClock final : public Clock {
 public:
  TimePoint now() const override { return at; }
  TimePoint at = from_unix_ms(1'700'000'000'000);
};

TEST_CASE("tokens: an Idempotency-Key keeps its first request's fingerprint for the window",
          "[store][tokens]") {
  SettableClock clock;
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto store = TokenStore::open(**db, clock);
  REQUIRE(store.is_ok());
  TokenStore& t = **store;
  CHECK(t.request_fingerprint("ci", "job-1")->has_value() == false);
  CHECK(*t.remember_request("ci", "job-1", "aaa") == "aaa");
  // A second request with the key gets the first one's fingerprint back, whatever it sent.
  CHECK(*t.remember_request("ci", "job-1", "bbb") == "aaa");
  CHECK(**t.request_fingerprint("ci", "job-1") == "aaa");
  // Keys are per token.
  CHECK(*t.remember_request("other", "job-1", "bbb") == "bbb");
  // Past the window the key is free again.
  clock.at = clock.at + kIdempotencyWindow + std::chrono::seconds(1);
  CHECK(t.request_fingerprint("ci", "job-1")->has_value() == false);
  CHECK(*t.remember_request("ci", "job-1", "ccc") == "ccc");
}

TEST_CASE("tokens: request fingerprints are keyed per database, not the body's SHA-256",
          "[store][tokens][hostile]") {
  // Issue 33 finding 9: the fingerprint of a body with secret startup values used to be its
  // plain SHA-256, which anyone holding a row could check guesses against.
  FixedClock clock;
  const std::string body = R"({"pool":"tiny","startup":{"env":{"TOKEN":"hunter2"}}})";
  std::string first_print;
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  {
    auto db = (*backend)->open();
    REQUIRE(db.is_ok());
    auto store = TokenStore::open(**db, clock);
    REQUIRE(store.is_ok());
    first_print = (*store)->request_fingerprint_of(body);
    CHECK(first_print.size() == 64);
    CHECK(first_print != hash_token(body));  // hash_token: plain SHA-256
    CHECK((*store)->request_fingerprint_of(body + " ") != first_print);
    // What remember_request keeps is that keyed value.
    CHECK(*(*store)->remember_request("ci", "job-1", first_print) == first_print);
    auto rows = (*db)->query("SELECT fingerprint FROM idempotency_keys");
    REQUIRE(rows.is_ok());
    REQUIRE(rows->size() == 1);
    CHECK(sql_text((*rows)[0][0]) != hash_token(body));
  }
  // The key outlives a restart: a retry after one is still the same request.
  auto again = (*backend)->open();
  REQUIRE(again.is_ok());
  auto store = TokenStore::open(**again, clock);
  REQUIRE(store.is_ok());
  CHECK((*store)->request_fingerprint_of(body) == first_print);
  // Another database has another key.
  auto other_db = Database::open(":memory:");
  REQUIRE(other_db.is_ok());
  auto other = TokenStore::open(**other_db, clock);
  REQUIRE(other.is_ok());
  CHECK((*other)->request_fingerprint_of(body) != first_print);
}

TEST_CASE("tokens: create, put and revoke commit with synchronous=FULL", "[store][tokens]") {
  // Issue 33 finding 9: under synchronous=NORMAL a power cut can roll back the last commits,
  // and a revoked token would work again.
  FixedClock clock;
  auto backend = StoreBackend::make("sqlite");  // SQLite's synchronous levels: SQLite only
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto store = TokenStore::open(**db, clock);
  REQUIRE(store.is_ok());
  std::vector<int64_t> levels;
  (*db)->set_before_commit_for_test([&levels](Database::Tx& tx) {
    auto r = tx.query("PRAGMA synchronous");
    REQUIRE(r.is_ok());
    levels.push_back(sql_int((*r)[0][0]));
  });
  auto secret = (*store)->create({"ci-x", TokenRole::kCi, 0, Seconds(0)});
  REQUIRE(secret.is_ok());
  REQUIRE((*store)->revoke("ci-x").is_ok());
  REQUIRE((*store)->put({"admin", TokenRole::kAdmin, 0, Seconds(0)}, *secret).is_ok());
  // An idempotency row is not a security decision: NORMAL.
  REQUIRE((*store)->remember_request("ci", "k", "f").is_ok());
  CHECK(levels == std::vector<int64_t>{2, 2, 2, 1});  // 2 = FULL, 1 = NORMAL
}

}  // namespace
}  // namespace armhive
