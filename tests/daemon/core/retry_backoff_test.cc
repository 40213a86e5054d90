#include "daemon/core/retry_backoff.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

using namespace std::chrono_literals;

TEST_CASE("retry backoff doubles from the base up to the cap", "[backoff]") {
  CHECK(retry_backoff(1s, 60s, 1) == 1s);
  CHECK(retry_backoff(1s, 60s, 2) == 2s);
  CHECK(retry_backoff(1s, 60s, 4) == 8s);
  CHECK(retry_backoff(1s, 60s, 6) == 32s);
  CHECK(retry_backoff(1s, 60s, 7) == 60s);
  // The persist queue's: 100 ms doubling to 30 s.
  CHECK(retry_backoff(100ms, 30s, 3) == 400ms);
  CHECK(retry_backoff(100ms, 30s, 16) == 30s);
}

TEST_CASE("retry backoff: no failure counts as one, many do not overflow", "[backoff]") {
  CHECK(retry_backoff(1s, 60s, 0) == 1s);
  CHECK(retry_backoff(1s, 60s, -3) == 1s);
  CHECK(retry_backoff(1s, std::chrono::hours(24 * 365), 1000) == 1024s);
}

}  // namespace
}  // namespace armhive
