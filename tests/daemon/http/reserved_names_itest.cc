// Issue 33 (finding 10): the names armhived acts under itself are reserved for tokens. A token
// named "github" owned every lease the GitHub provider made for a just-in-time runner (it could
// list them, exec in them, release them).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "daemon/http/token_commands.h"
#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

TEST_CASE("tokens: the names armhived acts under cannot be created", "[http][tokens][hostile]") {
  ApiFixture f;
  for (const char* name : {"github", "armhived", "anonymous"}) {
    INFO(name);
    auto made = f.tokens->create({name, TokenRole::kCi, 0, Seconds(0)});
    REQUIRE_FALSE(made.is_ok());
    CHECK(made.status().code() == ErrorCode::kInvalidArgument);
    CHECK(made.status().field() == "name");
    std::ostringstream out, err;
    int code = run_token_command({"create", name, "--role", "ci"}, *f.db, out, err);
    CHECK(code != 0);
    CHECK(out.str().empty());  // no secret
    CHECK_THAT(err.str(), Catch::Contains("reserved"));
  }
  CHECK(f.tokens->create({"github-ci", TokenRole::kCi, 0, Seconds(0)}).is_ok());
}

TEST_CASE("tokens: one made with a reserved name before it was reserved no longer authenticates",
          "[http][tokens][hostile]") {
  ApiFixture f;
  // A row as an older armhived wrote it.
  const std::string secret = "ah_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
  REQUIRE(looks_like_token(secret));
  REQUIRE(f.db->execute("INSERT INTO tokens (name, hash, role, max_leases, max_ttl_s, created_at, "
                        "dev_max_leases, dev_max_ttl_s, dev_max_lifetime_s) "
                        "VALUES ('github', ?, 'admin', 0, 0, 0, 0, 0, 0)",
                        {hash_token(secret)})
              .is_ok());
  CHECK(f.request("GET", "/v1/leases", secret).status == 401);
  CHECK(f.request("GET", "/v1/events?follow=false", secret).status == 401);
  CHECK_FALSE(f.tokens->authenticate(secret).is_ok());
  // Still listed (the audit log names it), so an admin sees what to revoke.
  auto listed = f.tokens->get("github");
  REQUIRE(listed.is_ok());
  CHECK(is_reserved_token_name(listed->name));
}

}  // namespace
}  // namespace armhive
