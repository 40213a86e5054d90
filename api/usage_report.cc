#include "api/usage_report.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "base/csv.h"
#include "base/utc_time.h"
#include "base/validation.h"

namespace armhive {
namespace {

std::string seconds_text(double s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", std::isfinite(s) ? s : 0.0);
  return buf;
}

}  // namespace

Result<int64_t> parse_usage_time(std::string_view field, std::string_view text, int64_t now_ms) {
  if (!text.empty() && text.front() >= '0' && text.front() <= '9' &&
      text.find_first_of("-:T") == std::string_view::npos) {
    auto ago = parse_duration(field, text);
    if (!ago.is_ok() || *ago > std::numeric_limits<int64_t>::max() / 1000 / 2) {
      return invalid_argument(std::string(field),
                              "must be an RFC 3339 time (2026-12-01T08:00:00Z) or a duration "
                              "before now (7d, 12h, 90m)");
    }
    return now_ms - *ago * 1000;
  }
  auto at = parse_rfc3339_ms(field, text);
  if (!at.is_ok()) {
    return invalid_argument(std::string(field),
                            "must be an RFC 3339 time (2026-12-01T08:00:00Z) or a duration "
                            "before now (7d, 12h, 90m)");
  }
  return *at;
}

std::string usage_report_csv(const UsageReportDto& report) {
  std::string first = report.group_by == "label" ? "label:" + report.label : report.group_by;
  std::string out = csv_line({first, "leases", "cpu_seconds", "wall_seconds", "peak_memory_bytes",
                              "disk_write_bytes", "net_rx_bytes", "net_tx_bytes"});
  for (const UsageRowDto& r : report.rows) {
    out += csv_line({r.group, std::to_string(r.leases), seconds_text(r.cpu_seconds),
                     seconds_text(r.wall_seconds), std::to_string(r.peak_memory_bytes),
                     std::to_string(r.disk_write_bytes), std::to_string(r.net_rx_bytes),
                     std::to_string(r.net_tx_bytes)});
  }
  return out;
}

}  // namespace armhive
