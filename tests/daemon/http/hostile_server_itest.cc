// Issue 33 ("hostile tenants v2"), the server's findings, black-box against the in-process
// server: JSON nesting (1), bounded /metrics labels (2), the audit log under floods without a
// token (3), forged log lines (10) and corrupted paging cursors (11).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "daemon/github/github_provider.h"
#include "daemon/github/webhook_signature.h"
#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

using nlohmann::json;

// One request over a fresh loopback connection, written as given (a method or path no client
// library would send); returns everything the server answered before it closed.
std::string raw_exchange(int port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  std::string_view rest = request;
  while (!rest.empty()) {
    ssize_t n = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    rest.remove_prefix(static_cast<size_t>(n));
  }
  std::string out;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) break;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

int port_of(const ApiFixture& f) {
  const std::string url = f.url();
  return std::stoi(url.substr(url.rfind(':') + 1));
}

json body_of(const HttpReply& r) {
  json j = json::parse(r.body, nullptr, false);
  INFO(r.body);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

// The label sets of one metric's series in a /metrics text.
std::vector<std::string> series_of(const std::string& metrics, const std::string& name) {
  std::vector<std::string> out;
  std::regex line("^" + name + "\\{([^}]*)\\} ", std::regex::multiline);
  for (auto it = std::sregex_iterator(metrics.begin(), metrics.end(), line);
       it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

TEST_CASE("http: a body of 60,000 opening brackets is 400 naming body and the depth limit",
          "[http][hostile33]") {
  ApiFixture f;
  auto r = f.request("POST", "/v1/leases", f.ci_b, std::string(60000, '['));
  CHECK(r.status == 400);
  json p = body_of(r);
  CHECK(p["field"] == "body");
  CHECK_THAT(p["detail"].get<std::string>(), Catch::Contains("limit of 64 levels"));
  // Every JSON endpoint parses through the same check.
  auto renew = f.request("POST", "/v1/leases/l-000000000000/renew", f.ci_b,
                         R"({"ttl":)" + std::string(100, '[') + std::string(100, ']') + "}");
  CHECK(renew.status == 400);
  CHECK(body_of(renew)["field"] == "body");
}

TEST_CASE("http: invented methods and random paths add no /metrics series", "[http][hostile33]") {
  ApiFixture f;
  const int port = port_of(f);
  // Warm up the series a normal client makes, then flood without a token.
  REQUIRE(f.request("GET", "/healthz").status == 200);
  REQUIRE(raw_exchange(port, "BREW /v1/nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
              .find(" 404 ") != std::string::npos);
  const std::string before = f.request("GET", "/metrics").body;
  const auto series_before = series_of(before, "armhive_api_requests_total");
  for (int i = 0; i < 200; ++i) {
    const std::string method = "X" + std::to_string(1000 + i) + "Q";
    const std::string path = "/r" + std::to_string(i) + "/p" + std::to_string(i * 7919);
    std::string reply = raw_exchange(
        port, method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    INFO(reply);
    REQUIRE(reply.rfind("HTTP/1.1 ", 0) == 0);
  }
  const std::string after = f.request("GET", "/metrics").body;
  const auto series_after = series_of(after, "armhive_api_requests_total");
  std::set<std::string> added(series_after.begin(), series_after.end());
  for (const auto& s : series_before) added.erase(s);
  INFO(after);
  // At most the /metrics scrape's own series is new; no invented method or path is a label.
  CHECK(added.size() <= 1);
  CHECK(after.find("X1000Q") == std::string::npos);
  CHECK(after.find("/r1/") == std::string::npos);
  for (const auto& s : series_after) {
    INFO(s);
    std::smatch m;
    REQUIRE(std::regex_search(s, m, std::regex("method=\"([^\"]*)\"")));
    CHECK(std::set<std::string>{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS",
                                "CONNECT", "TRACE", "other"}
              .count(m[1]) == 1);
    REQUIRE(std::regex_search(s, m, std::regex("route=\"([^\"]*)\"")));
    CHECK((m[1] == "other" || m[1].str().rfind("/", 0) == 0));
  }
}

TEST_CASE("http: a percent-decoded newline in a path cannot forge a log line",
          "[http][hostile33]") {
  std::mutex mu;
  std::vector<std::string> lines;
  ApiFixture f(true, [&](HttpOptions& o) {
    o.log = [&](std::string_view line) {
      std::lock_guard lock(mu);
      lines.emplace_back(line);
    };
  });
  std::string reply = raw_exchange(
      port_of(f), "GET /%0Afake-line%0D%1b[31m HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  REQUIRE(reply.find(" 404 ") != std::string::npos);
  std::lock_guard lock(mu);
  bool seen = false;
  for (const std::string& l : lines) {
    INFO(l);
    CHECK(l.find('\n') == std::string::npos);
    CHECK(l.find('\r') == std::string::npos);
    CHECK(l.find('\x1b') == std::string::npos);
    CHECK(l.rfind("fake-line", 0) != 0);
    if (l.find("fake-line") != std::string::npos) {
      seen = true;
      CHECK(l == "127.0.0.1 GET /\\nfake-line\\r\\x1b[31m 404");
    }
  }
  CHECK(seen);
}

TEST_CASE("http: a cursor that names no lease of the listing is 400 naming cursor",
          "[http][hostile33]") {
  ApiFixture f;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(f.request("POST", "/v1/leases", f.ci_b, R"({"pool":"tiny"})").status == 201);
  }
  REQUIRE(f.request("POST", "/v1/leases", f.ci_a, R"({"pool":"tiny"})").status == 201);
  // A real cursor pages on.
  auto first = f.request("GET", "/v1/leases?limit=2", f.ci_b);
  REQUIRE(first.status == 200);
  const std::string next = body_of(first)["next_cursor"];
  auto second = f.request("GET", "/v1/leases?limit=2&cursor=" + next, f.ci_b);
  CHECK(second.status == 200);
  CHECK(body_of(second)["items"].size() == 1);
  // Corrupted ones used to be a 200 with an empty page.
  for (const char* bad : {"AAAA", "%00%ff", "l-ffffffffffff", ""}) {
    INFO(bad);
    auto r = f.request("GET", std::string("/v1/leases?cursor=") + bad, f.ci_b);
    CHECK(r.status == 400);
    CHECK(body_of(r)["field"] == "cursor");
  }
  // Another owner's lease is refused like an unknown id (a cursor cannot probe ids); for an
  // admin it is a lease of the listing.
  const std::string theirs = body_of(f.request("GET", "/v1/leases", f.ci_a))["items"][0]["id"];
  auto probe = f.request("GET", "/v1/leases?cursor=" + theirs, f.ci_b);
  CHECK(probe.status == 400);
  CHECK(body_of(probe)["field"] == "cursor");
  CHECK(f.request("GET", "/v1/leases?cursor=" + theirs, f.admin).status == 200);
}

// What armhived's main() does with the provider's events (daemon/main.cc start_github): a
// refused delivery is a stranger's, rate limited by its source.
void audit_github_event(AuditLog& audit, const GithubEvent& e) {
  if (!e.source.empty()) {
    (void)audit.record_stranger("github", e.type, e.source, e.lease_id, e.detail);
    return;
  }
  (void)audit.record("github", e.type, e.lease_id, e.detail);
}

class NoGithubApi final : public GithubApi {
 public:
  Result<JitRunner> generate_jitconfig(const JitRequest&) override {
    return unavailable("not in this test");
  }
  Status delete_runner(int64_t) override { return unavailable("not in this test"); }
  Result<std::vector<GithubRunnerInfo>> list_runners() override {
    return unavailable("not in this test");
  }
  Result<std::vector<QueuedJob>> list_queued_jobs(const std::string&) override {
    return unavailable("not in this test");
  }
  GithubRateLimit rate_limit() const override { return {}; }
};

TEST_CASE(
    "http: 1,000 oversized /healthz and 1,000 badly signed webhooks write a bounded "
    "audit log with a summary that counts them",
    "[http][hostile33][audit]") {
  NoGithubApi api;
  std::unique_ptr<GithubProvider> provider;
  std::unique_ptr<ApiFixture> fixture;
  fixture = std::make_unique<ApiFixture>(true, [&](HttpOptions& o) {
    o.max_body_bytes = 1024;
    o.github_webhook = [&](const std::string& event, const std::string& delivery,
                           const std::string& signature, const std::string& body,
                           const std::string& remote) {
      return provider->deliver(event, delivery, signature, body, remote);
    };
  });
  ApiFixture& f = *fixture;
  GithubProviderOptions options;
  options.webhook_secret = "the-real-secret";
  options.label_pools = {{"armhive-arm64", "tiny"}};
  options.runner_command = {"/opt/actions-runner/run.sh"};
  provider = std::make_unique<GithubProvider>(
      options, f.leases, [](const std::string&, const StartupRequestDto&) { return Status::ok(); },
      api, f.clock, [&f](const GithubEvent& e) { audit_github_event(*f.audit, e); });

  const int port = port_of(f);
  for (int i = 0; i < 1000; ++i) {
    std::string reply =
        raw_exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n");
    REQUIRE(reply.rfind("HTTP/1.1 413", 0) == 0);
  }
  const std::string body = R"({"action":"queued","workflow_job":{"id":1}})";
  const std::string forged = webhook_signature("a-guess", body);
  for (int i = 0; i < 1000; ++i) {
    auto r = f.request("POST", "/v1/github/webhook", {}, body,
                       {{"X-GitHub-Event", "workflow_job"},
                        {"X-GitHub-Delivery", "d-" + std::to_string(i)},
                        {"X-Hub-Signature-256", forged}});
    REQUIRE(r.status == 401);
  }
  REQUIRE(f.audit->flush().is_ok());
  auto rows = f.audit->recent(10000);
  REQUIRE(rows.is_ok());
  const size_t one_by_one = rows->size();
  CHECK(one_by_one <= 10);  // 5 a minute per kind and source (EventThrottleOptions)
  // The window ends: one summary row per kind counts the rest.
  f.audit_clock.advance(std::chrono::seconds(61));
  REQUIRE(f.audit->flush().is_ok());
  rows = f.audit->recent(10000);
  REQUIRE(rows.is_ok());
  CHECK(rows->size() == one_by_one + 2);
  std::map<std::string, size_t> written;
  std::map<std::string, std::string> summary;
  for (const AuditEntry& e : *rows) {
    if (e.actor == "armhived") {
      summary[e.action] = e.detail;
    } else {
      ++written[e.action];
    }
  }
  INFO(summary["http.refused"]);
  INFO(summary["github.webhook_rejected"]);
  CHECK_THAT(summary["http.refused"],
             Catch::StartsWith(std::to_string(1000 - written["http.refused"]) +
                               " more http.refused from 1 source"));
  CHECK_THAT(summary["github.webhook_rejected"],
             Catch::StartsWith(std::to_string(1000 - written["github.webhook_rejected"]) +
                               " more github.webhook_rejected from 1 source"));
  CHECK_THAT(summary["http.refused"], Catch::Contains("127.0.0.1"));
  // /metrics counts what was not written one by one.
  const std::string metrics = f.request("GET", "/metrics").body;
  CHECK_THAT(metrics, Catch::Contains("armhive_audit_suppressed_total{action=\"http.refused\"} " +
                                      std::to_string(1000 - written["http.refused"])));
  fixture.reset();  // the server before the provider it calls
}

}  // namespace
}  // namespace armhive
