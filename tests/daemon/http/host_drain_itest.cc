// POST /v1/hosts/{name}/drain | undrain | maintenance: admin only, 404 naming `name`, and the
// state shown on /v1/hosts, /ui/hosts, a waiting lease's queue and the audit log.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

using nlohmann::json;

std::string host_state(ApiFixture& f) {
  json hosts = json::parse(f.request("GET", "/v1/hosts", f.reader).body);
  return hosts["items"][0]["state"];
}

TEST_CASE("http: an admin drains and undrains a host, others may not", "[http][drain]") {
  ApiFixture f;
  CHECK(host_state(f) == "ok");

  // Only admin tokens: a ci token is refused with a problem, a read token too, none is 401.
  for (const std::string& token : {f.ci_b, f.reader}) {
    auto refused = f.request("POST", "/v1/hosts/honeycomb/drain", token, "{}");
    CHECK(refused.status == 403);
    CHECK(refused.content_type == "application/problem+json");
  }
  CHECK(f.request("POST", "/v1/hosts/honeycomb/drain", "", "{}").status == 401);
  CHECK(host_state(f) == "ok");

  auto unknown = f.request("POST", "/v1/hosts/tx1/drain", f.admin, "{}");
  CHECK(unknown.status == 404);
  CHECK(unknown.content_type == "application/problem+json");
  CHECK(json::parse(unknown.body)["field"] == "name");
  CHECK(json::parse(unknown.body)["detail"].get<std::string>().find("tx1") != std::string::npos);

  auto drained = f.request("POST", "/v1/hosts/honeycomb/drain", f.admin, "{}");
  REQUIRE(drained.status == 200);
  CHECK(json::parse(drained.body)["hostname"] == "honeycomb");
  CHECK(json::parse(drained.body)["state"] == "draining");
  CHECK(host_state(f) == "draining");
  auto page = f.request("GET", "/ui/hosts", f.reader);
  CHECK(page.body.find("<b>draining</b>") != std::string::npos);

  // A lease asked for now waits, saying why.
  auto created = f.request("POST", "/v1/leases", f.ci_b,
                           json{{"pool", "tiny"}, {"ssh_keys", {kTestKey}}}.dump());
  REQUIRE(created.status / 100 == 2);
  json lease = json::parse(created.body);
  CHECK(lease["state"] == "pending");
  CHECK(lease["queue"]["reason"] == "host_draining");

  auto maintenance = f.request("POST", "/v1/hosts/honeycomb/maintenance", f.admin, "{}");
  REQUIRE(maintenance.status == 200);
  CHECK(json::parse(maintenance.body)["state"] == "maintenance");

  auto undrained = f.request("POST", "/v1/hosts/honeycomb/undrain", f.admin, "{}");
  REQUIRE(undrained.status == 200);
  CHECK(json::parse(undrained.body)["state"] == "ok");
  CHECK(host_state(f) == "ok");
  std::string id = lease["id"];
  CHECK(json::parse(f.request("GET", "/v1/leases/" + id, f.ci_b).body)["state"] == "ready");

  // Each change is audited with who made it.
  auto entries = f.audit->recent(10);
  REQUIRE(entries.is_ok());
  std::vector<std::string> actions;
  for (const auto& e : *entries) {
    if (e.action.rfind("host.", 0) == 0) {
      actions.push_back(e.action);
      CHECK(e.actor == "admin");
      CHECK(e.detail == "host=honeycomb");
    }
  }
  CHECK(actions == std::vector<std::string>{"host.undrain", "host.maintenance", "host.drain"});
}

}  // namespace
}  // namespace armhive
