#include "api/startup_json.h"

#include <catch2/catch.hpp>

#include "api/json.h"

namespace armhive {
namespace {

using nlohmann::json;

Status startup_error(const std::string& startup) {
  auto j = parse_json(R"({"pool":"ci","startup":)" + startup + "}");
  if (!j.is_ok()) return j.status();
  return lease_create_from_json(*j).status();
}

TEST_CASE("api: a lease's startup command parses argv, env and release_on_exit", "[api]") {
  auto j = parse_json(R"({"pool":"ci","startup":{"argv":["/opt/run.sh","--once"],
      "env":{"LANG":"C.UTF-8","TOKEN":{"value":"s3cr3t","secret":true},
             "PLAIN":{"value":"v"}},"release_on_exit":true}})");
  REQUIRE(j.is_ok());
  auto r = lease_create_from_json(*j);
  REQUIRE(r.is_ok());
  REQUIRE(r->startup);
  CHECK(r->startup->argv == std::vector<std::string>{"/opt/run.sh", "--once"});
  CHECK(r->startup->release_on_exit);
  CHECK(r->startup->env.at("LANG").value == "C.UTF-8");
  CHECK_FALSE(r->startup->env.at("LANG").secret);
  CHECK(r->startup->env.at("TOKEN").value == "s3cr3t");
  CHECK(r->startup->env.at("TOKEN").secret);
  CHECK_FALSE(r->startup->env.at("PLAIN").secret);
  // The CLI's form round-trips.
  auto again = lease_create_from_json(to_json(*r));
  REQUIRE(again.is_ok());
  CHECK(again->startup->env.at("TOKEN").secret);
  CHECK(again->startup->argv == r->startup->argv);
}

TEST_CASE("api: a bad startup command is refused naming the field", "[api]") {
  struct Case {
    const char* startup;
    const char* field;
  };
  const Case cases[] = {
      {R"("/bin/run")", "startup"},
      {R"({})", "startup.argv"},
      {R"({"argv":"/bin/run"})", "startup.argv"},
      {R"({"argv":[]})", "startup.argv"},
      {R"({"argv":["/bin/run", 3]})", "startup.argv[1]"},
      {R"({"argv":[""]})", "startup.argv[0]"},
      {R"({"argv":["a\u0000b"]})", "startup.argv[0]"},
      {R"({"argv":["/bin/run"],"shell":true})", "startup.shell"},
      {R"({"argv":["/bin/run"],"env":[]})", "startup.env"},
      {R"({"argv":["/bin/run"],"env":{"1BAD":"x"}})", "startup.env"},
      {R"({"argv":["/bin/run"],"env":{"A=B":"x"}})", "startup.env"},
      {R"({"argv":["/bin/run"],"env":{"A":3}})", "startup.env.A"},
      {R"({"argv":["/bin/run"],"env":{"A":{"secret":true}}})", "startup.env.A.value"},
      {R"({"argv":["/bin/run"],"env":{"A":{"value":"x","secret":"yes"}}})", "startup.env.A.secret"},
      {R"({"argv":["/bin/run"],"env":{"A":{"value":"x","other":1}}})", "startup.env.A.other"},
      {R"({"argv":["/bin/run"],"release_on_exit":"yes"})", "startup.release_on_exit"},
  };
  for (const Case& c : cases) {
    INFO(c.startup);
    Status s = startup_error(c.startup);
    CHECK(s.code() == ErrorCode::kInvalidArgument);
    CHECK(s.field() == c.field);
  }
  // Sizes are bounded.
  json many = json::array();
  for (size_t i = 0; i <= kMaxStartupArgs; ++i) many.push_back("x");
  CHECK(startup_error(json{{"argv", many}}.dump()).field() == "startup.argv");
  CHECK(startup_error(json{{"argv", {std::string(kMaxStartupArgBytes + 1, 'a')}}}.dump()).field() ==
        "startup.argv[0]");
  json env = json::object();
  for (size_t i = 0; i <= kMaxStartupEnv; ++i) env["V" + std::to_string(i)] = "x";
  CHECK(startup_error(json{{"argv", {"/bin/run"}}, {"env", env}}.dump()).field() == "startup.env");
  // A secret's value is never quoted back, even when it is what is wrong.
  const std::string secret(kMaxStartupEnvValueBytes + 1, 'Q');
  Status big = startup_error(
      json{{"argv", {"/bin/run"}}, {"env", {{"T", {{"value", secret}, {"secret", true}}}}}}.dump());
  CHECK(big.field() == "startup.env.T");
  CHECK(big.message().find("QQQQ") == std::string::npos);
}

TEST_CASE("api: env names follow the shell's rules", "[api]") {
  for (const char* good : {"A", "_x", "RUNNER_JIT_CONFIG", "a1"}) CHECK(valid_env_name(good));
  for (const char* bad : {"", "1A", "A-B", "A B", "A=B", "É"}) CHECK_FALSE(valid_env_name(bad));
  CHECK_FALSE(valid_env_name(std::string(kMaxStartupEnvNameBytes + 1, 'A')));
}

TEST_CASE("api: a lease's startup status round-trips and shows no secret value", "[api]") {
  LeaseDto l;
  l.id = "l-000000000001";
  l.state = "ready";
  StartupStatusDto s;
  s.argv = {"/opt/run.sh"};
  s.env = {{"LANG", "C"}};
  s.secret_env = {"TOKEN"};
  s.state = "exited";
  s.exit_code = 3;
  s.started_at = "2026-12-01T12:00:00.000Z";
  l.startup = s;
  json j = to_json(l);
  CHECK(j["startup"]["exit_code"] == 3);
  CHECK(j["startup"]["secret_env"] == json::array({"TOKEN"}));
  CHECK(j["startup"]["ended_at"].is_null());
  auto back = lease_from_json(j);
  REQUIRE(back.is_ok());
  REQUIRE(back->startup);
  CHECK(back->startup->exit_code == 3);
  CHECK(back->startup->state == "exited");
  CHECK(back->startup->env.at("LANG") == "C");
  CHECK_FALSE(back->startup->ended_at);
}

}  // namespace
}  // namespace armhive
