// What a job used, end to end through the API (issue 32 item 5): the real LeaseEngine over the
// fake hypervisor (whose counters the test moves: "the VM burned N CPU seconds") and SQLite,
// behind the real HttpServer. The lease's `usage`, GET /v1/usage as JSON and CSV, its 400s
// naming the field, who sees what, and the /metrics counters.
#include <httplib.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "daemon/http/server.h"
#include "daemon/store/token_store.h"
#include "tests/support/engine_harness.h"
#include "tests/support/response_recorder.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

std::string vm_of(const json& lease) { return lease["vm"]["name"].get<std::string>(); }

struct Reply {
  int status = 0;
  std::string content_type;
  std::string body;
  json doc() const { return json::parse(body, nullptr, false); }
};

// An HttpServer over a Harness's engine, its metrics and its clock, with tokens admin,
// ci-a and ci-b (ci) and reader (read).
struct UsageApi {
  UsageApi() : h({ci_pool(1, 4)}) {
    db = std::move(Database::open(":memory:").value());
    tokens = std::move(TokenStore::open(*db, system_clock).value());
    audit = std::move(AuditLog::open(*db, system_clock, {}, &h.metrics).value());
    admin = tokens->create({"admin", TokenRole::kAdmin, 0, Seconds(0)}).value();
    ci_a = tokens->create({"ci-a", TokenRole::kCi, 0, Seconds(0)}).value();
    ci_b = tokens->create({"ci-b", TokenRole::kCi, 0, Seconds(0)}).value();
    reader = tokens->create({"reader", TokenRole::kRead, 0, Seconds(0)}).value();
    h.start();
    REQUIRE(h.settle(1));
    HttpOptions o;
    o.port = 0;
    o.threads = 4;
    o.version = "test";
    o.clock = &h.clock;  // "now" of the usage window is the engine's
    server = std::make_unique<HttpServer>(o, *h.engine, nullptr, *tokens, *audit, h.metrics);
    REQUIRE(server->start().is_ok());
  }
  ~UsageApi() {
    server->stop();
    h.engine->stop();
  }

  Reply request(const std::string& method, const std::string& path, const std::string& token,
                const std::string& body = {}, const std::string& accept = {}) {
    httplib::Client cli(server->url());
    cli.set_read_timeout(std::chrono::seconds(30));
    httplib::Headers headers{{"Authorization", "Bearer " + token}};
    if (!accept.empty()) headers.emplace("Accept", accept);
    httplib::Result res = method == "GET"    ? cli.Get(path, headers)
                          : method == "POST" ? cli.Post(path, headers, body, "application/json")
                                             : cli.Delete(path, headers);
    Reply r;
    if (!res) return r;
    r.status = res->status;
    r.content_type = res->get_header_value("Content-Type");
    r.body = res->body;
    record_response(method, path, r.status, r.content_type, r.body);
    return r;
  }

  // A ready lease of `token` (a warm hand-out), and its VM.
  json lease(const std::string& token, const std::string& labels = "{}") {
    Reply r =
        request("POST", "/v1/leases", token,
                R"({"pool":"ci","ssh_keys":[")" + kTestKey + R"("],"labels":)" + labels + "}");
    INFO(r.body);
    REQUIRE(r.status == 201);
    json l = r.doc();
    REQUIRE(l["state"] == "ready");
    REQUIRE(h.settle(1));
    return l;
  }

  Harness h;
  SystemClock system_clock;
  std::unique_ptr<Database> db;
  std::unique_ptr<TokenStore> tokens;
  std::unique_ptr<AuditLog> audit;
  std::unique_ptr<HttpServer> server;
  std::string admin, ci_a, ci_b, reader;
};

TEST_CASE("usage api: a lease whose VM burned N CPU seconds reports N, live and final",
          "[http][usage]") {
  UsageApi api;
  json l = api.lease(api.ci_a);
  const std::string id = l["id"];
  const std::string vm = l["vm"]["name"];
  CHECK(l["usage"]["cpu_seconds"] == 0);
  CHECK(l["usage"]["final"] == false);

  // The job burns 42 s of CPU over a minute, writes 1 MiB, talks.
  api.h.clock.advance(60s);
  REQUIRE(api.h.hypervisor->add_usage(vm, 42s, 1 << 20, 3000, 2000));
  api.h.engine->sample_usage();
  json live = api.request("GET", "/v1/leases/" + id, api.ci_a).doc();
  CHECK(live["usage"]["cpu_seconds"] == Approx(42));
  CHECK(live["usage"]["wall_seconds"] == Approx(60));
  CHECK(live["usage"]["disk_write_bytes"] == 1 << 20);
  CHECK(live["usage"]["net_rx_bytes"] == 3000);
  CHECK(live["usage"]["net_tx_bytes"] == 2000);
  CHECK(live["usage"]["peak_memory_bytes"].get<int64_t>() > 0);
  CHECK(live["usage"]["final"] == false);

  // Three more seconds before the release: the last sample before the destroy has them.
  REQUIRE(api.h.hypervisor->add_usage(vm, 3s));
  Reply released = api.request("DELETE", "/v1/leases/" + id, api.ci_a);
  REQUIRE(released.status == 200);
  REQUIRE(api.h.engine->wait_idle(5s));
  json ended = api.request("GET", "/v1/leases/" + id, api.ci_a).doc();
  CHECK(ended["state"] == "released");
  CHECK(ended["usage"]["cpu_seconds"] == Approx(45));
  CHECK(ended["usage"]["final"] == true);

  json report = api.request("GET", "/v1/usage?since=1h", api.ci_a).doc();
  CHECK(report["group_by"] == "owner");
  REQUIRE(report["rows"].size() == 1);
  CHECK(report["rows"][0]["group"] == "ci-a");
  CHECK(report["rows"][0]["leases"] == 1);
  CHECK(report["rows"][0]["cpu_seconds"] == Approx(45));
  CHECK(report["rows"][0]["wall_seconds"] == Approx(60));
  CHECK(report["rows"][0]["disk_write_bytes"] == 1 << 20);
}

TEST_CASE("usage api: the report groups by owner, pool and label, others see their own only",
          "[http][usage]") {
  UsageApi api;
  json a = api.lease(api.ci_a, R"({"team":"arm"})");
  json b = api.lease(api.ci_b, R"({"team":"x86"})");
  json c = api.lease(api.ci_a);
  REQUIRE(api.h.hypervisor->add_usage(vm_of(a), 10s));
  REQUIRE(api.h.hypervisor->add_usage(vm_of(b), 20s));
  REQUIRE(api.h.hypervisor->add_usage(vm_of(c), 5s));
  api.h.engine->sample_usage();
  api.h.clock.advance(1s);  // the window is [since, until): now must be past the creations

  json by_owner = api.request("GET", "/v1/usage", api.admin).doc();  // default: the last 7 days
  REQUIRE(by_owner["rows"].size() == 2);
  CHECK(by_owner["rows"][0]["group"] == "ci-a");
  CHECK(by_owner["rows"][0]["leases"] == 2);
  CHECK(by_owner["rows"][0]["cpu_seconds"] == Approx(15));
  CHECK(by_owner["rows"][1]["group"] == "ci-b");

  json by_pool = api.request("GET", "/v1/usage?group_by=pool&since=2d", api.admin).doc();
  REQUIRE(by_pool["rows"].size() == 1);
  CHECK(by_pool["rows"][0]["group"] == "ci");
  CHECK(by_pool["rows"][0]["cpu_seconds"] == Approx(35));

  json by_team = api.request("GET", "/v1/usage?group_by=label&label=team", api.admin).doc();
  CHECK(by_team["label"] == "team");
  REQUIRE(by_team["rows"].size() == 3);
  CHECK(by_team["rows"][0]["group"] == "");
  CHECK(by_team["rows"][1]["group"] == "arm");
  CHECK(by_team["rows"][2]["group"] == "x86");

  // Another token's leases are not in its report, whatever it groups by.
  json mine = api.request("GET", "/v1/usage?group_by=pool", api.ci_b).doc();
  REQUIRE(mine["rows"].size() == 1);
  CHECK(mine["rows"][0]["cpu_seconds"] == Approx(20));
  CHECK(api.request("GET", "/v1/usage", api.reader).doc()["rows"].empty());

  // A window that ends before the leases were made holds none of them.
  std::string before = to_rfc3339(api.h.clock.now() - 1h);
  json none = api.request("GET", "/v1/usage?until=" + before, api.admin).doc();
  CHECK(none["rows"].empty());
}

TEST_CASE("usage api: CSV has a header and quotes what must be quoted", "[http][usage]") {
  UsageApi api;
  json a = api.lease(api.ci_a, R"({"team":"a,\"b\""})");
  api.lease(api.ci_b, R"x({"team":"=cmd()"})x");  // a formula, kept as text in the CSV
  REQUIRE(api.h.hypervisor->add_usage(vm_of(a), 1500ms));
  api.h.engine->sample_usage();
  api.h.clock.advance(1s);  // the window is [since, until): now must be past the creations
  Reply csv = api.request("GET", "/v1/usage?group_by=label&label=team", api.admin, {}, "text/csv");
  REQUIRE(csv.status == 200);
  CHECK(csv.content_type.rfind("text/csv", 0) == 0);
  CHECK(csv.body ==
        "label:team,leases,cpu_seconds,wall_seconds,peak_memory_bytes,disk_write_bytes,"
        "net_rx_bytes,net_tx_bytes\r\n"
        "'=cmd(),1,0.000,0.000,134217728,0,0,0\r\n"
        "\"a,\"\"b\"\"\",1,1.500,0.000,134217728,0,0,0\r\n");
  Reply by_owner = api.request("GET", "/v1/usage", api.admin, {}, "text/csv");
  CHECK(by_owner.body.rfind("owner,leases,", 0) == 0);
}

TEST_CASE("usage api: a bad since, until, group_by or label is 400 naming it", "[http][usage]") {
  UsageApi api;
  struct Case {
    std::string query, field;
  };
  for (const Case& c : std::vector<Case>{
           {"since=yesterday", "since"},
           {"since=2026-13-01T00:00:00Z", "since"},
           {"since=2026-12-01", "since"},
           {"since=-7d", "since"},
           {"until=soon", "until"},
           {"since=2d&until=3d", "since"},  // since after until
           {"group_by=team", "group_by"},
           {"group_by=", "group_by"},
           {"group_by=label", "label"},
           {"group_by=label&label=Bad%20Key", "label"},
           {"group_by=pool&label=team", "label"},
       }) {
    INFO(c.query);
    Reply r = api.request("GET", "/v1/usage?" + c.query, api.admin);
    CHECK(r.status == 400);
    CHECK(r.content_type == "application/problem+json");
    CHECK(r.doc()["field"] == c.field);
  }
  CHECK(api.request("GET", "/v1/usage", "ah_not_a_token").status == 401);
}

TEST_CASE("usage api: /metrics counts what leased VMs used per pool and owner", "[http][usage]") {
  UsageApi api;
  json a = api.lease(api.ci_a);
  api.h.clock.advance(10s);
  REQUIRE(api.h.hypervisor->add_usage(vm_of(a), 7s, 4096, 100, 50));
  api.h.engine->sample_usage();
  httplib::Client cli(api.server->url());
  auto res = cli.Get("/metrics");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  const std::string& text = res->body;
  CHECK_THAT(text, Catch::Contains("# TYPE armhive_usage_cpu_seconds_total counter"));
  CHECK_THAT(text,
             Catch::Contains("armhive_usage_cpu_seconds_total{owner=\"ci-a\",pool=\"ci\"} 7"));
  CHECK_THAT(text,
             Catch::Contains("armhive_usage_wall_seconds_total{owner=\"ci-a\",pool=\"ci\"} 10"));
  CHECK_THAT(text, Catch::Contains(
                       "armhive_usage_disk_write_bytes_total{owner=\"ci-a\",pool=\"ci\"} 4096"));
  CHECK_THAT(text,
             Catch::Contains("armhive_usage_net_rx_bytes_total{owner=\"ci-a\",pool=\"ci\"} 100"));
  CHECK_THAT(text,
             Catch::Contains("armhive_usage_net_tx_bytes_total{owner=\"ci-a\",pool=\"ci\"} 50"));
}

}  // namespace
}  // namespace armhive
