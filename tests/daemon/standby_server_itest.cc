// A standby's server (daemon/standby_server.h) on a real PostgreSQL: GET /v1/cluster answered
// from the database for a token the database accepts, 401 for any other; /healthz names the
// leader since when; everything else still goes to the leader.
#include <httplib.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "daemon/standby_server.h"
#include "daemon/store/pg_database.h"
#include "daemon/store/pg_leader_lease.h"
#include "daemon/store/token_store.h"
#include "tests/support/postgres_server.h"

namespace armhive {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

TEST_CASE("standby server answers cluster for a good token and 401 for a bad one",
          "[daemon][standby][postgres]") {
  auto t = TestPostgresDatabase::make();
  INFO(t.status().to_string());
  REQUIRE(t.is_ok());
  auto store = PgDatabase::connect((*t)->url());
  REQUIRE(store.is_ok());
  SystemClock clock;
  auto tokens = TokenStore::open(**store, clock);
  REQUIRE(tokens.is_ok());
  auto good = (*tokens)->create({.name = "ci1", .role = TokenRole::kCi});
  REQUIRE(good.is_ok());
  auto revoked = (*tokens)->create({.name = "gone", .role = TokenRole::kAdmin});
  REQUIRE(revoked.is_ok());
  REQUIRE((*tokens)->revoke("gone").is_ok());
  // The leader, renewing on a connection of its own; then this standby, once.
  auto elect = PgDatabase::connect((*t)->url());
  REQUIRE(elect.is_ok());
  auto leader = PgLeaderLease::open(**elect, "armhived@hc1/7", "http://leader.test:8470", 60s);
  REQUIRE(leader.is_ok());
  auto led = (*leader)->renew();
  REQUIRE(led.is_ok());
  REQUIRE(led->ours);
  auto elect_b = PgDatabase::connect((*t)->url());
  REQUIRE(elect_b.is_ok());
  auto mine = PgLeaderLease::open(**elect_b, "armhived@tx1/8", "http://127.0.0.1:1", 60s);
  REQUIRE(mine.is_ok());
  auto seen = (*mine)->renew();
  REQUIRE(seen.is_ok());
  REQUIRE_FALSE(seen->ours);

  StandbyServer::Options o;
  o.bind = "127.0.0.1";
  o.store_url = (*t)->url();
  o.lease = 60s;
  auto standby = StandbyServer::start(o);
  INFO(standby.status().to_string());
  REQUIRE(standby.is_ok());
  (*standby)->set_leader(seen->holder, seen->url, seen->epoch, seen->since_ms);
  httplib::Client api("127.0.0.1", (*standby)->port());

  SECTION("a token of the database's reads who leads") {
    api.set_bearer_token_auth(*good);
    auto r = api.Get("/v1/cluster");
    REQUIRE(r);
    INFO(r->body);
    CHECK(r->status == 200);
    CHECK(r->get_header_value("Content-Type") == "application/json");
    json body = json::parse(r->body);
    CHECK(body["store"] == "postgresql");
    CHECK(body["leader"]["holder"] == "armhived@hc1/7");
    CHECK(body["leader"]["url"] == "http://leader.test:8470");
    CHECK(body["leader"]["epoch"] == led->epoch);
    REQUIRE(body["members"].size() == 2);
    CHECK(body["members"][0]["holder"] == "armhived@hc1/7");
    CHECK(body["members"][0]["role"] == "leader");
    CHECK(body["members"][1]["holder"] == "armhived@tx1/8");
    CHECK(body["members"][1]["role"] == "standby");
    // /healthz says since when, as the view does.
    auto h = api.Get("/healthz");
    REQUIRE(h);
    CHECK(h->status == 503);
    CHECK(json::parse(h->body)["leader"]["since"] == body["leader"]["since"]);
    // Everything else still goes to the leader.
    auto pools = api.Get("/v1/pools");
    REQUIRE(pools);
    CHECK(pools->status == 307);
  }
  SECTION("an unknown, revoked or missing token reads nothing") {
    for (const std::string& secret :
         {std::string("ah_") + std::string(40, 'x'), *revoked, std::string()}) {
      httplib::Headers headers;
      if (!secret.empty()) headers.emplace("Authorization", "Bearer " + secret);
      auto r = api.Get("/v1/cluster", headers);
      REQUIRE(r);
      INFO(r->body);
      CHECK(r->status == 401);
      CHECK(r->get_header_value("Content-Type") == "application/problem+json");
      CHECK(r->get_header_value("WWW-Authenticate") == "Bearer realm=\"armhive\"");
      CHECK(json::parse(r->body)["type"] == "https://armhive.dev/problems/unauthenticated");
      CHECK(r->body.find("armhived@") == std::string::npos);
    }
  }
}

}  // namespace
}  // namespace armhive
