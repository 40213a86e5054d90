#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace armhive {

// The wall clock now as RFC 3339 UTC with seconds ("2026-12-01T08:45:53Z"), for the records
// tools write (image manifests, benchmark results). Daemon logic reads time through its
// injected Clock instead. Any thread.
std::string utc_now();

// An RFC 3339 date-time from a client ("2026-12-01T08:45:53Z", "2026-12-01T08:45:53.250+02:00")
// as milliseconds since the Unix epoch. Strict: the full form with a 'T' and a zone ('Z' or
// ±HH:MM), fields in range (a leap second 60 reads as 59), a year from 0001 to 9999, digits
// beyond milliseconds dropped. Anything else is kInvalidArgument naming `field`. Pure.
Result<int64_t> parse_rfc3339_ms(std::string_view field, std::string_view text);

// An HTTP date in RFC 9110's IMF-fixdate form ("Sun, 06 Nov 1994 08:49:37 GMT", section 5.6.7)
// as seconds since the Unix epoch. Strict, byte for byte and without the C locale's functions:
// exactly 29 characters, the English day and month names as written there (case-sensitive),
// two-digit day, four-digit year from 1900, fields in range (a leap second 60 reads as 59), the
// day name that date's weekday, "GMT". The obsolete RFC 850 and asctime forms are refused too.
// Anything else is kInvalidArgument naming `field`. Pure.
Result<int64_t> parse_imf_fixdate(std::string_view field, std::string_view text);

}  // namespace armhive
