#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/clock.h"
#include "daemon/core/pool_queue.h"
#include "daemon/core/vm_record.h"

namespace armhive {

// The pool scheduler: one pure function from a snapshot of one pool to what its scheduling
// pass does, in order, and where each waiting lease stands. The engine's scheduling pass
// carries out the actions and GET /v1/leases/{id}'s `queue` shows the slots of the same plan,
// so the reason a lease is shown waiting for is the reason the engine does not serve it.
//
// Rules, in order:
// - Leases are served FIFO. A host not listed (its running domains, hence its free cores, are
//   unknown) holds every lease.
// - A draining host (the admin's drain or maintenance) takes no new VMs: every lease waits
//   (`host_draining`, after `host_unavailable`), nothing refills, and the pool's free VMs — warm
//   ones and refills booting, bound to no lease, not cancelled — are retired (destroyed) so the
//   host empties. VMs bound to a lease (booting for it or leased) are left to their leases.
//   In a fleet the same holds per VM: a free VM whose own host drains (`host_draining` on the
//   VM) is retired and serves nobody, while the pool's other hosts go on serving.
// - Free warm VMs (warm, bound to no lease, not cancelled) go to the first leases, one each, in
//   the order of `vms`.
// - Each VM booting for no lease (a warm refill, not cancelled) will serve one lease when it is
//   up: the next leases wait for it (`warm_vm_booting`) rather than boot a second VM.
// - The others need a new VM each. The n-th such lease's boot needs room for n new VMs: the
//   image resolved, no boot backoff, `max` (all VMs, destroying and cancelled ones included),
//   `max_starting` (all VMs booting) and the host's free core slots. The first limit n new VMs
//   would break is its reason; every limit grows with n, so a lease that waits holds all
//   behind it that need a new VM (no overtaking).
// - Only when no lease waits, the pool refills: warm refills boot while free warm VMs plus
//   refills booting stay under `min_warm`, within the same limits; and, in a pool being
//   shrunk, free VMs beyond `min_warm` (it was lowered, or a removed pool has 0) are retired,
//   refills still booting first, then the last warm ones in hand-out order.
// No I/O, no clock (the caller passes `now`), no locks.

struct PoolLimits {
  int min_warm = 0;
  int max = 1;
  int max_starting = 1;
};

// One VM of the pool as the engine holds it.
struct ScheduledVm {
  std::string name;
  VmState state = VmState::kStarting;
  bool bound = false;      // it boots for, or serves, a lease
  bool cancelled = false;  // its boot or life is being ended: it will serve nobody
  // Its host takes no new VMs (drained, in maintenance): a free VM there is retired, never
  // handed out, even while the pool's other hosts take VMs.
  bool host_draining = false;
};

struct PoolSnapshot {
  PoolLimits limits;
  std::vector<ScheduledVm> vms;    // every VM of the pool, in the order warm ones are handed out
  std::vector<std::string> queue;  // ids of the live leases waiting for a VM, FIFO
  int free_core_slots = 0;         // VMs of the pool's shape the host's free cores hold now
  // In a fleet, max_starting holds per host: the new VMs that may start booting now, summed
  // over the hosts that can take one (each host's max_starting minus its boots), so a host
  // whose boots hang uses up only its own. -1: max_starting counts the pool's boots.
  int boot_slots = -1;
  bool host_listed = true;     // some host of the pool is listed
  bool host_draining = false;  // every listed host of the pool is drained or in maintenance
  bool image_ready = true;
  // The pool was shrunk (a reload lowered min_warm or removed it): free VMs beyond min_warm
  // are retired. Otherwise a surplus (a host back with its warm VMs) is kept for the leases.
  bool shrinking = false;
  TimePoint now;
  TimePoint retry_after;  // the pool's boot backoff ends (epoch: none)
};

enum class PoolActionKind {
  kHandOut,       // give warm VM `vm_name` to lease `lease_id`
  kBootForLease,  // boot a new VM for lease `lease_id`
  kBootWarm,      // boot a warm refill VM (bound to no lease)
  kWait,          // lease `lease_id` waits, for `reason`
  kRetire,        // destroy free VM `vm_name` (warm or booting, bound to no lease): its host
                  // drains, or the pool has more than min_warm
};
std::string_view to_string(PoolActionKind kind);

struct PoolAction {
  PoolActionKind kind = PoolActionKind::kWait;
  std::string lease_id;  // empty for kBootWarm
  std::string vm_name;   // kHandOut and kRetire only
  // kWait: what it waits for; kRetire: kHostDraining, or kScheduling for a surplus VM.
  QueueReason reason = QueueReason::kScheduling;

  friend bool operator==(const PoolAction&, const PoolAction&) = default;
};

struct PoolPlan {
  // One action per queued lease, in queue order, then the retirements of free VMs on draining
  // hosts (in the order of `vms`), then the warm refills (none when every host drains: then
  // every free VM is retired). The engine carries
  // them out in this order and stops at the first boot that fails (its error is the lease's
  // reason; the limits it was planned under no longer hold).
  std::vector<PoolAction> actions;
  // slots[i] is where queue[i] stands: its 1-based position and what this pass does for it
  // (`warm_vm_free`: handed out; `scheduling`: its VM boots; otherwise why it waits).
  std::vector<QueueSlot> slots;
};

PoolPlan plan_pool(const PoolSnapshot& pool);

// plan_pool(pool).slots[index] without planning the leases ahead: a lease's slot depends only
// on how many live leases are ahead of it, never on who they are, so it is O(vms) however long
// the queue. `pool.queue` is not read (the caller knows the index; it may leave the queue
// empty). For GET /v1/leases/{id} of a lease behind thousands of waiting ones.
QueueSlot plan_slot(const PoolSnapshot& pool, size_t index);

}  // namespace armhive
