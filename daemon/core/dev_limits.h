#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"
#include "daemon/core/clock.h"
#include "daemon/core/lease.h"

namespace armhive {

// A token's limits on its developer leases (purpose dev), besides its general ones. 0 means
// unlimited. Pure rules; the API applies them on create and renew (429 naming the field).
struct DevLimits {
  int max_leases = 0;       // at once
  Seconds max_ttl{0};       // per create or renew
  Seconds max_lifetime{0};  // a renew may extend a lease to created_at + max_lifetime, no more
};

// `held`: the token's dev leases that have not ended.
Status check_dev_create(const DevLimits& limits, const std::string& token, size_t held,
                        Seconds ttl);
// A renew of `lease` at `now` for `ttl` (expires_at would become now + ttl).
Status check_dev_renew(const DevLimits& limits, const std::string& token, const Lease& lease,
                       TimePoint now, Seconds ttl);

}  // namespace armhive
