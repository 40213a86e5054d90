#include "base/process_runner.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("process runner passes argv verbatim, stdin, and captures both streams", "[base]") {
  SubprocessRunner runner;
  auto r = runner.run({.argv = {"sh", "-c", "cat; echo \"$1\" >&2; exit 3", "sh", "a b;$(x)"},
                       .stdin_data = "hello"});
  REQUIRE(r.is_ok());
  CHECK(r->exit_code == 3);
  CHECK(r->out == "hello");
  CHECK(r->err == "a b;$(x)\n");
}

TEST_CASE("process runner reports a missing program and kills on timeout", "[base]") {
  SubprocessRunner runner;
  auto missing = runner.run({.argv = {"/nonexistent/armhive-tool"}});
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::kNotFound);

  auto slow = runner.run({.argv = {"sleep", "30"}, .timeout = std::chrono::milliseconds(200)});
  REQUIRE(slow.is_ok());
  CHECK(slow->timed_out);
  CHECK_FALSE(slow->ok());
}

}  // namespace
}  // namespace armhive
