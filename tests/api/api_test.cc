#include <catch2/catch.hpp>

#include "api/json.h"
#include "base/base64.h"
#include "base/json_depth.h"
#include "base/utf8.h"
#include "base/validation.h"

namespace armhive {
namespace {

using nlohmann::json;

Status create_error(const std::string& text) {
  auto j = parse_json(text);
  if (!j.is_ok()) return j.status();
  return lease_create_from_json(*j).status();
}

// n arrays inside each other around `inner`: "[[[inner]]]".
std::string nested(size_t n, const std::string& inner = "") {
  return std::string(n, '[') + inner + std::string(n, ']');
}

TEST_CASE(
    "api: 60,000 opening brackets inside the 64 KiB body limit are refused naming the depth limit",
    "[api][hostile][json]") {
  // Issue 33 finding 1: this used to cost 31 s and 6 GiB in the duplicate-key finder, from
  // any write token.
  const std::string body(60000, '[');
  REQUIRE(body.size() < 64 * 1024);
  auto j = parse_json(body);
  REQUIRE_FALSE(j.is_ok());
  CHECK(j.status().code() == ErrorCode::kInvalidArgument);
  CHECK(j.status().field() == "body");
  CHECK_THAT(j.status().message(), Catch::Contains("deeper than the limit of 64 levels"));
  CHECK_THAT(j.status().message(), Catch::Contains("at byte 64"));
  // The same in an exec stream line the CLI reads names that field.
  CHECK(parse_json(body, "event").status().field() == "event");
}

TEST_CASE("api: JSON nests at most 64 levels, brackets inside strings do not count",
          "[api][hostile][json]") {
  CHECK(parse_json(nested(kMaxJsonDepth)).is_ok());
  CHECK(parse_json(nested(kMaxJsonDepth - 1, R"({"a":"[[[[{{{{\"[[["})")).is_ok());
  auto deep = parse_json(nested(kMaxJsonDepth + 1));
  REQUIRE_FALSE(deep.is_ok());
  CHECK(deep.status().field() == "body");
  CHECK_THAT(deep.status().message(), Catch::Contains("limit of 64 levels"));
  auto objects = parse_json(R"({"a":)" + nested(kMaxJsonDepth, "") + "}");
  CHECK_FALSE(objects.is_ok());
  // A string full of brackets is one value at depth 1.
  CHECK(parse_json("[\"" + std::string(1000, '[') + "\"]").is_ok());
  CHECK(check_json_depth(std::string(1000, '{'), "reply").field() == "reply");
}

TEST_CASE("api: a duplicate key deep inside a body is still named by its path", "[api][json]") {
  auto j = parse_json(R"({"a":[1,{"b":[[{"c":1,"c":2}]]}]})");
  REQUIRE_FALSE(j.is_ok());
  CHECK(j.status().field() == "a[1].b[0][0].c");
  auto top = parse_json(R"({"pool":"x","pool":"y"})");
  CHECK(top.status().field() == "pool");
}

TEST_CASE("api: durations parse as seconds or unit strings", "[api]") {
  CHECK(*parse_duration("ttl", "3600") == 3600);
  CHECK(*parse_duration("ttl", "2h") == 7200);
  CHECK(*parse_duration("ttl", "90m") == 5400);
  CHECK(*parse_duration("ttl", "1h30m") == 5400);
  CHECK(*parse_duration("ttl", "1d") == 86400);
  CHECK(*parse_duration("ttl", "45s") == 45);
  for (const char* bad : {"", "-1h", "2 h", "h", "1.5h", "2w", "1h30", "99999999999999999999"}) {
    INFO(bad);
    auto r = parse_duration("ttl", bad);
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().field() == "ttl");
  }
  CHECK(check_ttl("ttl", 0).code() == ErrorCode::kInvalidArgument);
  CHECK(check_ttl("ttl", kMaxTtlSeconds).is_ok());
  CHECK(check_ttl("ttl", kMaxTtlSeconds + 1).code() == ErrorCode::kInvalidArgument);
  CHECK(format_duration(5400) == "1h30m");
  CHECK(format_duration(7200) == "2h");
}

TEST_CASE("api: lease create requests are parsed strictly", "[api]") {
  auto j = parse_json(R"({"pool":"tiny","ttl":"2h","ssh_keys":[
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ8vR2kq0b9Qn5o1c0fI1xQmQhJ3v7aWcV0lR9m2XyZa x"],
      "labels":{"job":"1"},"purpose":"dev"})");
  REQUIRE(j.is_ok());
  auto r = lease_create_from_json(*j);
  REQUIRE(r.is_ok());
  CHECK(r->pool == "tiny");
  CHECK(r->ttl_seconds == 7200);
  CHECK(r->purpose == "dev");
  CHECK(r->labels.at("job") == "1");
  // Round trip through the client's serialisation.
  auto again = lease_create_from_json(to_json(*r));
  REQUIRE(again.is_ok());
  CHECK(again->ttl_seconds == 7200);

  CHECK(create_error(R"({"pool":"tiny","extra":1})").field() == "extra");
  CHECK(create_error(R"({"pool":"tiny","ttl":-1})").field() == "ttl");
  CHECK(create_error(R"({"pool":"tiny","ttl":18446744073709551615})").field() == "ttl");
  CHECK(create_error(R"({"pool":"tiny","ttl":[1]})").field() == "ttl");
  CHECK(create_error(R"({"pool":"tiny","ssh_keys":["ssh-ed25519 short"]})").field() ==
        "ssh_keys[0]");
  CHECK(create_error(R"({"pool":"tiny","ssh_keys":["ssh-rsa AAAAB3NzaC1yc2EAAAADAQAB\nx"]})")
            .field() == "ssh_keys[0]");
  CHECK(create_error(R"({"pool":"tiny","labels":{"k":"a\u0001"}})").field() == "labels.k");
  CHECK(create_error(R"({"pool":""})").field() == "pool");
  CHECK(create_error(R"({"pool":"tiny","ports":[8080,65536]})").field() == "ports[1]");
  CHECK(create_error(R"({"pool":"tiny","ports":8080})").field() == "ports");
  auto ports = parse_json(R"({"pool":"tiny","ports":[8080,9000]})");
  REQUIRE(ports.is_ok());
  auto with_ports = lease_create_from_json(*ports);
  REQUIRE(with_ports.is_ok());
  CHECK(with_ports->ports == std::vector<int>{8080, 9000});
  CHECK(lease_create_from_json(to_json(*with_ports))->ports == with_ports->ports);
  CHECK(create_error("{").field() == "body");
  CHECK(create_error("null").field() == "body");
}

TEST_CASE("api: exec bytes travel as text or base64", "[api]") {
  ExecResultDto r;
  r.exit_code = 3;
  r.out = std::string("\xff\x00z", 3);
  r.err = "plain";
  json j = to_json(r);
  CHECK(j.contains("stdout_base64"));
  CHECK(j["stderr"] == "plain");
  auto back = exec_result_from_json(j);
  REQUIRE(back.is_ok());
  CHECK(back->out == r.out);
  CHECK(back->err == "plain");
  CHECK(back->exit_code == 3);

  for (const std::string& s :
       std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto d = base64_decode("x", base64_encode(s));
    REQUIRE(d.is_ok());
    CHECK(*d == s);
  }
  CHECK(base64_decode("x", "abc").status().code() == ErrorCode::kInvalidArgument);
  CHECK(base64_decode("x", "a=bc").status().code() == ErrorCode::kInvalidArgument);
  CHECK(is_valid_utf8("h\xc3\xa9llo"));
  CHECK_FALSE(is_valid_utf8("\xc3"));
  CHECK_FALSE(is_valid_utf8("\xed\xa0\x80"));  // a UTF-16 surrogate
}

TEST_CASE("api: problems carry a stable type, the status and the field", "[api]") {
  Problem p = problem_from_status(invalid_argument("ssh_keys[1]", "unknown key type 'x'"));
  CHECK(p.type == "https://armhive.dev/problems/invalid-argument");
  CHECK(p.status == 400);
  CHECK(p.field == "ssh_keys[1]");
  CHECK(p.detail == "ssh_keys[1]: unknown key type 'x'");
  auto back = problem_from_json(to_json(p));
  REQUIRE(back.is_ok());
  CHECK(back->field == "ssh_keys[1]");
  CHECK(problem_from_status(Status(ErrorCode::kResourceExhausted, "quota")).status == 429);
}

TEST_CASE("api: responses parse leniently but type-check", "[api]") {
  LeaseDto l;
  l.id = "l-1";
  l.state = "ready";
  l.vm = VmDto{"vm", "10.0.0.2", "armhive", {2, 3}};
  json j = to_json(l);
  j["added_in_a_later_version"] = true;
  auto back = lease_from_json(j);
  REQUIRE(back.is_ok());
  CHECK(back->vm->cpus == std::vector<int>{2, 3});
  CHECK_FALSE(back->ssh.has_value());
  j["ttl_seconds"] = "long";
  CHECK(lease_from_json(j).status().field() == "ttl_seconds");
  CHECK(lease_page_from_json(json::object()).status().field() == "items");
}

TEST_CASE("api: a waiting lease carries its queue position and reason", "[api][queue]") {
  LeaseDto l;
  l.id = "l-2";
  l.state = "pending";
  l.queue = LeaseQueueDto{3, "at_max_starting"};
  json j = to_json(l);
  CHECK(j["queue"] == json{{"position", 3}, {"reason", "at_max_starting"}});
  auto back = lease_from_json(j);
  REQUIRE(back.is_ok());
  REQUIRE(back->queue.has_value());
  CHECK(back->queue->position == 3);
  CHECK(back->queue->reason == "at_max_starting");
  // A ready lease has none.
  l.queue.reset();
  CHECK_FALSE(to_json(l).contains("queue"));
  j["queue"] = {{"reason", "at_pool_max"}};
  CHECK(lease_from_json(j).status().field() == "queue.position");
}

TEST_CASE("api: the GitHub provider's state round-trips its optional members", "[api][github]") {
  GithubStateDto g;
  g.last_reconcile = "2026-01-02T03:04:05.000Z";
  g.last_reconcile_error = "GitHub list runners: HTTP 502";
  g.pending_jobs = 2;
  g.runners = 3;
  g.rate_limit_remaining = 0;
  g.rate_limit_reset = "2026-01-02T04:00:00.000Z";
  g.backoff_until = "2026-01-02T03:10:00.000Z";
  g.reconciled_jobs_total = 5;
  g.ghosts_deleted_total = 6;
  g.forgotten_runners_total = 1;
  g.rate_limited_total = 7;
  json j = to_json(g);
  j["added_in_a_later_version"] = 1;
  auto back = github_state_from_json(j);
  REQUIRE(back.is_ok());
  CHECK(to_json(*back) == to_json(g));
  CHECK(back->rate_limit_remaining == 0);  // zero is said, not absent

  // Before the first pass and before GitHub said anything: absent, not empty.
  auto fresh = github_state_from_json(to_json(GithubStateDto{}));
  REQUIRE(fresh.is_ok());
  CHECK_FALSE(fresh->last_reconcile.has_value());
  CHECK_FALSE(fresh->rate_limit_remaining.has_value());
  CHECK_FALSE(fresh->backoff_until.has_value());
  j["rate_limit_remaining"] = "many";
  CHECK(github_state_from_json(j).status().field() == "rate_limit_remaining");
}

}  // namespace
}  // namespace armhive
