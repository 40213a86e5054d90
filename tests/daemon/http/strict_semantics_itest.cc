// Strict request semantics (issue 12 item 4): media type, duplicate JSON keys, methods,
// Idempotency-Key reuse, paging and counts past one page.
#include <httplib.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

using nlohmann::json;

json body_of(const HttpReply& r) {
  json j = json::parse(r.body, nullptr, false);
  INFO(r.body);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

// A POST with this exact Content-Type (the fixture always sends application/json).
HttpReply post_as(ApiFixture& f, const std::string& path, const std::string& body,
                  const std::string& content_type) {
  httplib::Client cli(f.url());
  auto res = cli.Post(path, {{"Authorization", "Bearer " + f.ci_b}}, body, content_type.c_str());
  HttpReply r;
  if (!res) return r;
  r.status = res->status;
  r.content_type = res->get_header_value("Content-Type");
  r.body = res->body;
  return r;
}

size_t lease_count(ApiFixture& f) {
  return body_of(f.request("GET", "/v1/leases?limit=1000", f.admin))["items"].size();
}

TEST_CASE("http: a body that is not application/json is 415 and creates nothing", "[http]") {
  ApiFixture f;
  const std::string body = R"({"pool":"tiny","ttl":"1h"})";
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded", "application/xml"}) {
    INFO(type);
    auto r = post_as(f, "/v1/leases", body, type);
    CHECK(r.status == 415);
    CHECK(r.content_type == "application/problem+json");
    json p = body_of(r);
    CHECK(p["status"] == 415);
    CHECK(p["field"] == "Content-Type");
    CHECK(p["detail"].get<std::string>().find(type) != std::string::npos);
  }
  CHECK(lease_count(f) == 0);
  // Media-type parameters and +json types are JSON.
  CHECK(post_as(f, "/v1/leases", body, "application/json; charset=utf-8").status == 201);
  CHECK(post_as(f, "/v1/leases", body, "Application/JSON").status == 201);
  CHECK(lease_count(f) == 2);
  // The other JSON endpoints check it too.
  std::string id = body_of(f.request("GET", "/v1/leases", f.admin))["items"][0]["id"];
  CHECK(post_as(f, "/v1/leases/" + id + "/renew", R"({"ttl":"2h"})", "text/plain").status == 415);
  CHECK(post_as(f, "/v1/leases/" + id + "/exec", R"({"argv":["id"]})", "text/plain").status == 415);
}

TEST_CASE("http: duplicate JSON keys are 400 naming the key", "[http]") {
  ApiFixture f;
  auto dup = f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"tiny","pool":"slow"})");
  CHECK(dup.status == 400);
  json p = body_of(dup);
  CHECK(p["field"] == "pool");
  CHECK(p["detail"].get<std::string>().find("pool") != std::string::npos);
  auto nested =
      f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"tiny","labels":{"job":"a","job":"b"}})");
  CHECK(nested.status == 400);
  CHECK(body_of(nested)["field"] == "labels.job");
  CHECK(lease_count(f) == 0);
  // The same name in different objects is fine.
  CHECK(
      f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"tiny","labels":{"pool":"x"}})").status ==
      201);
}

TEST_CASE("http: a method the path does not have is 405 with Allow", "[http]") {
  ApiFixture f;
  httplib::Client cli(f.url());
  httplib::Headers auth{{"Authorization", "Bearer " + f.admin}};
  auto put = cli.Put("/v1/leases", auth, "{}", "application/json");
  REQUIRE(put);
  CHECK(put->status == 405);
  CHECK(put->get_header_value("Allow") == "POST, GET");
  CHECK(put->get_header_value("Content-Type") == "application/problem+json");
  auto del = cli.Delete("/v1/pools", auth);
  REQUIRE(del);
  CHECK(del->status == 405);
  CHECK(del->get_header_value("Allow") == "GET");
  auto post = cli.Post("/v1/leases/l-000000000001", auth, "{}", "application/json");
  REQUIRE(post);
  CHECK(post->status == 405);
  CHECK(post->get_header_value("Allow") == "GET, DELETE");
  CHECK(json::parse(post->body)["status"] == 405);
  // An unknown path stays 404.
  CHECK(f.request("GET", "/v1/nothing", f.admin).status == 404);
}

TEST_CASE("http: the same Idempotency-Key with a different request is 422", "[http]") {
  ApiFixture f;
  auto first = f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"tiny","ttl":"1h"})",
                         {{"Idempotency-Key", "job-9"}});
  REQUIRE(first.status == 201);
  std::string id = body_of(first)["id"];
  // The same request again, formatted differently, is a retry.
  auto retry = f.request("POST", "/v1/leases", f.ci_b, R"({ "ttl": "1h",  "pool": "tiny" })",
                         {{"Idempotency-Key", "job-9"}});
  REQUIRE(retry.status == 201);
  CHECK(body_of(retry)["id"] == id);
  auto other = f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"tiny","ttl":"2h"})",
                         {{"Idempotency-Key", "job-9"}});
  CHECK(other.status == 422);
  CHECK(other.content_type == "application/problem+json");
  CHECK(body_of(other)["field"] == "Idempotency-Key");
  CHECK(lease_count(f) == 1);
  // Keys belong to a token: another token may use the same key for its own request.
  CHECK(f.request("POST", "/v1/leases", f.admin, R"({"pool":"tiny","ttl":"2h"})",
                  {{"Idempotency-Key", "job-9"}})
            .status == 201);
  // A refused first attempt does not pin the key to a request that made no lease.
  CHECK(
      f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"nope"})", {{"Idempotency-Key", "job-10"}})
          .status == 404);
  CHECK(
      f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"tiny"})", {{"Idempotency-Key", "job-10"}})
          .status == 201);
}

TEST_CASE("http: paging and counts are right past a thousand leases", "[http]") {
  ApiFixture f;
  constexpr int kLeases = 1205;
  for (int i = 0; i < kLeases; ++i) {
    LeaseRequest r;
    r.pool = "tiny";
    r.owner = "ci-b";
    REQUIRE(f.leases.create_lease(r).is_ok());
  }
  auto page1 = body_of(f.request("GET", "/v1/leases?limit=1000", f.ci_b));
  CHECK(page1["items"].size() == 1000);
  REQUIRE(page1["next_cursor"].is_string());
  CHECK(page1["next_cursor"] == page1["items"][999]["id"]);
  auto page2 = body_of(f.request(
      "GET", "/v1/leases?limit=1000&cursor=" + page1["next_cursor"].get<std::string>(), f.ci_b));
  CHECK(page2["items"].size() == kLeases - 1000);
  CHECK(page2["next_cursor"].is_null());

  auto metrics = f.request("GET", "/metrics");
  std::smatch m;
  std::regex ready(R"(armhive_leases\{state="ready"\} ([0-9]+))");
  REQUIRE(std::regex_search(metrics.body, m, ready));
  CHECK(std::stoi(m[1].str()) == kLeases);
}

}  // namespace
}  // namespace armhive
