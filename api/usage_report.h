#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api/types.h"
#include "base/result.h"

namespace armhive {

// The usage report's forms besides JSON (GET /v1/usage, `armhive usage`): the time bounds a
// client may give and the CSV a spreadsheet reads. Shared by the daemon and the CLI (which
// checks --since before sending it). Pure; any thread.

// The default window of the report: the last 7 days.
inline constexpr int64_t kDefaultUsageWindowSeconds = 7 * 24 * 3600;

// `since` / `until` as milliseconds since the epoch: an RFC 3339 time
// ("2026-12-01T08:00:00Z", base/utc_time.h) or a duration before `now_ms` ("7d", "12h",
// "90m", "1d12h"; base/validation.h parse_duration). kInvalidArgument naming `field`
// otherwise.
Result<int64_t> parse_usage_time(std::string_view field, std::string_view text, int64_t now_ms);

// RFC 4180 with a header line: the first column is named after the grouping ("owner", "pool"
// or "label:KEY"), then leases, cpu_seconds, wall_seconds (3 decimals), peak_memory_bytes,
// disk_write_bytes, net_rx_bytes, net_tx_bytes. Every field through base/csv.h (group values
// are client data: quoted, formulas defused). Lines end in CRLF.
std::string usage_report_csv(const UsageReportDto& report);

}  // namespace armhive
