// How long armhived waits after GitHub's rate-limited replies: Retry-After as seconds or as an
// HTTP date, and the fallback that doubles while secondary limits keep coming.
#include "daemon/github/rate_limit_backoff.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

using std::chrono::seconds;

// 2015-10-21T07:28:00Z, the date of RFC 9110's style of example.
const TimePoint kReplied = TimePoint(seconds(1445412480));

TEST_CASE("retry-after: delay-seconds are read as they are", "[github][ratelimit]") {
  CHECK(parse_retry_after("0", kReplied) == seconds(0));
  CHECK(parse_retry_after("30", kReplied) == seconds(30));
  CHECK(parse_retry_after("0120", kReplied) == seconds(120));
  // Absurdly long is still a number (the client bounds the backoff to an hour).
  CHECK(parse_retry_after("99999999999999999999999", kReplied) >= seconds(3600));
}

TEST_CASE("retry-after: an HTTP date is the time from the reply to it", "[github][ratelimit]") {
  CHECK(parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", kReplied) == seconds(120));
  CHECK(parse_retry_after("Thu, 22 Oct 2015 07:28:00 GMT", kReplied) == seconds(86400));
  // The reply's own time itself, or a date already past: retry now.
  CHECK(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", kReplied) == seconds(0));
  CHECK(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", kReplied) == seconds(0));
  // Sub-second precision of the local clock does not make it negative or longer.
  CHECK(parse_retry_after("Wed, 21 Oct 2015 07:28:01 GMT",
                          kReplied + std::chrono::milliseconds(999)) == seconds(1));
}

TEST_CASE("retry-after: anything else counts as no Retry-After", "[github][ratelimit][hostile]") {
  for (const char* bad :
       {"", " 30", "30 ", "-5", "+5", "1.5", "30s", "soon", "0x10", "Wed, 21 Oct 2015 07:30:00 UTC",
        "Wednesday, 21-Oct-15 07:30:00 GMT", "Wed Oct 21 07:30:00 2015",
        "Thu, 21 Oct 2015 07:30:00 GMT", "Wed, 21 Oct 2015 07:30:00 GMT; extra"}) {
    INFO(bad);
    CHECK_FALSE(parse_retry_after(bad, kReplied).has_value());
  }
}

TEST_CASE("secondary limits in a row wait a minute then twice as long each time up to 15 min",
          "[github][ratelimit]") {
  CHECK(secondary_limit_wait(1) == seconds(60));
  CHECK(secondary_limit_wait(2) == seconds(120));
  CHECK(secondary_limit_wait(3) == seconds(240));
  CHECK(secondary_limit_wait(4) == seconds(480));
  CHECK(secondary_limit_wait(5) == seconds(900));
  CHECK(secondary_limit_wait(6) == seconds(900));
  CHECK(secondary_limit_wait(1000000) == seconds(900));
  CHECK(secondary_limit_wait(0) == seconds(60));  // never less than a minute
}

}  // namespace
}  // namespace armhive
