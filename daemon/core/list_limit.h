#pragma once

#include <cstddef>

namespace armhive {

// How many items one page of a listing holds (leases, benchmarks, hosts' leases): the API's
// `limit` parameter defaults to kDefaultListLimit and is refused above kMaxListLimit, and every
// store query pages by at most kMaxListLimit, whatever its caller asks.
inline constexpr size_t kDefaultListLimit = 100;
inline constexpr size_t kMaxListLimit = 1000;

// The page size a listing applies for a requested `limit` (0 means the default).
inline constexpr size_t effective_list_limit(size_t limit) {
  if (limit == 0) return kDefaultListLimit;
  return limit < kMaxListLimit ? limit : kMaxListLimit;
}

}  // namespace armhive
