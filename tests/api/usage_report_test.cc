#include "api/usage_report.h"

#include <catch2/catch.hpp>

#include "api/json.h"

namespace armhive {
namespace {

constexpr int64_t kNow = 1'796'114'753'000;  // 2026-12-01T08:45:53Z

TEST_CASE("usage api types: since/until are RFC 3339 times or durations before now",
          "[api][usage]") {
  CHECK(*parse_usage_time("since", "2026-12-01T08:45:53Z", kNow) == kNow);
  CHECK(*parse_usage_time("since", "2026-12-01T09:45:53+01:00", kNow) == kNow);
  CHECK(*parse_usage_time("since", "7d", kNow) == kNow - 7 * 86'400'000LL);
  CHECK(*parse_usage_time("since", "12h", kNow) == kNow - 12 * 3'600'000LL);
  CHECK(*parse_usage_time("until", "1d12h", kNow) == kNow - 36 * 3'600'000LL);
  CHECK(*parse_usage_time("since", "0s", kNow) == kNow);
  for (const char* bad : {"", "yesterday", "-7d", "7 d", "7w", "2026-12-01", "2026-12-01T08:45:53",
                          "99999999999999999999d", "1e3"}) {
    INFO(bad);
    auto r = parse_usage_time("since", bad, kNow);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::kInvalidArgument);
    CHECK(r.status().field() == "since");
  }
}

TEST_CASE("usage api types: CSV has the grouping's header and quotes client data",
          "[api][usage][csv]") {
  UsageReportDto r;
  r.group_by = "label";
  r.label = "team";
  r.rows = {{"", 1, 0.5, 10, 1, 2, 3, 4},
            {"a,\"b\"", 2, 1234.5678, 3600, 1 << 20, 0, 0, 1 << 30},
            {"=HYPERLINK(\"x\")", 1, 0, 0, 0, 0, 0, 0}};
  CHECK(usage_report_csv(r) ==
        "label:team,leases,cpu_seconds,wall_seconds,peak_memory_bytes,disk_write_bytes,"
        "net_rx_bytes,net_tx_bytes\r\n"
        ",1,0.500,10.000,4,1,2,3\r\n"
        "\"a,\"\"b\"\"\",2,1234.568,3600.000,1073741824,1048576,0,0\r\n"
        "\"'=HYPERLINK(\"\"x\"\")\",1,0.000,0.000,0,0,0,0\r\n");
  r.group_by = "pool";
  r.rows.clear();
  CHECK(usage_report_csv(r) ==
        "pool,leases,cpu_seconds,wall_seconds,peak_memory_bytes,disk_write_bytes,net_rx_bytes,"
        "net_tx_bytes\r\n");
}

TEST_CASE("usage api types: the report and a lease's usage round-trip through JSON",
          "[api][usage]") {
  UsageReportDto r;
  r.since = "2026-11-24T08:45:53.000Z";
  r.until = "2026-12-01T08:45:53.000Z";
  r.group_by = "owner";
  r.rows = {{"ci-a", 3, 12.5, 60, 100, 200, 300, 400}};
  auto back = usage_report_from_json(to_json(r));
  REQUIRE(back.is_ok());
  CHECK(back->since == r.since);
  CHECK(back->group_by == "owner");
  CHECK_FALSE(to_json(r).contains("label"));
  REQUIRE(back->rows.size() == 1);
  CHECK(back->rows[0].group == "ci-a");
  CHECK(back->rows[0].leases == 3);
  CHECK(back->rows[0].cpu_seconds == 12.5);
  CHECK(back->rows[0].disk_write_bytes == 100);
  CHECK(back->rows[0].peak_memory_bytes == 400);
  CHECK_FALSE(usage_report_from_json(nlohmann::json::object()).is_ok());  // rows missing

  LeaseDto l;
  l.id = "l-1";
  l.state = "released";
  CHECK_FALSE(to_json(l).contains("usage"));
  l.usage =
      LeaseUsageDto{45.25, 60, 1 << 28, 1 << 20, 3000, 2000, "2026-12-01T08:45:53.000Z", true};
  auto lease = lease_from_json(to_json(l));
  REQUIRE(lease.is_ok());
  REQUIRE(lease->usage);
  CHECK(lease->usage->cpu_seconds == 45.25);
  CHECK(lease->usage->peak_memory_bytes == 1 << 28);
  CHECK(lease->usage->net_tx_bytes == 2000);
  CHECK(lease->usage->final);
}

}  // namespace
}  // namespace armhive
