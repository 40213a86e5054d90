#include <catch2/catch.hpp>

#include "daemon/github/delivery_window.h"
#include "daemon/github/webhook_signature.h"
#include "daemon/github/workflow_job.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

TEST_CASE("github: the webhook signature is GitHub's HMAC-SHA256 and is verified", "[github]") {
  // GitHub's documented example ("Validating webhook deliveries"): secret "It's a Secret to
  // Everybody", payload "Hello, World!".
  const std::string expected =
      "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
  CHECK(webhook_signature("It's a Secret to Everybody", "Hello, World!") == expected);
  CHECK(verify_webhook_signature("It's a Secret to Everybody", "Hello, World!", expected).is_ok());
  // Upper-case hex is the same digest.
  std::string upper = expected;
  for (size_t i = 7; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
  CHECK(verify_webhook_signature("It's a Secret to Everybody", "Hello, World!", upper).is_ok());

  const std::string body = R"({"action":"queued"})";
  const std::string good = webhook_signature("s3cret", body);
  std::string flipped = good;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  for (const std::string& bad :
       {std::string(), std::string("sha1=") + good.substr(7), good.substr(0, good.size() - 1),
        flipped, std::string("sha256=") + std::string(64, 'g'), webhook_signature("other", body)}) {
    INFO(bad);
    Status s = verify_webhook_signature("s3cret", body, bad);
    CHECK(s.code() == ErrorCode::kUnauthenticated);
    CHECK(s.field() == "X-Hub-Signature-256");
  }
  // The body is what is signed: one changed byte fails.
  CHECK_FALSE(verify_webhook_signature("s3cret", body + " ", good).is_ok());
  // No secret configured: nothing verifies, not even a signature made with the empty key.
  CHECK_FALSE(verify_webhook_signature("", body, webhook_signature("", body)).is_ok());
}

TEST_CASE("github: a delivery id is refused within the replay window and admitted after",
          "[github]") {
  DeliveryWindow w(60s, 3);
  const TimePoint t0 = from_unix_ms(1'700'000'000'000);
  REQUIRE(w.admit("d-1", t0).is_ok());
  Status again = w.admit("d-1", t0 + 59s);
  CHECK(again.code() == ErrorCode::kConflict);
  CHECK(again.field() == "X-GitHub-Delivery");
  CHECK(w.admit("d-1", t0 + 61s).is_ok());  // the window passed
  CHECK(w.admit("", t0).code() == ErrorCode::kInvalidArgument);
  CHECK(w.admit(std::string(129, 'x'), t0).code() == ErrorCode::kInvalidArgument);
  // Bounded: beyond its capacity the oldest ids go first.
  for (const char* id : {"a", "b", "c", "d"}) REQUIRE(w.admit(id, t0 + 62s).is_ok());
  CHECK(w.size() == 3);
  CHECK(w.admit("d", t0 + 62s).code() == ErrorCode::kConflict);
}

TEST_CASE("github: workflow_job deliveries parse to what the provider uses", "[github]") {
  const std::string body = R"({
    "action": "queued",
    "workflow_job": {"id": 29679449, "run_id": 10771925, "status": "queued",
                     "labels": ["self-hosted", "armhive-arm64"], "runner_id": null,
                     "runner_name": null, "steps": []},
    "repository": {"id": 1, "full_name": "octo-org/example"},
    "organization": {"login": "octo-org"},
    "sender": {"login": "octocat"}})";
  auto job = parse_workflow_job(body);
  REQUIRE(job.is_ok());
  CHECK(job->action == "queued");
  CHECK(job->job_id == 29679449);
  CHECK(job->run_id == 10771925);
  CHECK(job->labels == std::vector<std::string>{"self-hosted", "armhive-arm64"});
  CHECK(job->runner_id == 0);
  CHECK(job->runner_name.empty());
  CHECK(job->repository == "octo-org/example");
  CHECK(job->organization == "octo-org");

  auto done = parse_workflow_job(
      R"({"action":"completed","workflow_job":{"id":7,"runner_id":23,"runner_name":"armhive-7",
          "labels":[],"conclusion":"success"}})");
  REQUIRE(done.is_ok());
  CHECK(done->runner_id == 23);
  CHECK(done->runner_name == "armhive-7");
  CHECK(done->organization.empty());
}

TEST_CASE("github: malformed workflow_job deliveries are refused naming the member", "[github]") {
  struct Case {
    const char* body;
    const char* field;
  };
  const Case cases[] = {
      {"", "body"},
      {"not json", "body"},
      {"[]", "body"},
      {R"({"workflow_job":{"id":1}})", "action"},
      {R"({"action":3,"workflow_job":{"id":1}})", "action"},
      {R"({"action":"queued"})", "workflow_job"},
      {R"({"action":"queued","workflow_job":[]})", "workflow_job"},
      {R"({"action":"queued","workflow_job":{}})", "workflow_job.id"},
      {R"({"action":"queued","workflow_job":{"id":"1"}})", "workflow_job.id"},
      {R"({"action":"queued","workflow_job":{"id":-1}})", "workflow_job.id"},
      {R"({"action":"queued","workflow_job":{"id":1,"labels":"x"}})", "workflow_job.labels"},
      {R"({"action":"queued","workflow_job":{"id":1,"labels":["a",2]}})", "workflow_job.labels[1]"},
      {R"({"action":"queued","workflow_job":{"id":1,"labels":[""]}})", "workflow_job.labels[0]"},
      {R"({"action":"queued","workflow_job":{"id":1,"runner_name":5}})",
       "workflow_job.runner_name"},
      {R"({"action":"queued","workflow_job":{"id":1},"repository":{"full_name":1}})",
       "repository.full_name"},
  };
  for (const Case& c : cases) {
    INFO(c.body);
    auto r = parse_workflow_job(c.body);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().field() == c.field);
  }
  std::string many = R"({"action":"queued","workflow_job":{"id":1,"labels":[)";
  for (size_t i = 0; i <= kMaxJobLabels; ++i) many += std::string(i ? "," : "") + "\"l\"";
  CHECK(parse_workflow_job(many + "]}}").status().field() == "workflow_job.labels");
  CHECK(parse_workflow_job(std::string(kMaxWebhookBodyBytes + 1, ' ')).status().code() ==
        ErrorCode::kPayloadTooLarge);
}

TEST_CASE("github: runs-on labels map to one pool, case-insensitively", "[github]") {
  const std::map<std::string, std::string> map = {
      {"armhive-arm64", "ci"}, {"armhive-big", "big"}, {"armhive-ci", "ci"}};
  auto pool = [&](std::vector<std::string> labels) { return pool_for_labels(map, labels); };
  CHECK(pool({"self-hosted", "armhive-arm64"}).value() == std::optional<std::string>("ci"));
  CHECK(pool({"self-hosted", "ARMHIVE-Big"}).value() == std::optional<std::string>("big"));
  CHECK(pool({"armhive-arm64", "armhive-ci"}).value() == std::optional<std::string>("ci"));
  CHECK(pool({"ubuntu-latest"}).value() == std::nullopt);
  CHECK(pool({}).value() == std::nullopt);
  auto two = pool({"armhive-arm64", "armhive-big"});
  CHECK(two.status().code() == ErrorCode::kInvalidArgument);
  CHECK(two.status().field() == "labels");
}

TEST_CASE("github: a webhook body nested past 64 levels is refused naming the limit",
          "[github][hostile][json]") {
  const std::string body = R"({"action":"queued","workflow_job":{"id":1,"steps":)" +
                           std::string(60000, '[') + std::string(60000, ']') + "}}";
  auto job = parse_workflow_job(body);
  REQUIRE_FALSE(job.is_ok());
  CHECK(job.status().code() == ErrorCode::kInvalidArgument);
  CHECK(job.status().field() == "body");
  CHECK_THAT(job.status().message(), Catch::Contains("limit of 64 levels"));
}

}  // namespace
}  // namespace armhive
