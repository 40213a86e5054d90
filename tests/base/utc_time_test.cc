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

}  // namespace
}  // namespace armhive
