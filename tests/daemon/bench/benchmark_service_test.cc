#include "daemon/bench/benchmark_service.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

using nlohmann::json;

TEST_CASE("benchmark request JSON: defaults, round trip and field-named errors", "[bench]") {
  auto empty = benchmark_request_from_json(json::object());
  REQUIRE(empty.is_ok());
  CHECK(empty->network.streams == 4);
  CHECK(empty->network.cport == 5000);
  CHECK(empty->compression.level == 3);
  CHECK(empty->suites.empty());

  auto body = json::parse(R"({"suites":["network"],"network":{"streams":8,"duration_s":10,
      "mtus":[1500,9000],"both_directions":false},"compression":{"repeats":3}})");
  auto r = benchmark_request_from_json(body);
  REQUIRE(r.is_ok());
  CHECK(r->network.streams == 8);
  CHECK(r->network.mtus == std::vector<int>{1500, 9000});
  CHECK_FALSE(r->network.both_directions);
  CHECK(r->compression.repeats == 3);
  auto again = benchmark_request_from_json(to_json(*r));
  REQUIRE(again.is_ok());
  CHECK(to_json(*again) == to_json(*r));

  struct Bad {
    const char* body;
    const char* field;
  };
  for (const Bad& bad :
       {Bad{R"({"network":{"streams":0}})", "network.streams"},
        Bad{R"({"network":{"streams":129}})", "network.streams"},
        Bad{R"({"network":{"duration_s":601}})", "network.duration_s"},
        Bad{R"({"network":{"duration_s":2,"interval_s":3}})", "network.interval_s"},
        Bad{R"({"network":{"streams":"4"}})", "network.streams"},
        Bad{R"({"network":{"mtus":[100]}})", "network.mtus"},
        Bad{R"({"network":{"colour":1}})", "network.colour"},
        Bad{R"({"suites":["disk"]})", "suites"},
        Bad{R"({"suites":["network","network"]})", "suites"},
        Bad{R"({"compression":{"level":22}})", "compression.level"},
        Bad{R"({"compression":{"repeats":0}})", "compression.repeats"},
        Bad{R"({"what":1})", "what"}, Bad{R"([1])", "body"}}) {
    INFO(bad.body);
    auto res = benchmark_request_from_json(json::parse(bad.body));
    REQUIRE_FALSE(res.is_ok());
    CHECK(res.status().code() == ErrorCode::kInvalidArgument);
    CHECK(res.status().field() == bad.field);
  }
}

TEST_CASE("benchmark run JSON round-trips including times and report", "[bench]") {
  BenchmarkRun run;
  run.id = "b-0123456789ab";
  run.lease_id = "l-1";
  run.owner = "alice";
  run.vm_name = "armhive-vm-1";
  run.pool = "ci";
  run.host = "honeycomb";
  run.state = BenchmarkState::kFailed;
  run.error = "guest unreachable";
  run.created_at = from_unix_ms(1'800'000'000'123);
  run.finished_at = from_unix_ms(1'800'000'005'000);
  run.request.suites = {"compression"};
  run.report = {{"schema", "armhive.bench.report/1"}};
  json j = to_json(run);
  CHECK(j["state"] == "failed");
  auto back = benchmark_run_from_json(j);
  REQUIRE(back.is_ok());
  CHECK(to_json(*back) == j);
  CHECK(to_unix_ms(back->created_at) == 1'800'000'000'123);

  BenchmarkRun queued = run;
  queued.finished_at = TimePoint{};
  CHECK(to_json(queued)["finished_at"].is_null());

  CHECK_FALSE(benchmark_run_from_json(json{{"id", "x"}}).is_ok());
  CHECK_FALSE(benchmark_state_from_string("done").has_value());
}

}  // namespace
}  // namespace armhive
