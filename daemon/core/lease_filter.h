#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "daemon/core/lease.h"
#include "daemon/core/list_limit.h"

namespace armhive {

// Which leases a listing returns. Plain data, shared by the lease service and its store.
struct LeaseFilter {
  std::optional<std::string> owner;  // only this owner's leases
  std::optional<std::string> pool;
  std::optional<LeaseState> state;
  std::map<std::string, std::string> labels;  // all must match
  bool include_ended = true;
  size_t limit = kDefaultListLimit;  // 0: the default; at most kMaxListLimit
  std::string after_id;              // pagination cursor: ids are ordered by creation
};

// The limit a listing applies for `filter`.
inline size_t effective_limit(const LeaseFilter& filter) {
  return effective_list_limit(filter.limit);
}

}  // namespace armhive
