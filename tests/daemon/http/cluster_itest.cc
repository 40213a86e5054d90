// GET /v1/cluster and the leader in GET /healthz on SQLite: one armhived, leading since it
// started, with no election (epoch 0). PostgreSQL's view is tested on the store
// (tests/daemon/store/pg_leader_lease_itest.cc), the standby's in
// tests/daemon/standby_server_itest.cc and both instances' in tests/daemon/service_itest.cc.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "base/utc_time.h"
#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

using nlohmann::json;

TEST_CASE("http: cluster on SQLite is this armhived alone leading with epoch 0", "[http]") {
  ApiFixture f(true, [](HttpOptions& o) { o.instance = "armhived@hc1/42"; });
  auto r = f.request("GET", "/v1/cluster", f.reader);  // any valid token, read included
  REQUIRE(r.status == 200);
  CHECK(r.content_type == "application/json");
  json body = json::parse(r.body);
  INFO(body.dump());
  CHECK(body["store"] == "sqlite");
  CHECK(body["leader"]["holder"] == "armhived@hc1/42");
  CHECK(body["leader"]["url"] == f.url());
  CHECK(body["leader"]["epoch"] == 0);
  REQUIRE(body["members"].size() == 1);
  const json& me = body["members"][0];
  CHECK(me["holder"] == "armhived@hc1/42");
  CHECK(me["role"] == "leader");
  CHECK(me["url"] == f.url());
  CHECK(me["last_contact_age_s"] == 0.0);
  // Leading since the server started, which is when this member started; times are RFC 3339.
  CHECK(me["started_at"] == body["leader"]["since"]);
  auto since = parse_rfc3339_ms("since", body["leader"]["since"].get<std::string>());
  REQUIRE(since.is_ok());
  auto contact = parse_rfc3339_ms("last_contact", me["last_contact"].get<std::string>());
  REQUIRE(contact.is_ok());
  CHECK(*contact >= *since);

  // /healthz (public) names the same leader.
  auto h = f.request("GET", "/healthz");
  REQUIRE(h.status == 200);
  json health = json::parse(h.body);
  CHECK(health["leader"] == body["leader"]);
}

TEST_CASE("http: cluster needs a valid token", "[http]") {
  ApiFixture f;
  auto none = f.request("GET", "/v1/cluster");
  CHECK(none.status == 401);
  CHECK(none.content_type == "application/problem+json");
  CHECK(none.headers["WWW-Authenticate"] == "Bearer realm=\"armhive\"");
  auto bad = f.request("GET", "/v1/cluster", "ah_" + std::string(40, 'x'));
  CHECK(bad.status == 401);
  CHECK(json::parse(bad.body)["type"] == "https://armhive.dev/problems/unauthenticated");
  CHECK(bad.body.find("armhived@") == std::string::npos);  // nothing about the members leaks
}

}  // namespace
}  // namespace armhive
