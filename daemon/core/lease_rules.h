#pragma once

#include <string>

#include "base/result.h"
#include "base/validation.h"
#include "daemon/core/clock.h"
#include "daemon/core/lease.h"

namespace armhive {

// The rules of a lease's life that do not depend on the engine's state: how long it may live,
// when it is due to expire, whether it may be renewed. The engine asks these and carries out
// the answer (daemon/engine/lease_engine.cc). Pure.

// The longest TTL any lease may ask for, whatever the pool's max_ttl (the API's bound).
inline constexpr Seconds kMaxLeaseTtl{kMaxTtlSeconds};

// A TTL for a new lease or a renewal in `pool`: positive and at most 30 days (400 naming
// `ttl`), at most the pool's max_ttl (422 naming `ttl`).
Status check_lease_ttl(Seconds ttl, const PoolConfig& pool);

// Whether the reaper ends this live lease now: its deadline has come and it is not already
// being released. (While waiting, the deadline is created_at + ttl; once ready, ready_at + ttl;
// a renewal moves it to now + ttl.)
bool expiry_due(const Lease& lease, TimePoint now);

// The reason an expired lease ends with.
std::string expiry_reason(const Lease& lease);

// Whether a lease in `state` may be renewed: live and not releasing, else 409 saying why.
Status check_renewable(const std::string& id, LeaseState state);

// What becomes of a live lease whose VM was lost before the lease was ready.
enum class LostVmOutcome {
  kEndedByRelease,  // it is being released: the VM's destroy ends it
  kRequeue,         // not the lease's fault: back to the head of its pool's queue
  kFail,            // the lease fails with the VM's reason
};
// A boot failed; `host_down` when the hypervisor was unavailable (the host, not the image or
// the guest, is at fault, so the lease waits for it).
LostVmOutcome after_boot_failure(LeaseState state, bool host_down);
// A hand-out (keys, lease metadata) failed for the `attempts`-th time: retried on a new VM
// up to kMaxHandoutAttempts, then the lease fails.
inline constexpr int kMaxHandoutAttempts = 3;
LostVmOutcome after_handout_failure(LeaseState state, int attempts);

}  // namespace armhive
