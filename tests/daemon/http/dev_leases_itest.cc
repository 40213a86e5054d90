// Developer leases (purpose dev) under a token's dev limits: how many at once, the longest ttl,
// and the hard maximum a renew may reach counted from creation (429 naming the field).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/daemon/http/api_fixture.h"
#include "tests/support/manual_clock.h"

namespace armhive {
namespace {

using nlohmann::json;

json body_of(const HttpReply& r) {
  INFO(r.body);
  json j = json::parse(r.body, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

void check_problem(const HttpReply& r, int status, const std::string& field) {
  INFO(r.body);
  CHECK(r.status == status);
  CHECK(body_of(r)["field"] == field);
}

std::string lease_body(const std::string& purpose, const std::string& ttl) {
  return R"({"pool":"tiny","purpose":")" + purpose + "\"" +
         (ttl.empty() ? std::string() : R"(,"ttl":")" + ttl + "\"") + "}";
}

TEST_CASE("http: a token's dev limits bound its dev leases, not its CI leases", "[http][dev]") {
  // The fake service's clock: leases are created at this instant.
  ManualClock clock(from_unix_ms(1'790'000'000'000));
  ApiFixture f(true, [&clock](HttpOptions& o) { o.clock = &clock; });
  TokenSpec spec{"laptop", TokenRole::kDev, 0, Seconds(0)};
  spec.dev_max_leases = 1;
  spec.dev_max_ttl = Seconds(2 * 3600);
  spec.dev_max_lifetime = Seconds(3 * 3600);
  auto secret = f.tokens->create(spec);
  REQUIRE(secret.is_ok());
  const std::string& dev = *secret;
  auto who = f.tokens->authenticate(dev);
  REQUIRE(who.is_ok());
  CHECK(who->dev_max_leases == 1);
  CHECK(who->dev_max_lifetime == Seconds(3 * 3600));

  check_problem(f.request("POST", "/v1/leases", dev, lease_body("dev", "3h")), 429, "ttl");
  auto made = f.request("POST", "/v1/leases", dev, lease_body("dev", ""));  // the pool's 1h
  REQUIRE(made.status == 201);
  const std::string id = body_of(made)["id"];
  check_problem(f.request("POST", "/v1/leases", dev, lease_body("dev", "1h")), 429, "purpose");
  CHECK(f.request("POST", "/v1/leases", dev, lease_body("ci", "3h")).status == 201);

  const std::string renew = "/v1/leases/" + id + "/renew";
  CHECK(f.request("POST", renew, dev, R"({"ttl":"2h"})").status == 200);
  check_problem(f.request("POST", renew, dev, R"({"ttl":"3h"})"), 429, "ttl");  // dev max ttl
  clock.advance(std::chrono::hours(2));
  // Two hours in, the lease may live one hour more (3 h from creation), not two.
  auto refused = f.request("POST", renew, dev, R"({"ttl":"2h"})");
  check_problem(refused, 429, "ttl");
  CHECK_THAT(body_of(refused)["detail"].get<std::string>(), Catch::Contains("at most 1h"));
  CHECK(f.request("POST", renew, dev, R"({"ttl":"1h"})").status == 200);
  clock.advance(std::chrono::minutes(59) + std::chrono::seconds(30));
  auto spent = f.request("POST", renew, dev, R"({"ttl":"1m"})");
  check_problem(spent, 429, "ttl");
  CHECK_THAT(body_of(spent)["detail"].get<std::string>(), Catch::Contains("cannot be renewed"));

  // Released, the slot is free again.
  REQUIRE(f.request("DELETE", "/v1/leases/" + id, dev).status == 200);
  CHECK(f.request("POST", "/v1/leases", dev, lease_body("dev", "1h")).status == 201);
}

}  // namespace
}  // namespace armhive
