#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "daemon/core/clock.h"

namespace armhive {

// Where a waiting lease stands in its pool's queue and what holds it (GET /v1/leases/{id}'s
// `queue`). The reasons are decided by the pool scheduler (daemon/core/pool_scheduler.h): the
// engine carries out plan_pool()'s actions and shows the same plan's slots, so they cannot drift.
// The rules, in short: leases are served FIFO;
// free warm VMs go first, then VMs booting for no lease (each will serve one lease), then new
// boots, each needing room under `max` (all VMs of the pool, destroying ones included),
// `max_starting` (VMs booting) and the host's free cores. The i-th waiting lease that needs a new
// boot needs i + 1 of them, so its reason is the first limit that i + 1 new VMs would break:
// with max 6 and 6 VMs leased, every waiting lease is `at_pool_max` (it waits for a release),
// while with room under max only for the head, the head is `at_max_starting` and the ones behind
// it `at_pool_max`.
enum class QueueReason {
  kWarmVmFree,        // a warm VM is free: the next scheduling pass hands it out
  kWarmVmBooting,     // a warm VM booting for no lease will serve it
  kHostUnavailable,   // the host is not listed yet (degraded or unreachable)
  kHostDraining,      // the admin drains the host (or took it for maintenance): no new VMs
  kImageUnavailable,  // the pool's image is not resolved or not valid
  kBackingOff,        // the pool waits after failed boots
  kAtPoolMax,         // the pool holds `max` VMs: waits for a release
  kAtMaxStarting,     // `max_starting` VMs are booting: waits for one to finish
  kNoFreeCores,       // the host has no free cores for the pool's shape
  kScheduling,        // nothing holds it: the next scheduling pass boots its VM
};

// "warm_vm_free", "warm_vm_booting", "host_unavailable", "host_draining", "image_unavailable",
// "backing_off", "at_pool_max", "at_max_starting", "no_free_cores", "scheduling" (the API's
// strings).
std::string_view to_string(QueueReason r);
std::optional<QueueReason> queue_reason_from_string(std::string_view s);

struct QueueSlot {
  int position = 0;  // 1-based among the pool's waiting leases, in the order they are served
  QueueReason reason = QueueReason::kScheduling;

  friend bool operator==(const QueueSlot&, const QueueSlot&) = default;
};

// A pool as the engine sees it at one instant.
struct PoolQueueSnapshot {
  int waiting = 0;           // leases in the queue (live ones only)
  int warm_free = 0;         // warm VMs bound to no lease
  int starting_unbound = 0;  // VMs booting for no lease (warm refills)
  int starting = 0;          // all VMs booting, bound or not
  int total = 0;             // all VMs of the pool, in any state
  int max = 1;
  int max_starting = 1;
  int free_core_slots = 0;  // more VMs of the pool's shape the host's cores hold now
  bool host_listed = true;
  bool host_draining = false;
  bool image_ready = true;
  TimePoint now;
  TimePoint retry_after;  // the pool's boot backoff ends (epoch: none)
};

// plan_pool()'s slots for a pool given by its counts, in queue order (slot i: the i-th lease).
std::vector<QueueSlot> plan_queue(const PoolQueueSnapshot& pool);

// How many more VMs of `vcpus` vCPUs fit: dedicated, one free dedicated CPU per vCPU; shared,
// within floor(overcommit × shared CPUs) vCPUs in total.
int vm_slots(int vcpus, bool dedicated, int free_dedicated, int shared_cpus, int shared_vcpus_used,
             double overcommit);

}  // namespace armhive
