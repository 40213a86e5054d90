// Issue 33 (finding 10): an MTU benchmark changes the host bridge every lease on it shares, so
// only admin tokens may ask for one (the restore after a crash: tests/daemon/bench).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

using nlohmann::json;

TEST_CASE("http: only admin tokens run benchmarks at other MTUs", "[http][hostile][benchmarks]") {
  ApiFixture f;
  auto made = f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"tiny","ttl":"1h"})");
  REQUIRE(made.status == 201);
  const std::string id = json::parse(made.body)["id"];
  const std::string body = R"({"suites":["network"],"network":{"mtus":[9000]}})";
  auto refused = f.request("POST", "/v1/leases/" + id + "/benchmarks", f.ci_b, body);
  INFO(refused.body);
  REQUIRE(refused.status == 403);
  CHECK(refused.content_type == "application/problem+json");
  CHECK(json::parse(refused.body)["field"] == "network.mtus");
  // Without MTUs the owner may; an admin may with them.
  CHECK(f.request("POST", "/v1/leases/" + id + "/benchmarks", f.ci_b, R"({"suites":["network"]})")
            .status == 202);
  CHECK(f.request("POST", "/v1/leases/" + id + "/benchmarks", f.admin, body).status == 202);
}

}  // namespace
}  // namespace armhive
