// Every request body an API client can send (and the daemon's own answers the CLI parses): the
// first byte picks the parser, the rest is the body. Properties: no crash, no exception,
// nothing nested deeper than kMaxJsonDepth parses, and whatever parses survives to_json ->
// parse unchanged.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/json.h"
#include "base/base64.h"
#include "base/json_depth.h"
#include "base/validation.h"
#include "daemon/bench/benchmark_service.h"
#include "tests/fuzz/fuzz_check.h"

namespace armhive {
namespace {

template <typename F>
void round_trip(const nlohmann::json& j, F parse) {
  auto first = parse(j);
  if (!first.is_ok()) return;
  nlohmann::json once = to_json(*first);
  auto second = parse(once);
  FUZZ_CHECK(second.is_ok());
  FUZZ_CHECK(to_json(*second) == once);
}

}  // namespace
}  // namespace armhive

// NOLINTNEXTLINE(readability-identifier-naming): the entry point libFuzzer calls
// libFuzzer calls this exact name.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace armhive;
  if (size == 0) return 0;
  const uint8_t which = data[0];
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto j = parse_json(body);
  (void)parse_duration("ttl", body);
  (void)check_ssh_key("ssh_keys[0]", body);
  (void)check_name("pool", body);
  (void)base64_decode("stdin_base64", body);
  // Nothing nested past kMaxJsonDepth is parsed (issue 33 finding 1), and a refusal for depth
  // names the body.
  if (!check_json_depth(body, "body").is_ok()) {
    FUZZ_CHECK(!j.is_ok() && j.status().field() == "body");
  }
  if (!j.is_ok()) return 0;
  switch (which % 12) {
    case 0:
      round_trip(*j, lease_create_from_json);
      break;
    case 1:
      round_trip(*j, lease_renew_from_json);
      break;
    case 2:
      round_trip(*j, exec_request_from_json);
      break;
    case 3: {
      auto r = benchmark_request_from_json(*j);
      if (r.is_ok()) (void)validate_benchmark_request(*r);
      break;
    }
    case 4:
      (void)benchmark_run_from_json(*j);
      break;
    case 5:
      (void)lease_from_json(*j);
      break;
    case 6:
      (void)lease_page_from_json(*j);
      break;
    case 7:
      (void)pools_from_json(*j);
      break;
    case 8:
      (void)hosts_from_json(*j);
      break;
    case 9:
      (void)event_from_json(*j);
      break;
    case 10:
      (void)problem_from_json(*j);
      break;
    default:
      (void)exec_result_from_json(*j);
      (void)benchmark_runs_from_json(*j);
      break;
  }
  return 0;
}
