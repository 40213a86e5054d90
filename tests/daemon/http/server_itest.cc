#include <httplib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

using nlohmann::json;

json parse(const HttpReply& r) {
  json j = json::parse(r.body, nullptr, false);
  INFO(r.body);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

// Asserts the reply is an RFC 7807 problem with this status (and field, when given).
json problem(const HttpReply& r, int status, const std::string& field = {}) {
  INFO(r.body);
  CHECK(r.status == status);
  CHECK(r.content_type == "application/problem+json");
  json j = parse(r);
  CHECK(j["status"] == status);
  CHECK(j["type"].get<std::string>().rfind("https://armhive.dev/problems/", 0) == 0);
  CHECK_FALSE(j["title"].get<std::string>().empty());
  CHECK_FALSE(j["detail"].get<std::string>().empty());
  if (!field.empty()) {
    REQUIRE(j.contains("field"));
    CHECK(j["field"] == field);
    CHECK(j["detail"].get<std::string>().find(field) != std::string::npos);
  }
  return j;
}

std::string lease_body(const std::string& pool = "tiny", const std::string& extra = {}) {
  return R"({"pool":")" + pool + R"(","ttl":"1h","ssh_keys":[")" + std::string(kTestKey) +
         R"("],"labels":{"job":"build-42"})" + extra + "}";
}

std::string create(ApiFixture& f, const std::string& token, const std::string& pool = "tiny",
                   const std::map<std::string, std::string>& headers = {}) {
  auto r = f.request("POST", "/v1/leases", token, lease_body(pool), headers);
  INFO(r.body);
  REQUIRE(r.status == 201);
  return parse(r)["id"].get<std::string>();
}

TEST_CASE("http: healthz is public, unknown endpoints are 404 problems", "[http]") {
  ApiFixture f;
  auto h = f.request("GET", "/healthz");
  CHECK(h.status == 200);
  CHECK(parse(h)["status"] == "ok");
  CHECK(parse(h)["version"] == "test");
  problem(f.request("GET", "/v1/nothing", f.admin), 404);
  problem(f.request("GET", "/v2/leases", f.admin), 404);
}

TEST_CASE("http: requests without a valid token are 401, read tokens cannot write", "[http]") {
  ApiFixture f;
  auto missing = f.request("GET", "/v1/leases");
  auto j = problem(missing, 401);
  CHECK(j["type"] == "https://armhive.dev/problems/unauthenticated");
  CHECK(missing.headers["WWW-Authenticate"].find("Bearer") == 0);
  CHECK(j["detail"].get<std::string>().find("Authorization: Bearer") != std::string::npos);
  problem(f.request("GET", "/v1/leases", "ah_" + std::string(40, 'x')), 401);
  problem(f.request("GET", "/v1/leases", {}, {}, {{"Authorization", "Basic Zm9vOmJhcg=="}}), 401);

  auto ro = f.request("POST", "/v1/leases", f.reader, lease_body());
  auto pj = problem(ro, 403);
  CHECK(pj["detail"].get<std::string>().find("read") != std::string::npos);
  CHECK(f.request("GET", "/v1/leases", f.reader).status == 200);
  CHECK(f.request("GET", "/v1/pools", f.reader).status == 200);

  REQUIRE(f.tokens->revoke("ci-b").is_ok());
  problem(f.request("GET", "/v1/leases", f.ci_b), 401);
}

TEST_CASE("http: creating a lease returns it ready with ssh details and audits it", "[http]") {
  ApiFixture f;
  auto r = f.request("POST", "/v1/leases", f.ci_b, lease_body("tiny", R"(,"purpose":"dev")"));
  REQUIRE(r.status == 201);
  CHECK(r.content_type == "application/json");
  json l = parse(r);
  CHECK(r.headers["Location"] == "/v1/leases/" + l["id"].get<std::string>());
  CHECK(l["state"] == "ready");
  CHECK(l["owner"] == "ci-b");
  CHECK(l["pool"] == "tiny");
  CHECK(l["purpose"] == "dev");
  CHECK(l["ttl_seconds"] == 3600);
  CHECK(l["labels"]["job"] == "build-42");
  CHECK(l["vm"]["address"].get<std::string>().rfind("192.168.122.", 0) == 0);
  CHECK(l["ssh"]["user"] == "armhive");
  CHECK(l["ssh"]["command"].get<std::string>().find("armhive@192.168.122.") != std::string::npos);
  // The VM's host keys from the first response, as known_hosts lines for the lease's alias.
  const std::string alias = "armhive-lease-" + l["id"].get<std::string>();
  CHECK(l["ssh"]["host_key_alias"] == alias);
  CHECK(l["ssh"]["host_keys"] == json::array({kFakeHostKey}));
  CHECK(l["ssh"]["known_hosts"] == alias + " " + kFakeHostKey + "\n");
  CHECK(l["history"].size() == 1);
  CHECK(l["expires_at"].get<std::string>().back() == 'Z');

  auto entries = f.audit->recent(10, l["id"]);
  REQUIRE(entries.is_ok());
  REQUIRE(entries->size() == 1);
  CHECK((*entries)[0].actor == "ci-b");
  CHECK((*entries)[0].action == "lease.create");

  // Integer seconds work as well as "1h".
  auto secs = f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"tiny","ttl":600})");
  REQUIRE(secs.status == 201);
  CHECK(parse(secs)["ttl_seconds"] == 600);
}

TEST_CASE("http: malformed lease requests are 400 problems naming the field", "[http]") {
  ApiFixture f;
  auto post = [&](const std::string& body) {
    return f.request("POST", "/v1/leases", f.ci_b, body);
  };
  problem(post(R"({"pool":"tiny","colour":"blue"})"), 400, "colour");
  problem(post(R"({"pool":"tiny","ttl":true})"), 400, "ttl");
  problem(post(R"({"pool":"tiny","ttl":1.5})"), 400, "ttl");
  problem(post(R"({"pool":"tiny","ttl":-5})"), 400, "ttl");
  problem(post(R"({"pool":"tiny","ttl":"-1h"})"), 400, "ttl");
  problem(post(R"({"pool":"tiny","ttl":0})"), 400, "ttl");
  problem(post(R"({"pool":"tiny","ttl":"400d"})"), 400, "ttl");
  problem(post(R"({"pool":"tiny","ttl":99999999999999999999})"), 400);
  problem(post(R"({"pool":"tiny","ttl":"2 hours"})"), 400, "ttl");
  problem(post(R"({"ttl":"1h"})"), 400, "pool");
  problem(post(R"({"pool":7})"), 400, "pool");
  problem(post(R"({"pool":"Tiny Pool"})"), 400, "pool");
  problem(post(R"({"pool":"tiny","purpose":"prod"})"), 400, "purpose");
  problem(post(R"({"pool":"tiny","labels":{"team":3}})"), 400, "labels.team");
  problem(post(R"({"pool":"tiny","labels":{"Bad Key":"x"}})"), 400, "labels.Bad Key");
  problem(post(R"({"pool":"tiny","ssh_keys":"ssh-ed25519 AAAA"})"), 400, "ssh_keys");
  problem(post(R"({"pool":"tiny","startup":{"argv":"/bin/run"}})"), 400, "startup.argv");
  problem(post(R"({"pool":"tiny","startup":{"argv":["/bin/run",""]}})"), 400, "startup.argv[1]");
  problem(post(R"({"pool":"tiny","startup":{"argv":["/bin/run"],"env":{"A B":"x"}}})"), 400,
          "startup.env");
  // A server without startup commands refuses them rather than ignoring them.
  problem(post(R"({"pool":"tiny","startup":{"argv":["/bin/run"]}})"), 400, "startup");
  problem(post(R"({"pool":"tiny","ssh_keys":[")" + std::string(kTestKey) +
               R"(","-----BEGIN OPENSSH PRIVATE KEY-----"]})"),
          400, "ssh_keys[1]");
  problem(post(R"({"pool":"tiny","ssh_keys":["ssh-dss AAAAB3NzaC1kc3MAAACBAP"]})"), 400,
          "ssh_keys[0]");
  problem(post(R"({"pool":"tiny","ssh_keys":[42]})"), 400, "ssh_keys[0]");
  problem(post(R"({"pool":"tiny","ports":[22, 0]})"), 400, "ports[1]");
  problem(post(R"({"pool":"tiny","ports":[70000]})"), 400, "ports[0]");
  problem(post(R"({"pool":"tiny","ports":["http"]})"), 400, "ports[0]");
  problem(post(R"({"pool":"tiny","ports":[8080]})"), 400, "ports");  // this server has no [access]
  problem(post("[1,2]"), 400, "body");
  problem(post("{\"pool\":"), 400, "body");
  problem(post(""), 400, "body");
  problem(f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"tiny"})",
                    {{"Idempotency-Key", std::string(200, 'k')}}),
          400, "Idempotency-Key");
}

TEST_CASE("http: unknown pools are 404, TTLs beyond the pool's maximum are 422", "[http]") {
  ApiFixture f;
  auto j = problem(f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"nope"})"), 404);
  CHECK(j["detail"].get<std::string>().find("nope") != std::string::npos);
  problem(f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"slow","ttl":"3h"})"), 422, "ttl");
}

TEST_CASE("http: bodies over the limit are 413 problems", "[http]") {
  ApiFixture f;
  std::string big = R"({"pool":"tiny","labels":{"x":")" + std::string(70 * 1024, 'a') + "\"}}";
  auto r = f.request("POST", "/v1/leases", f.ci_b, big);
  problem(r, 413);
  // The same without a Content-Length (chunked transfer encoding).
  httplib::Client cli(f.url());
  size_t sent = 0;
  auto chunked = cli.Post(
      "/v1/leases", {{"Authorization", "Bearer " + f.ci_b}},
      [&](size_t, httplib::DataSink& sink) {
        std::string piece(8192, ' ');
        if (sent > 256 * 1024) {
          sink.done();
          return true;
        }
        sent += piece.size();
        return sink.write(piece.data(), piece.size());
      },
      "application/json");
  if (chunked) {  // the server may also just close the connection on us
    INFO(chunked->body);
    CHECK(chunked->status == 413);
    CHECK(chunked->get_header_value("Content-Type") == "application/problem+json");
    CHECK(chunked->body.find("65536 bytes") != std::string::npos);
  }
  // The server is still fine afterwards.
  CHECK(f.request("GET", "/healthz").status == 200);
}

TEST_CASE("http: per-token quotas are 429 with a clear detail", "[http]") {
  ApiFixture f;
  auto ttl = problem(f.request("POST", "/v1/leases", f.ci_a, R"({"pool":"tiny","ttl":"5h"})"), 429);
  CHECK(ttl["type"] == "https://armhive.dev/problems/resource-exhausted");
  CHECK(ttl["detail"].get<std::string>().find("at most 4h") != std::string::npos);

  std::string first = create(f, f.ci_a, "tiny", {{"Idempotency-Key", "job-1"}});
  create(f, f.ci_a);
  auto third = problem(f.request("POST", "/v1/leases", f.ci_a, lease_body()), 429);
  CHECK(third["detail"].get<std::string>().find("2 of its 2") != std::string::npos);
  // Retrying a create with its idempotency key is not a new lease, even at the quota.
  auto again =
      f.request("POST", "/v1/leases", f.ci_a, lease_body(), {{"Idempotency-Key", "job-1"}});
  REQUIRE(again.status == 201);
  CHECK(parse(again)["id"] == first);

  // Renewing beyond the token's max TTL is refused the same way.
  problem(f.request("POST", "/v1/leases/" + first + "/renew", f.ci_a, R"({"ttl":"6h"})"), 429);
  // Releasing one frees a slot.
  REQUIRE(f.request("DELETE", "/v1/leases/" + first, f.ci_a).status == 200);
  create(f, f.ci_a);
}

TEST_CASE("http: concurrent creates cannot exceed a token's lease quota", "[http]") {
  ApiFixture f;
  std::atomic<int> created{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      int status = f.request("POST", "/v1/leases", f.ci_a, lease_body()).status;
      (status == 201 ? created : status == 429 ? refused : other)++;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(created == 2);
  CHECK(refused == 6);
  CHECK(other == 0);
}

TEST_CASE("http: stop() ends open event streams and long-polls", "[http]") {
  ApiFixture f;
  std::string pending = create(f, f.ci_b, "slow");
  std::atomic<bool> stream_ok{false}, poll_ok{false};
  std::atomic<int> keepalives{0};
  std::thread stream([&] {
    httplib::Client cli(f.url());
    cli.set_read_timeout(std::chrono::seconds(120));
    auto res = cli.Get("/v1/events", {{"Authorization", "Bearer " + f.ci_b}},
                       [&](const char* data, size_t len) {
                         if (std::string(data, len) == "\n") ++keepalives;
                         return true;
                       });
    // Served to its end: a complete chunked body, not a dropped connection.
    stream_ok = res && res->status == 200;
  });
  std::thread poll([&] {
    httplib::Client cli(f.url());
    cli.set_read_timeout(std::chrono::seconds(120));
    auto res = cli.Get("/v1/leases/" + pending + "?wait=ready&timeout=5m",
                       {{"Authorization", "Bearer " + f.ci_b}});
    // Answered with the lease as it is, not refused or cut off.
    poll_ok = res && res->status == 200 &&
              json::parse(res->body, nullptr, false).value("state", "") == "pending";
  });
  // Both are being served once /metrics counts two waiting requests and the stream has sent
  // a keep-alive.
  bool waiting = false;
  for (int i = 0; i < 400 && !(waiting && keepalives > 0); ++i) {
    waiting = f.request("GET", "/metrics").body.find("armhive_api_waiting_requests 2") !=
              std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(waiting);
  f.server->stop();  // returns only once every connection is done
  stream.join();
  poll.join();
  CHECK(stream_ok);
  CHECK(poll_ok);
  CHECK(f.request("GET", "/healthz").status == -1);  // nothing listens any more
}

TEST_CASE("http: an idempotency key returns the same lease", "[http]") {
  ApiFixture f;
  std::string a = create(f, f.ci_b, "tiny", {{"Idempotency-Key", "pipeline-7/job-3"}});
  std::string b = create(f, f.ci_b, "tiny", {{"Idempotency-Key", "pipeline-7/job-3"}});
  CHECK(a == b);
  std::string c = create(f, f.ci_b, "tiny", {{"Idempotency-Key", "pipeline-7/job-4"}});
  CHECK(c != a);
  // Keys are scoped to the token.
  std::string d = create(f, f.admin, "tiny", {{"Idempotency-Key", "pipeline-7/job-3"}});
  CHECK(d != a);
}

TEST_CASE("http: a token cannot see or touch another token's lease", "[http]") {
  ApiFixture f;
  std::string mine = create(f, f.ci_a);
  std::string theirs = create(f, f.ci_b);

  problem(f.request("GET", "/v1/leases/" + theirs, f.ci_a), 404);
  problem(f.request("DELETE", "/v1/leases/" + theirs, f.ci_a), 404);
  problem(f.request("POST", "/v1/leases/" + theirs + "/renew", f.ci_a, R"({"ttl":"1h"})"), 404);
  problem(f.request("POST", "/v1/leases/" + theirs + "/exec", f.ci_a, R"({"argv":["id"]})"), 404);
  problem(f.request("GET", "/v1/leases/" + theirs + "/console", f.ci_a), 404);
  problem(f.request("POST", "/v1/leases/" + theirs + "/benchmarks", f.ci_a, "{}"), 404);
  // Still there for its owner.
  CHECK(parse(f.request("GET", "/v1/leases/" + theirs, f.ci_b))["state"] == "ready");

  auto list = parse(f.request("GET", "/v1/leases", f.ci_a));
  REQUIRE(list["items"].size() == 1);
  CHECK(list["items"][0]["id"] == mine);
  problem(f.request("GET", "/v1/leases?owner=ci-b", f.ci_a), 403);

  auto all = parse(f.request("GET", "/v1/leases", f.admin));
  CHECK(all["items"].size() == 2);
  auto only_b = parse(f.request("GET", "/v1/leases?owner=ci-b", f.admin));
  REQUIRE(only_b["items"].size() == 1);
  CHECK(only_b["items"][0]["id"] == theirs);
  CHECK(f.request("DELETE", "/v1/leases/" + theirs, f.admin).status == 200);
  auto entries = f.audit->recent(10, theirs);
  REQUIRE(entries.is_ok());
  CHECK((*entries)[0].actor == "admin");
}

TEST_CASE("http: lease lists filter and paginate with a cursor", "[http]") {
  ApiFixture f;
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(create(f, f.ci_b));
  std::string pending = create(f, f.ci_b, "slow");
  auto page1 = parse(f.request("GET", "/v1/leases?limit=2", f.ci_b));
  REQUIRE(page1["items"].size() == 2);
  CHECK(page1["items"][0]["id"] == ids[0]);
  REQUIRE(page1["next_cursor"].is_string());
  auto page2 = parse(f.request(
      "GET", "/v1/leases?limit=10&cursor=" + page1["next_cursor"].get<std::string>(), f.ci_b));
  REQUIRE(page2["items"].size() == 4);
  CHECK(page2["items"][0]["id"] == ids[2]);
  CHECK(page2["next_cursor"].is_null());

  auto by_pool = parse(f.request("GET", "/v1/leases?pool=slow", f.ci_b));
  REQUIRE(by_pool["items"].size() == 1);
  CHECK(by_pool["items"][0]["id"] == pending);
  auto by_state = parse(f.request("GET", "/v1/leases?state=pending", f.ci_b));
  CHECK(by_state["items"].size() == 1);
  auto by_label = parse(f.request("GET", "/v1/leases?label=job=build-42", f.ci_b));
  CHECK(by_label["items"].size() == 6);
  auto no_label = parse(f.request("GET", "/v1/leases?label=job=other", f.ci_b));
  CHECK(no_label["items"].empty());

  problem(f.request("GET", "/v1/leases?state=sleeping", f.ci_b), 400, "state");
  problem(f.request("GET", "/v1/leases?limit=0", f.ci_b), 400, "limit");
  problem(f.request("GET", "/v1/leases?limit=abc", f.ci_b), 400, "limit");
  problem(f.request("GET", "/v1/leases?limit=5000", f.ci_b), 400, "limit");
  problem(f.request("GET", "/v1/leases?label=novalue", f.ci_b), 400, "label");
}

TEST_CASE("http: ?wait=ready long-polls until the lease is ready", "[http]") {
  ApiFixture f;
  std::string id = create(f, f.ci_b, "slow");
  CHECK(parse(f.request("GET", "/v1/leases/" + id, f.ci_b))["state"] == "pending");
  // A short wait returns the lease still pending (not an error).
  auto early = f.request("GET", "/v1/leases/" + id + "?wait=ready&timeout=1s", f.ci_b);
  REQUIRE(early.status == 200);
  CHECK(parse(early)["state"] == "pending");

  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    f.leases.make_ready(id);
  });
  auto r = f.request("GET", "/v1/leases/" + id + "?wait=ready&timeout=30s", f.ci_b);
  later.join();
  REQUIRE(r.status == 200);
  json l = parse(r);
  CHECK(l["state"] == "ready");
  CHECK(l["ssh"]["host"].is_string());
  CHECK(l["history"].size() == 2);

  problem(f.request("GET", "/v1/leases/" + id + "?wait=gone", f.ci_b), 400, "wait");
  problem(f.request("GET", "/v1/leases/" + id + "?wait=ready&timeout=soon", f.ci_b), 400,
          "timeout");
  problem(f.request("GET", "/v1/leases/l-doesnotexist?wait=ready", f.ci_b), 404);
}

TEST_CASE("http: renew and release follow the lease's state", "[http]") {
  ApiFixture f;
  std::string id = create(f, f.ci_b);
  auto renewed = f.request("POST", "/v1/leases/" + id + "/renew", f.ci_b, R"({"ttl":"2h"})");
  REQUIRE(renewed.status == 200);
  CHECK(parse(renewed)["ttl_seconds"] == 7200);
  problem(f.request("POST", "/v1/leases/" + id + "/renew", f.ci_b, R"({"ttl":"9h"})"), 422, "ttl");
  problem(f.request("POST", "/v1/leases/" + id + "/renew", f.ci_b, "{}"), 400, "ttl");
  problem(f.request("POST", "/v1/leases/" + id + "/renew", f.ci_b, R"({"ttl":"1h","x":1})"), 400,
          "x");

  auto gone = f.request("DELETE", "/v1/leases/" + id, f.ci_b);
  REQUIRE(gone.status == 200);
  json l = parse(gone);
  CHECK(l["state"] == "released");
  CHECK(l["ended_at"].is_string());
  CHECK(l["ssh"].is_null());
  problem(f.request("DELETE", "/v1/leases/" + id, f.ci_b), 409);
  problem(f.request("POST", "/v1/leases/" + id + "/renew", f.ci_b, R"({"ttl":"1h"})"), 409);
  problem(f.request("DELETE", "/v1/leases/l-000000000999", f.ci_b), 404);

  auto entries = f.audit->recent(10, id);
  REQUIRE(entries.is_ok());
  REQUIRE(entries->size() == 3);
  CHECK((*entries)[0].action == "lease.release");
  CHECK((*entries)[1].action == "lease.renew");
}

TEST_CASE("http: exec runs a command in the guest and returns its output", "[http]") {
  ApiFixture f;
  std::string id = create(f, f.ci_b);
  auto echo = f.request("POST", "/v1/leases/" + id + "/exec", f.ci_b,
                        R"({"argv":["echo","hello","arm"],"timeout_s":10})");
  REQUIRE(echo.status == 200);
  json e = parse(echo);
  CHECK(e["exit_code"] == 0);
  CHECK(e["stdout"] == "hello arm\n");
  CHECK(e["timed_out"] == false);
  CHECK(f.leases.last_exec().timeout == std::chrono::seconds(10));

  auto cat = parse(f.request("POST", "/v1/leases/" + id + "/exec", f.ci_b,
                             R"({"argv":["cat"],"stdin_base64":"aGk="})"));
  CHECK(cat["stdout"] == "hi");
  auto text = parse(f.request("POST", "/v1/leases/" + id + "/exec", f.ci_b,
                              R"({"argv":["cat"],"stdin":"plain"})"));
  CHECK(text["stdout"] == "plain");
  auto bin =
      parse(f.request("POST", "/v1/leases/" + id + "/exec", f.ci_b, R"({"argv":["binary"]})"));
  CHECK(bin["stdout_base64"] == "//4AAQ==");
  CHECK_FALSE(bin.contains("stdout"));
  auto fail =
      parse(f.request("POST", "/v1/leases/" + id + "/exec", f.ci_b, R"({"argv":["false"]})"));
  CHECK(fail["exit_code"] == 1);
  CHECK(fail["stderr"] == "failed\n");

  auto post = [&](const std::string& body) {
    return f.request("POST", "/v1/leases/" + id + "/exec", f.ci_b, body);
  };
  problem(post(R"({"argv":[]})"), 400, "argv");
  problem(post(R"({})"), 400, "argv");
  problem(post(R"({"argv":"ls -l"})"), 400, "argv");
  problem(post(R"({"argv":["ls",3]})"), 400, "argv[1]");
  problem(post(R"({"argv":["ls"],"timeout_s":0})"), 400, "timeout_s");
  problem(post(R"({"argv":["ls"],"timeout_s":99999})"), 400, "timeout_s");
  problem(post(R"({"argv":["ls"],"stdin_base64":"***"})"), 400, "stdin_base64");
  problem(post(R"({"argv":["ls"],"shell":true})"), 400, "shell");

  std::string pending = create(f, f.ci_b, "slow");
  problem(f.request("POST", "/v1/leases/" + pending + "/exec", f.ci_b, R"({"argv":["ls"]})"), 409);
}

TEST_CASE("http: an exception in the service is a 500 problem, not a crash", "[http]") {
  ApiFixture f;
  std::string id = create(f, f.ci_b);
  auto r = f.request("POST", "/v1/leases/" + id + "/exec", f.ci_b, R"({"argv":["throw"]})");
  auto j = problem(r, 500);
  CHECK(j["detail"].get<std::string>().find("blew up") == std::string::npos);  // no internals
  CHECK(f.request("GET", "/healthz").status == 200);
}

TEST_CASE("http: console returns the serial log as text", "[http]") {
  ApiFixture f;
  std::string id = create(f, f.ci_b);
  auto r = f.request("GET", "/v1/leases/" + id + "/console", f.ci_b);
  REQUIRE(r.status == 200);
  CHECK(r.content_type.rfind("text/plain", 0) == 0);
  CHECK(r.body.find("Booting Linux") != std::string::npos);
  auto tail = f.request("GET", "/v1/leases/" + id + "/console?max_bytes=10", f.ci_b);
  CHECK(tail.body.size() == 10);
  problem(f.request("GET", "/v1/leases/" + id + "/console?max_bytes=-1", f.ci_b), 400, "max_bytes");
}

TEST_CASE("http: pools and hosts describe capacity and the core map", "[http]") {
  ApiFixture f;
  std::string mine = create(f, f.ci_b);
  auto pools = parse(f.request("GET", "/v1/pools", f.reader));
  REQUIRE(pools["items"].size() == 2);
  json tiny;
  for (const auto& p : pools["items"]) {
    if (p["name"] == "tiny") tiny = p;
  }
  CHECK(tiny["warm"] == 2);
  CHECK(tiny["leased"] == 1);
  CHECK(tiny["max_ttl_seconds"] == 8 * 3600);
  CHECK(tiny["cpu_policy"] == "dedicated");
  CHECK_FALSE(tiny.contains("warm_target"));  // a fixed min_warm

  // A pool on min_warm = "auto": its target and why, in the listing and in /metrics.
  f.leases.set_auto_target("slow", {.auto_min = 0, .auto_max = 3},
                           {.target = 2,
                            .reason = "expected 1.4 arrivals in the next boot time (15 s)",
                            .expected_arrivals = 1.4,
                            .rate_per_min = 5.6,
                            .run_size = 4,
                            .runs_per_hour = 0.5});
  bool auto_listed = false;
  const json with_auto = parse(f.request("GET", "/v1/pools", f.reader));
  for (const auto& p : with_auto["items"]) {
    if (p["name"] != "slow") continue;
    CHECK(p["min_warm"] == 2);
    CHECK(p["warm_target"]["target"] == 2);
    CHECK(p["warm_target"]["auto_max"] == 3);
    CHECK(p["warm_target"]["run_size"] == 4);
    CHECK(p["warm_target"]["runs_per_hour"] == 0.5);
    CHECK(p["warm_target"]["reason"] == "expected 1.4 arrivals in the next boot time (15 s)");
    auto_listed = true;
  }
  CHECK(auto_listed);
  CHECK(f.request("GET", "/metrics", f.admin)
            .body.find("armhive_pool_warm_target{pool=\"slow\"} 2") != std::string::npos);

  auto hosts = parse(f.request("GET", "/v1/hosts", f.ci_b));
  REQUIRE(hosts["items"].size() == 1);
  json h = hosts["items"][0];
  CHECK(h["hostname"] == "honeycomb");
  CHECK(h["accel"] == "kvm");
  CHECK(h["clusters"] == json::parse("[[0,1],[2,3]]"));
  REQUIRE(h["cores"].size() == 4);
  CHECK(h["cores"][0]["role"] == "housekeeping");
  CHECK(h["cores"][2]["lease_id"] == mine);
  // Another token sees that the core is taken, not by which lease.
  auto other = parse(f.request("GET", "/v1/hosts", f.ci_a));
  CHECK(other["items"][0]["cores"][2]["lease_id"] == "other");
  CHECK(other["items"][0]["cores"][2]["vm"] == "");

  auto svg = f.request("GET", "/v1/hosts?format=svg", f.ci_b);
  REQUIRE(svg.status == 200);
  CHECK(svg.content_type == "image/svg+xml");
  CHECK(svg.body.find("<svg") != std::string::npos);
  auto accept = f.request("GET", "/v1/hosts", f.ci_b, {}, {{"Accept", "image/svg+xml"}});
  CHECK(accept.content_type == "image/svg+xml");
  problem(f.request("GET", "/v1/hosts?format=png", f.ci_b), 400, "format");
  problem(f.request("GET", "/v1/hosts?format=svg&host=nohost", f.ci_b), 404);

  auto page = f.request("GET", "/ui/hosts", f.ci_b);
  REQUIRE(page.status == 200);
  CHECK(page.content_type.rfind("text/html", 0) == 0);
  CHECK(page.body.find("<svg") != std::string::npos);
  CHECK(page.body.find("honeycomb") != std::string::npos);
  CHECK(page.body.find("Last error") == std::string::npos);
  f.leases.set_host_state(HostState::kDegraded, "virConnectListAllDomains: <timed out>");
  auto degraded = f.request("GET", "/ui/hosts", f.ci_b);
  CHECK(degraded.body.find("<b>degraded</b>") != std::string::npos);
  CHECK(degraded.body.find("Last error: virConnectListAllDomains: &lt;timed out&gt;") !=
        std::string::npos);

  // A host that stopped answering: the page, the JSON and the state filter say so.
  f.leases.set_host_state(HostState::kUnreachable, "libvirt did not answer within 10s");
  auto away = f.request("GET", "/ui/hosts", f.ci_b);
  CHECK(away.body.find("<b>unreachable</b> since 2027-01-15T08:00:00.000Z") != std::string::npos);
  auto listed = f.request("GET", "/v1/hosts", f.admin);
  REQUIRE(listed.status == 200);
  json host = json::parse(listed.body)["items"][0];
  CHECK(host["state"] == "unreachable");
  CHECK(host["unreachable_since"] == "2027-01-15T08:00:00.000Z");
  CHECK(host["last_error"] == "libvirt did not answer within 10s");
  CHECK(f.request("GET", "/v1/leases?state=host_unreachable", f.admin).status == 200);
  problem(f.request("GET", "/v1/leases?state=gone", f.admin), 400, "state");
}

TEST_CASE("http: events stream as NDJSON, filtered to the token's own leases", "[http]") {
  ApiFixture f;
  std::string mine = create(f, f.ci_a);
  std::string theirs = create(f, f.ci_b);

  auto drained = f.request("GET", "/v1/events?since=0&follow=false", f.ci_a);
  REQUIRE(drained.status == 200);
  CHECK(drained.content_type == "application/x-ndjson");
  std::vector<json> events;
  std::istringstream lines(drained.body);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) events.push_back(json::parse(line));
  }
  REQUIRE(events.size() == 2);  // created + ready of ci-a's lease only
  for (const auto& e : events) CHECK(e["lease_id"] == mine);
  CHECK(events[0]["type"] == "lease.created");
  CHECK(events[1]["type"] == "lease.ready");
  uint64_t last = events[1]["seq"];

  auto admin = f.request("GET", "/v1/events?follow=false", f.admin);
  CHECK(std::count(admin.body.begin(), admin.body.end(), '\n') == 4);
  uint64_t newest =
      json::parse(admin.body.substr(admin.body.rfind('\n', admin.body.size() - 2) + 1))["seq"];
  auto since = f.request("GET", "/v1/events?follow=false&since=" + std::to_string(last), f.admin);
  CHECK(since.body.find(theirs) != std::string::npos);
  CHECK(since.body.find(mine) == std::string::npos);
  problem(f.request("GET", "/v1/events?since=abc", f.admin), 400, "since");

  // Following: events emitted after the stream opened arrive, with keep-alive newlines
  // in between; the client stops reading once it has seen them.
  httplib::Client cli(f.url());
  cli.set_read_timeout(std::chrono::seconds(30));
  std::string received;
  bool saw_keepalive = false;
  std::thread emitter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    f.leases.emit("vm.crashed", theirs, "ci-b");
    f.leases.emit("vm.crashed", mine, "ci-a");
  });
  cli.Get("/v1/events?since=" + std::to_string(newest), {{"Authorization", "Bearer " + f.ci_a}},
          [&](const char* data, size_t len) {
            std::string chunk(data, len);
            if (chunk == "\n") saw_keepalive = true;
            received += chunk;
            return received.find("vm.crashed") == std::string::npos;
          });
  emitter.join();
  CHECK(received.find(mine) != std::string::npos);
  CHECK(received.find(theirs) == std::string::npos);
  CHECK(saw_keepalive);
}

TEST_CASE("http: benchmarks start, list, report and compare through the service", "[http]") {
  ApiFixture f;
  std::string id = create(f, f.ci_b);
  auto started = f.request("POST", "/v1/leases/" + id + "/benchmarks", f.ci_b,
                           R"({"suites":["compression"],"compression":{"level":3}})");
  REQUIRE(started.status == 202);
  json run = parse(started);
  CHECK(run["state"] == "queued");
  CHECK(run["lease_id"] == id);
  CHECK(run["owner"] == "ci-b");
  std::string run_id = run["id"];
  CHECK(started.headers["Location"] == "/v1/benchmarks/" + run_id);
  std::string second =
      parse(f.request("POST", "/v1/leases/" + id + "/benchmarks", f.ci_b, ""))["id"];

  auto got = parse(f.request("GET", "/v1/benchmarks/" + run_id, f.ci_b));
  CHECK(got["state"] == "succeeded");
  auto list = parse(f.request("GET", "/v1/benchmarks?lease_id=" + id, f.ci_b));
  CHECK(list["items"].size() == 2);
  auto html = f.request("GET", "/v1/benchmarks/" + run_id + "/report.html", f.ci_b);
  CHECK(html.status == 200);
  CHECK(html.content_type.rfind("text/html", 0) == 0);
  auto csv = f.request("GET", "/v1/benchmarks/" + run_id + "/report.csv", f.ci_b);
  CHECK(csv.content_type.rfind("text/csv", 0) == 0);
  CHECK(csv.body.rfind("run,", 0) == 0);
  auto cmp = f.request("GET", "/v1/benchmarks/compare?ids=" + run_id + "," + second, f.ci_b);
  CHECK(cmp.status == 200);
  CHECK(cmp.content_type.rfind("text/html", 0) == 0);
  auto cmpj = parse(
      f.request("GET", "/v1/benchmarks/compare?format=json&ids=" + run_id + "," + second, f.ci_b));
  CHECK(cmpj["runs"].size() == 2);
  CHECK(cmpj["metrics"][0]["ratios"].size() == 2);

  problem(
      f.request("POST", "/v1/leases/" + id + "/benchmarks", f.ci_b, R"({"network":{"streams":0}})"),
      400, "network.streams");
  problem(f.request("POST", "/v1/leases/" + id + "/benchmarks", f.ci_b, R"({"suites":["disk"]})"),
          400, "suites");
  problem(f.request("GET", "/v1/benchmarks/compare?ids=" + run_id, f.ci_b), 400, "ids");
  problem(f.request("GET", "/v1/benchmarks/b-nope", f.ci_b), 404);
  // Another token's runs are invisible.
  problem(f.request("GET", "/v1/benchmarks/" + run_id, f.ci_a), 404);
  problem(f.request("GET", "/v1/benchmarks/" + run_id + "/report.html", f.ci_a), 404);
  CHECK(parse(f.request("GET", "/v1/benchmarks", f.ci_a))["items"].empty());
  std::string pending = create(f, f.ci_b, "slow");
  problem(f.request("POST", "/v1/leases/" + pending + "/benchmarks", f.ci_b, "{}"), 409);
}

TEST_CASE("http: without a benchmark service the endpoints are 503 problems", "[http]") {
  ApiFixture f(/*with_benchmarks=*/false);
  std::string id = create(f, f.ci_b);
  auto j = problem(f.request("POST", "/v1/leases/" + id + "/benchmarks", f.ci_b, "{}"), 503);
  CHECK(j["detail"].get<std::string>().find("not enabled") != std::string::npos);
  problem(f.request("GET", "/v1/benchmarks", f.ci_b), 503);
}

TEST_CASE("http: /metrics is valid Prometheus text with lease, pool and API figures", "[http]") {
  ApiFixture f;
  create(f, f.ci_b);
  create(f, f.ci_b, "slow");
  f.request("GET", "/v1/pools", f.ci_b);
  f.metrics.observe("armhive_handout_seconds", {{"pool", "tiny"}}, 0.4);  // as the engine does
  auto r = f.request("GET", "/metrics");
  REQUIRE(r.status == 200);
  CHECK(r.content_type.rfind("text/plain; version=0.0.4", 0) == 0);

  // Prometheus text format: a sample value is a Go float (exponents included, as fast builds
  // print 6.3565e-05), +Inf, -Inf or NaN.
  std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\+Inf|-Inf|NaN)$)");
  std::regex comment(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$)");
  std::map<std::string, double> values;
  std::istringstream lines(r.body);
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    if (line.rfind("#", 0) == 0) {
      CHECK(std::regex_match(line, comment));
      continue;
    }
    std::smatch m;
    REQUIRE(std::regex_match(line, m, sample));
    values[line.substr(0, line.rfind(' '))] = std::stod(m[m.size() - 1].str());
  }
  CHECK(values["armhive_leases{state=\"ready\"}"] == 1);
  CHECK(values["armhive_leases{state=\"pending\"}"] == 1);
  CHECK(values["armhive_pool_warm_vms{pool=\"tiny\"}"] == 2);
  CHECK(values["armhive_pool_pending_leases{pool=\"slow\"}"] == 1);
  CHECK(values["armhive_host_cores_allocated{host=\"honeycomb\"}"] == 2);
  CHECK(values["armhive_host_state{host=\"honeycomb\",state=\"ok\"}"] == 1);
  CHECK(values["armhive_host_state{host=\"honeycomb\",state=\"unreachable\"}"] == 0);
  CHECK(values["armhive_api_requests_total{code=\"201\",method=\"POST\",route=\"/v1/leases\"}"] ==
        2);
  CHECK(values["armhive_api_request_duration_seconds_count{method=\"GET\",route=\"/v1/pools\"}"] ==
        1);
  CHECK(values["armhive_handout_seconds_count{pool=\"tiny\"}"] == 1);
  CHECK(r.body.find("# TYPE armhive_api_request_duration_seconds histogram") != std::string::npos);
}

TEST_CASE("http: the server binds loopback on an ephemeral port and refuses a taken one",
          "[http]") {
  ApiFixture f;
  CHECK(f.url().rfind("http://127.0.0.1:", 0) == 0);
  CHECK(f.server->port() > 0);
  HttpOptions o;
  o.port = f.server->port();
  HttpServer second(o, f.leases, nullptr, *f.tokens, *f.audit, f.metrics);
  Status s = second.start();
  CHECK(s.code() == ErrorCode::kUnavailable);
  HttpOptions tls;
  tls.port = 0;
  tls.tls_cert_file = "/nonexistent/cert.pem";
  HttpServer third(tls, f.leases, nullptr, *f.tokens, *f.audit, f.metrics);
  CHECK(third.start().code() == ErrorCode::kInvalidArgument);
  tls.tls_key_file = "/nonexistent/key.pem";
  HttpServer fourth(tls, f.leases, nullptr, *f.tokens, *f.audit, f.metrics);
  CHECK(fourth.start().code() == ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace armhive
