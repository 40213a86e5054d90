#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "daemon/core/lease.h"

namespace armhive {

// Which leases a listing returns. Plain data, shared by the lease service and its store.
struct LeaseFilter {
  std::optional<std::string> owner;  // only this owner's leases
  std::optional<std::string> pool;
  std::optional<LeaseState> state;
  std::map<std::string, std::string> labels;  // all must match
  bool include_ended = true;
  size_t limit = 100;    // 0 = 100; at most kMaxLeaseListLimit
  std::string after_id;  // pagination cursor: ids are ordered by creation
};

// The most leases one listing returns, whatever the filter asks.
inline constexpr size_t kMaxLeaseListLimit = 1000;

// The limit a listing applies for `filter`.
inline size_t effective_limit(const LeaseFilter& filter) {
  if (filter.limit == 0) return 100;
  return filter.limit < kMaxLeaseListLimit ? filter.limit : kMaxLeaseListLimit;
}

}  // namespace armhive
