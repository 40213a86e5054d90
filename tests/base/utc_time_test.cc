#include "base/utc_time.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("rfc3339: UTC, offsets and fractions give the instant", "[base][time]") {
  CHECK(*parse_rfc3339_ms("since", "1970-01-01T00:00:00Z") == 0);
  CHECK(*parse_rfc3339_ms("since", "2026-12-01T08:45:53Z") == 1796114753000);
  CHECK(*parse_rfc3339_ms("since", "2026-12-01T08:45:53.250Z") == 1796114753250);
  CHECK(*parse_rfc3339_ms("since", "2026-12-01T08:45:53.2Z") == 1796114753200);
  CHECK(*parse_rfc3339_ms("since", "2026-12-01T08:45:53.123456789Z") == 1796114753123);
  CHECK(*parse_rfc3339_ms("since", "2026-12-01T10:45:53+02:00") == 1796114753000);
  CHECK(*parse_rfc3339_ms("since", "2026-12-01T03:15:53-05:30") == 1796114753000);
  CHECK(*parse_rfc3339_ms("since", "2026-12-01t08:45:53z") == 1796114753000);
  CHECK(*parse_rfc3339_ms("since", "2024-02-29T00:00:00Z") == 1709164800000);
  CHECK(*parse_rfc3339_ms("since", "2016-12-31T23:59:60Z") == 1483228799000);  // leap second
  CHECK(*parse_rfc3339_ms("since", "1969-12-31T23:59:59Z") == -1000);
}

TEST_CASE("rfc3339: anything but the full form is refused naming the field",
          "[base][time][hostile]") {
  for (const char* bad :
       {"", "7d", "2026-12-01", "2026-12-01T08:45:53", "2026-12-01 08:45:53Z",
        "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2025-02-29T00:00:00Z",
        "2026-12-01T24:00:00Z", "2026-12-01T08:60:00Z", "2026-12-01T08:45:61Z",
        "0000-01-01T00:00:00Z", "2026-12-01T08:45:53.Z", "2026-12-01T08:45:53+0200",
        "2026-12-01T08:45:53+24:00", "2026-12-01T08:45:53Zjunk", "+026-12-01T08:45:53Z",
        "2026-12-01T08:45:53\nZ", "２０２６-12-01T08:45:53Z"}) {
    INFO(bad);
    auto r = parse_rfc3339_ms("since", bad);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().field() == "since");
  }
}

TEST_CASE("http date: an IMF-fixdate gives the instant", "[base][time]") {
  // RFC 9110 section 5.6.7's example, and GitHub's form.
  CHECK(*parse_imf_fixdate("Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT") == 784111777);
  CHECK(*parse_imf_fixdate("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT") == 1445412480);
  CHECK(*parse_imf_fixdate("Retry-After", "Thu, 01 Jan 1970 00:00:00 GMT") == 0);
  CHECK(*parse_imf_fixdate("Retry-After", "Tue, 01 Dec 2026 08:45:53 GMT") == 1796114753);
  CHECK(*parse_imf_fixdate("Retry-After", "Thu, 29 Feb 2024 00:00:00 GMT") == 1709164800);
  CHECK(*parse_imf_fixdate("Retry-After", "Sat, 31 Dec 2016 23:59:60 GMT") == 1483228799);
  CHECK(*parse_imf_fixdate("Retry-After", "Mon, 01 Jan 1900 00:00:00 GMT") == -2208988800);
}

TEST_CASE("http date: anything but a strict IMF-fixdate is refused naming the field",
          "[base][time][hostile]") {
  for (const char* bad : {"",
                          "120",
                          "Wed, 21 Oct 2015 07:28:00",
                          "Wed, 21 Oct 2015 07:28:00 UTC",
                          "Wed, 21 Oct 2015 07:28:00 GMT ",
                          " Wed, 21 Oct 2015 07:28:00 GMT",
                          "wed, 21 Oct 2015 07:28:00 GMT",
                          "Wed, 21 oct 2015 07:28:00 GMT",
                          "Wed, 21 Okt 2015 07:28:00 GMT",
                          "Thu, 21 Oct 2015 07:28:00 GMT",  // a Wednesday
                          "Wed,21 Oct 2015 07:28:00 GMT ",
                          "Wed, 1 Oct 2015 07:28:00 GMT ",
                          "Mon, 30 Feb 2015 07:28:00 GMT",
                          "Sun, 29 Feb 2015 07:28:00 GMT",
                          "Wed, 21 Oct 2015 24:00:00 GMT",
                          "Wed, 21 Oct 2015 07:60:00 GMT",
                          "Wed, 21 Oct 2015 07:28:61 GMT",
                          "Wed, 21 Oct 2015 07-28-00 GMT",
                          "Wed, 21 Oct 0015 07:28:00 GMT",
                          "Wed, +1 Oct 2015 07:28:00 GMT",
                          "Wednesday, 21-Oct-15 07:28:00 GMT",
                          "Wed Oct 21 07:28:00 2015",
                          "Wed, 21 Oct 2015 07:28:00 GMT\n",
                          "Wed, 21 Oct 2015 07:28:00 G\x01T"}) {
    INFO(bad);
    auto r = parse_imf_fixdate("Retry-After", bad);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().field() == "Retry-After");
  }
}

}  // namespace
}  // namespace armhive
