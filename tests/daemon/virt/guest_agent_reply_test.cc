// qemu-guest-agent replies come from the guest, which a CI job controls as root: every malformed
// reply is an error naming the command, never an exception or a wild value.
#include "daemon/virt/guest_agent_reply.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("guest agent: well-formed guest-exec replies parse", "[virt][hostile]") {
  CHECK(*parse_guest_exec_started(R"({"return":{"pid":4242}})") == 4242);
  auto running = parse_guest_exec_status(R"({"return":{"exited":false}})");
  REQUIRE(running.is_ok());
  CHECK_FALSE(running->has_value());
  auto done = parse_guest_exec_status(
      R"({"return":{"exited":true,"exitcode":3,"out-data":"aGVsbG8K","err-data":"","out-truncated":false}})");
  REQUIRE(done.is_ok());
  REQUIRE(done->has_value());
  CHECK((*done)->exit_code == 3);
  CHECK((*done)->out == "hello\n");
  CHECK_FALSE((*done)->out_truncated);
  auto killed = parse_guest_exec_status(R"({"return":{"exited":true,"signal":9}})");
  REQUIRE(killed.is_ok());
  CHECK((*killed)->exit_code == -1);
  CHECK((*killed)->signal == 9);
}

TEST_CASE("guest agent: malformed replies are clear errors", "[virt][hostile]") {
  for (const char* bad :
       {"", "not json", "{", "[]", "null", R"({"return":5})", R"({"error":{}})", R"({"return":{}})",
        R"({"return":{"pid":"12"}})", R"({"return":{"pid":1e300}})", R"({"return":{"pid":-1}})",
        R"({"return":{"pid":0}})", R"({"return":{"pid":18446744073709551615}})",
        R"({"return":{"pid":12.5}})"}) {
    INFO(bad);
    auto r = parse_guest_exec_started(bad);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInternal);
    CHECK_THAT(r.status().message(), Catch::Contains("guest-exec"));
  }
  for (const char* bad : {"", "}{", R"({"return":[]})", R"({"return":{"exited":"yes"}})",
                          R"({"return":{"exited":true,"exitcode":1e300}})",
                          R"({"return":{"exited":true,"exitcode":-7}})",
                          R"({"return":{"exited":true,"exitcode":256}})",
                          R"({"return":{"exited":true,"signal":99999999999}})",
                          R"({"return":{"exited":true,"out-data":5}})",
                          R"({"return":{"exited":true,"out-data":"***"}})",
                          R"({"return":{"exited":true,"out-truncated":"no"}})"}) {
    INFO(bad);
    auto r = parse_guest_exec_status(bad);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInternal);
  }
}

TEST_CASE("guest agent: a reply nested past 64 levels is refused before it is parsed",
          "[virt][hostile][json]") {
  // A guest answers with {"return":{"pid":1,"x":[[[...]]]}}: 60,000 levels within the 64 KiB a
  // reply may have (issue 33 finding 1).
  const std::string deep =
      R"({"return":{"pid":1,"x":)" + std::string(60000, '[') + std::string(60000, ']') + "}}";
  auto r = parse_guest_exec_started(deep);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::kInternal);
  CHECK_THAT(r.status().message(), Catch::Contains("guest-exec"));
  CHECK_THAT(r.status().message(), Catch::Contains("limit of 64 levels"));
  CHECK(parse_guest_exec_started(R"({"return":{"pid":1,"x":)" + std::string(62, '[') +
                                 std::string(62, ']') + "}}")
            .is_ok());
}

}  // namespace
}  // namespace armhive
