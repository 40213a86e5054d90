#include "daemon/core/usage_report.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = from_unix_ms(1'800'000'000'000);

Lease used(const std::string& id, const std::string& owner, const std::string& pool,
           std::map<std::string, std::string> labels, TimePoint created, uint64_t cpu_s,
           std::chrono::seconds wall, uint64_t peak) {
  Lease l;
  l.id = id;
  l.owner = owner;
  l.pool = pool;
  l.labels = std::move(labels);
  l.created_at = created;
  LeaseUsage u;
  u.cpu_ns = cpu_s * 1'000'000'000ULL;
  u.started_at = created + 5s;
  u.sampled_at = u.started_at + wall;
  u.disk_write_bytes = 100;
  u.net_rx_bytes = 10;
  u.net_tx_bytes = 1;
  u.peak_rss_bytes = peak;
  l.usage = u;
  return l;
}

std::vector<Lease> sample_leases() {
  std::vector<Lease> out = {
      used("l-1", "ci-a", "ci", {{"team", "arm"}}, kT0, 10, 60s, 100),
      used("l-2", "ci-b", "ci", {{"team", "arm"}}, kT0 + 1h, 20, 120s, 300),
      used("l-3", "ci-a", "big", {{"team", "x86"}}, kT0 + 2h, 30, 30s, 200),
      used("l-4", "ci-a", "ci", {}, kT0 + 3h, 40, 10s, 50),
      used("l-old", "ci-a", "ci", {{"team", "arm"}}, kT0 - 1h, 1000, 1000s, 9999),
  };
  Lease never;  // never got a VM: no usage, not counted
  never.id = "l-5";
  never.owner = "ci-a";
  never.pool = "ci";
  never.created_at = kT0 + 1h;
  out.push_back(never);
  return out;
}

UsageQuery window(UsageGroupBy g, std::string label = {}) {
  UsageQuery q;
  q.since = kT0;
  q.until = kT0 + 4h;
  q.group_by = g;
  q.label = std::move(label);
  return q;
}

TEST_CASE("usage report: grouped by owner, within the window, leases with usage only",
          "[core][usage]") {
  auto rows = aggregate_usage(sample_leases(), window(UsageGroupBy::kOwner));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].group == "ci-a");
  CHECK(rows[0].leases == 3);  // l-1, l-3, l-4: not l-old (before since), not l-5 (no VM)
  CHECK(rows[0].cpu_ns == 80'000'000'000ULL);
  CHECK(rows[0].wall_ms == 100'000);
  CHECK(rows[0].disk_write_bytes == 300);
  CHECK(rows[0].net_rx_bytes == 30);
  CHECK(rows[0].net_tx_bytes == 3);
  CHECK(rows[0].peak_rss_bytes == 200);  // the highest, not a sum
  CHECK(rows[1].group == "ci-b");
  CHECK(rows[1].leases == 1);
}

TEST_CASE("usage report: by pool, by a label's value, and for one owner", "[core][usage]") {
  auto pools = aggregate_usage(sample_leases(), window(UsageGroupBy::kPool));
  REQUIRE(pools.size() == 2);
  CHECK(pools[0].group == "big");
  CHECK(pools[1].group == "ci");
  CHECK(pools[1].leases == 3);

  auto teams = aggregate_usage(sample_leases(), window(UsageGroupBy::kLabel, "team"));
  REQUIRE(teams.size() == 3);
  CHECK(teams[0].group == "");  // l-4 has no team label
  CHECK(teams[0].leases == 1);
  CHECK(teams[1].group == "arm");
  CHECK(teams[1].leases == 2);
  CHECK(teams[1].cpu_ns == 30'000'000'000ULL);
  CHECK(teams[2].group == "x86");

  UsageQuery mine = window(UsageGroupBy::kPool);
  mine.owner = "ci-b";
  auto own = aggregate_usage(sample_leases(), mine);
  REQUIRE(own.size() == 1);
  CHECK(own[0].group == "ci");
  CHECK(own[0].leases == 1);
}

TEST_CASE("usage report: the window is from since up to until", "[core][usage]") {
  UsageQuery q = window(UsageGroupBy::kOwner);
  q.since = kT0 + 1h;
  q.until = kT0 + 3h;
  auto rows = aggregate_usage(sample_leases(), q);
  int64_t leases = 0;
  for (const auto& r : rows) leases += r.leases;
  CHECK(leases == 2);  // l-2 at since, l-3; not l-4 at until
  CHECK(
      aggregate_usage(sample_leases(), UsageQuery{kT0, kT0, UsageGroupBy::kOwner, {}, {}}).empty());
}

TEST_CASE("usage report: group_by names", "[core][usage]") {
  CHECK(usage_group_by_from_string("owner") == UsageGroupBy::kOwner);
  CHECK(usage_group_by_from_string("pool") == UsageGroupBy::kPool);
  CHECK(usage_group_by_from_string("label") == UsageGroupBy::kLabel);
  CHECK_FALSE(usage_group_by_from_string("Owner"));
  CHECK_FALSE(usage_group_by_from_string(""));
  CHECK(to_string(UsageGroupBy::kLabel) == "label");
}

}  // namespace
}  // namespace armhive
