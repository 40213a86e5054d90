#include "daemon/core/pool_scheduler.h"

#include <algorithm>

namespace armhive {
namespace {

struct Counts {
  std::vector<const ScheduledVm*> warm_free;  // in hand-out order
  std::vector<const ScheduledVm*> free;       // warm or booting, for no lease, not cancelled
  std::vector<const ScheduledVm*> retire;     // free, but on a draining host
  int booting_free = 0;                       // booting for no lease, not cancelled
  int starting = 0;                           // every VM booting
  int total = 0;
};

Counts count(const PoolSnapshot& p) {
  Counts c;
  for (const ScheduledVm& vm : p.vms) {
    ++c.total;
    bool free = !vm.bound && !vm.cancelled;
    if (vm.state == VmState::kStarting) ++c.starting;
    if (free && vm.host_draining &&
        (vm.state == VmState::kStarting || vm.state == VmState::kWarm)) {
      c.retire.push_back(&vm);
      continue;
    }
    if (vm.state == VmState::kStarting) {
      if (free) {
        ++c.booting_free;
        c.free.push_back(&vm);
      }
    } else if (vm.state == VmState::kWarm && free) {
      c.warm_free.push_back(&vm);
      c.free.push_back(&vm);
    }
  }
  return c;
}

// What holds the `nth` (1-based) new VM of this pass; kScheduling when nothing does.
QueueReason new_vm_reason(const PoolSnapshot& p, const Counts& c, int nth) {
  if (!p.image_ready) return QueueReason::kImageUnavailable;
  if (p.now < p.retry_after) return QueueReason::kBackingOff;
  if (c.total + nth > p.limits.max) return QueueReason::kAtPoolMax;
  if (p.boot_slots >= 0 ? nth > p.boot_slots : c.starting + nth > p.limits.max_starting) {
    return QueueReason::kAtMaxStarting;
  }
  if (nth > p.free_core_slots) return QueueReason::kNoFreeCores;
  return QueueReason::kScheduling;
}

// Where the lease at 0-based `index` stands, and what holds it, given that every lease ahead
// of it is live. plan_pool's loop and plan_slot share it, so the two cannot disagree.
QueueReason reason_at(const PoolSnapshot& p, const Counts& c, size_t index) {
  if (!p.host_listed) return QueueReason::kHostUnavailable;
  if (p.host_draining) return QueueReason::kHostDraining;
  if (index < c.warm_free.size()) return QueueReason::kWarmVmFree;
  size_t after_warm = index - c.warm_free.size();
  if (after_warm < static_cast<size_t>(c.booting_free)) return QueueReason::kWarmVmBooting;
  // The n-th lease needing a new VM needs n of them, booted this pass or not.
  size_t nth = after_warm - static_cast<size_t>(c.booting_free) + 1;
  return new_vm_reason(p, c, static_cast<int>(std::min<size_t>(nth, 1 << 30)));
}

}  // namespace

std::string_view to_string(PoolActionKind kind) {
  switch (kind) {
    case PoolActionKind::kHandOut:
      return "hand_out";
    case PoolActionKind::kBootForLease:
      return "boot_for_lease";
    case PoolActionKind::kBootWarm:
      return "boot_warm";
    case PoolActionKind::kWait:
      return "wait";
    case PoolActionKind::kRetire:
      return "retire";
  }
  return "wait";
}

PoolPlan plan_pool(const PoolSnapshot& pool) {
  const Counts c = count(pool);
  PoolPlan plan;
  plan.actions.reserve(pool.queue.size());
  plan.slots.reserve(pool.queue.size());
  size_t warm_given = 0;
  bool any_waits = false;
  for (size_t i = 0; i < pool.queue.size(); ++i) {
    PoolAction action{.lease_id = pool.queue[i], .reason = reason_at(pool, c, i)};
    if (action.reason == QueueReason::kWarmVmFree) {
      action.kind = PoolActionKind::kHandOut;
      action.vm_name = c.warm_free[warm_given++]->name;
    } else if (action.reason == QueueReason::kScheduling) {
      action.kind = PoolActionKind::kBootForLease;
    }
    any_waits = any_waits || action.kind == PoolActionKind::kWait;
    plan.slots.push_back({.position = static_cast<int>(i) + 1, .reason = action.reason});
    if (action.kind != PoolActionKind::kWait) action.reason = QueueReason::kScheduling;
    plan.actions.push_back(std::move(action));
  }
  for (const ScheduledVm* vm : c.retire) {
    plan.actions.push_back({.kind = PoolActionKind::kRetire,
                            .vm_name = vm->name,
                            .reason = QueueReason::kHostDraining});
  }
  if (pool.host_draining) {
    for (const ScheduledVm* vm : c.free) {
      plan.actions.push_back({.kind = PoolActionKind::kRetire,
                              .vm_name = vm->name,
                              .reason = QueueReason::kHostDraining});
    }
    return plan;
  }
  if (any_waits || !pool.host_listed) return plan;
  // New VMs the leases need (booted this pass or not): those past the free and booting ones.
  const size_t served = c.warm_free.size() + static_cast<size_t>(c.booting_free);
  int new_vms = pool.queue.size() > served ? static_cast<int>(pool.queue.size() - served) : 0;
  int warm_or_booting = static_cast<int>(c.warm_free.size() - warm_given) + c.booting_free;
  // A pool being shrunk with more free VMs than min_warm (it was lowered, or the pool was
  // removed from the configuration): the surplus is retired, refills still booting first
  // (nobody can use them yet), then the last warm ones in hand-out order.
  int surplus = pool.shrinking ? warm_or_booting - std::max(pool.limits.min_warm, 0) : 0;
  for (auto it = c.free.rbegin(); surplus > 0 && it != c.free.rend(); ++it) {
    if ((*it)->state != VmState::kStarting) continue;
    plan.actions.push_back({.kind = PoolActionKind::kRetire, .vm_name = (*it)->name});
    --surplus;
  }
  for (size_t i = c.warm_free.size(); surplus > 0 && i > warm_given; --i, --surplus) {
    plan.actions.push_back({.kind = PoolActionKind::kRetire, .vm_name = c.warm_free[i - 1]->name});
  }
  while (warm_or_booting < pool.limits.min_warm &&
         new_vm_reason(pool, c, new_vms + 1) == QueueReason::kScheduling) {
    plan.actions.push_back({.kind = PoolActionKind::kBootWarm});
    ++new_vms;
    ++warm_or_booting;
  }
  return plan;
}

QueueSlot plan_slot(const PoolSnapshot& pool, size_t index) {
  return {.position = static_cast<int>(index) + 1, .reason = reason_at(pool, count(pool), index)};
}

}  // namespace armhive
