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

}  // namespace armhive
