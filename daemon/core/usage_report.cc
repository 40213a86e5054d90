#include "daemon/core/usage_report.h"

#include <algorithm>
#include <map>

namespace armhive {

std::string_view to_string(UsageGroupBy g) {
  switch (g) {
    case UsageGroupBy::kOwner:
      return "owner";
    case UsageGroupBy::kPool:
      return "pool";
    case UsageGroupBy::kLabel:
      return "label";
  }
  return "owner";
}

std::optional<UsageGroupBy> usage_group_by_from_string(std::string_view s) {
  for (UsageGroupBy g : {UsageGroupBy::kOwner, UsageGroupBy::kPool, UsageGroupBy::kLabel}) {
    if (to_string(g) == s) return g;
  }
  return std::nullopt;
}

bool usage_query_matches(const UsageQuery& q, const Lease& lease) {
  return lease.created_at >= q.since && lease.created_at < q.until &&
         (!q.owner || lease.owner == *q.owner);
}

std::vector<UsageRow> aggregate_usage(const std::vector<Lease>& leases, const UsageQuery& q) {
  std::map<std::string, UsageRow> groups;
  for (const Lease& l : leases) {
    if (!l.usage || !usage_query_matches(q, l)) continue;
    std::string key;
    switch (q.group_by) {
      case UsageGroupBy::kOwner:
        key = l.owner;
        break;
      case UsageGroupBy::kPool:
        key = l.pool;
        break;
      case UsageGroupBy::kLabel: {
        auto it = l.labels.find(q.label);
        if (it != l.labels.end()) key = it->second;
        break;
      }
    }
    UsageRow& row = groups[key];
    row.group = key;
    const LeaseUsage& u = *l.usage;
    ++row.leases;
    row.cpu_ns += u.cpu_ns;
    row.wall_ms += std::max<int64_t>(0, to_unix_ms(u.sampled_at) - to_unix_ms(u.started_at));
    row.disk_write_bytes += u.disk_write_bytes;
    row.net_rx_bytes += u.net_rx_bytes;
    row.net_tx_bytes += u.net_tx_bytes;
    row.peak_rss_bytes = std::max(row.peak_rss_bytes, u.peak_rss_bytes);
  }
  std::vector<UsageRow> out;
  out.reserve(groups.size());
  for (auto& [key, row] : groups) out.push_back(std::move(row));
  return out;
}

}  // namespace armhive
