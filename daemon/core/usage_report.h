#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/core/clock.h"
#include "daemon/core/lease.h"
#include "daemon/core/lease_filter.h"

namespace armhive {

// The usage report (GET /v1/usage): what the leases created in a window used, summed per
// owner, pool or value of one label. SqliteLeaseStore computes it in SQL; aggregate_usage() is
// the same rule over leases in memory (the default of LeaseStore/LeaseService, and what the
// store's SQL is tested against). Plain data; pure; any thread.

enum class UsageGroupBy { kOwner, kPool, kLabel };
std::string_view to_string(UsageGroupBy g);  // "owner", "pool", "label"
std::optional<UsageGroupBy> usage_group_by_from_string(std::string_view s);

struct UsageQuery {
  TimePoint since;  // leases created at or after
  TimePoint until;  // and before this
  UsageGroupBy group_by = UsageGroupBy::kOwner;
  std::string label;                 // kLabel: the key whose value groups (validate_name rules)
  std::optional<std::string> owner;  // only this owner's leases (a caller who is not admin)
};

// One group's sums. Only leases that got a VM (those with a usage) count.
struct UsageRow {
  std::string group;  // the owner, the pool, or the label's value ("" for leases without it)
  int64_t leases = 0;
  uint64_t cpu_ns = 0;
  int64_t wall_ms = 0;  // the leases' wall times (LeaseUsage::wall_seconds) summed
  uint64_t disk_write_bytes = 0;
  uint64_t net_rx_bytes = 0;
  uint64_t net_tx_bytes = 0;
  uint64_t peak_rss_bytes = 0;  // the highest peak of any lease of the group
};

// Whether `lease` falls in the query's window and owner.
bool usage_query_matches(const UsageQuery& q, const Lease& lease);

// The report's rows over `leases` (any order; those the query does not match, and those
// without usage, are skipped), sorted by group.
std::vector<UsageRow> aggregate_usage(const std::vector<Lease>& leases, const UsageQuery& q);

// The usage report by paging through `list` (a LeaseFilter -> Result<std::vector<Lease>>, in id
// order from after_id) and aggregating in memory: the default of LeaseStore and LeaseService
// for implementations that cannot sum in SQL.
template <typename ListLeases>
Result<std::vector<UsageRow>> usage_by_paging(const UsageQuery& q, ListLeases&& list) {
  LeaseFilter page;
  page.owner = q.owner;
  page.limit = kMaxListLimit;
  std::vector<Lease> matching;
  for (;;) {
    auto listed = list(page);
    if (!listed.is_ok()) return listed.status();
    if (listed->empty()) break;
    const bool more = listed->size() >= page.limit;
    page.after_id = listed->back().id;
    for (Lease& l : *listed) {
      if (usage_query_matches(q, l)) matching.push_back(std::move(l));
    }
    if (!more) break;
  }
  return aggregate_usage(matching, q);
}

}  // namespace armhive
