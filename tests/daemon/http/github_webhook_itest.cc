// POST /v1/github/webhook as routed by the server: public (no bearer token), the GitHub headers,
// raw body and peer handed to the provider unchanged, its verdict mapped to the answer. The
// provider itself (signatures, replay window, runners) is tested in tests/daemon/github.
#include <catch2/catch.hpp>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/daemon/http/api_fixture.h"

namespace armhive {
namespace {

struct Delivered {
  std::mutex mu;
  std::vector<std::string> events, deliveries, signatures, bodies, remotes;
};

std::function<void(HttpOptions&)> with_provider(Delivered& got) {
  return [&got](HttpOptions& o) {
    o.github_webhook = [&got](const std::string& event, const std::string& delivery,
                              const std::string& signature, const std::string& body,
                              const std::string& remote) -> Status {
      if (signature != "sha256=good") return Status(ErrorCode::kUnauthenticated, "bad signature");
      std::lock_guard lock(got.mu);
      got.events.push_back(event);
      got.deliveries.push_back(delivery);
      got.signatures.push_back(signature);
      got.bodies.push_back(body);
      got.remotes.push_back(remote);
      return Status::ok();
    };
  };
}

TEST_CASE("http: the GitHub webhook is public and hands the delivery to the provider",
          "[http][github]") {
  Delivered got;
  ApiFixture f(true, with_provider(got));
  const std::string body = R"({"action":"queued","workflow_job":{"id":1}})";
  auto ok = f.request("POST", "/v1/github/webhook", {}, body,
                      {{"X-GitHub-Event", "workflow_job"},
                       {"X-GitHub-Delivery", "d-1"},
                       {"X-Hub-Signature-256", "sha256=good"}});
  INFO(ok.body);
  CHECK(ok.status == 202);
  CHECK(nlohmann::json::parse(ok.body, nullptr, false)["status"] == "accepted");
  std::lock_guard lock(got.mu);
  REQUIRE(got.bodies.size() == 1);
  CHECK(got.events[0] == "workflow_job");
  CHECK(got.deliveries[0] == "d-1");
  CHECK(got.bodies[0] == body);  // the raw bytes the signature covers
  CHECK(got.remotes[0] == "127.0.0.1");
}

TEST_CASE("http: a refused webhook delivery is a problem, and no provider means no route",
          "[http][github]") {
  Delivered got;
  ApiFixture f(true, with_provider(got));
  auto bad = f.request("POST", "/v1/github/webhook", {}, "{}",
                       {{"X-GitHub-Event", "workflow_job"},
                        {"X-GitHub-Delivery", "d-2"},
                        {"X-Hub-Signature-256", "sha256=forged"}});
  CHECK(bad.status == 401);
  CHECK(bad.content_type.find("application/problem+json") != std::string::npos);
  {
    std::lock_guard lock(got.mu);
    CHECK(got.bodies.empty());
  }
  ApiFixture plain;
  CHECK(plain.request("POST", "/v1/github/webhook", {}, "{}").status == 404);
}

TEST_CASE("http: a webhook body over the limit is refused before the provider, and audited",
          "[http][github]") {
  Delivered got;
  ApiFixture f(true, [&got](HttpOptions& o) {
    with_provider(got)(o);
    o.max_body_bytes = 1024;
  });
  auto big = f.request("POST", "/v1/github/webhook", {}, std::string(4096, 'x'),
                       {{"X-GitHub-Event", "workflow_job"},
                        {"X-GitHub-Delivery", "d-big"},
                        {"X-Hub-Signature-256", "sha256=good"}});
  CHECK(big.status == 413);
  {
    std::lock_guard lock(got.mu);
    CHECK(got.bodies.empty());
  }
  bool audited = false;
  for (int i = 0; i < 100 && !audited; ++i) {  // queued for the audit writer after the reply
    REQUIRE(f.audit->flush().is_ok());
    auto entries = f.audit->recent(10);
    REQUIRE(entries.is_ok());
    for (const auto& e : *entries) {
      audited |= e.action == "http.refused" &&
                 e.detail.find("/v1/github/webhook") != std::string::npos &&
                 e.detail.find("413") != std::string::npos;
    }
    if (!audited) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(audited);
}

TEST_CASE("http: GET /v1/github shows the provider's state to admins, 404 without a provider",
          "[http][github]") {
  ApiFixture f(true, [](HttpOptions& o) {
    o.github_state = [] {
      GithubStateDto g;
      g.last_reconcile = "2026-01-02T03:04:05.000Z";
      g.pending_jobs = 2;
      g.runners = 3;
      g.rate_limit_remaining = 4999;
      g.rate_limit_reset = "2026-01-02T04:00:00.000Z";
      g.reconciled_jobs_total = 5;
      g.ghosts_deleted_total = 6;
      g.rate_limited_total = 7;
      return g;
    };
  });
  auto ok = f.request("GET", "/v1/github", f.admin);
  INFO(ok.body);
  REQUIRE(ok.status == 200);
  auto j = nlohmann::json::parse(ok.body, nullptr, false);
  CHECK(j["last_reconcile"] == "2026-01-02T03:04:05.000Z");
  CHECK(j["last_reconcile_error"] == "");
  CHECK(j["pending_jobs"] == 2);
  CHECK(j["runners"] == 3);
  CHECK(j["rate_limit_remaining"] == 4999);
  CHECK(j["reconciled_jobs_total"] == 5);
  CHECK(j["ghosts_deleted_total"] == 6);
  CHECK(j["rate_limited_total"] == 7);
  CHECK_FALSE(j.contains("backoff_until"));
  CHECK(f.request("GET", "/v1/github", f.reader).status == 403);
  CHECK(f.request("GET", "/v1/github").status == 401);
  auto metrics = f.request("GET", "/metrics");
  CHECK(metrics.body.find("\narmhive_github_rate_limit_remaining 4999\n") != std::string::npos);

  ApiFixture plain;
  auto none = plain.request("GET", "/v1/github", plain.admin);
  CHECK(none.status == 404);
  CHECK(none.content_type.find("application/problem+json") != std::string::npos);
  CHECK(none.body.find("GitHub is not configured") != std::string::npos);
  // Described, but no series without a provider.
  CHECK(plain.request("GET", "/metrics").body.find("\narmhive_github_rate_limit_remaining ") ==
        std::string::npos);
}

}  // namespace
}  // namespace armhive
