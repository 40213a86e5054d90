#include "daemon/core/pool_queue.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace armhive {
namespace {

constexpr std::array<std::pair<QueueReason, std::string_view>, 9> kReasons = {{
    {QueueReason::kWarmVmFree, "warm_vm_free"},
    {QueueReason::kWarmVmBooting, "warm_vm_booting"},
    {QueueReason::kHostUnavailable, "host_unavailable"},
    {QueueReason::kImageUnavailable, "image_unavailable"},
    {QueueReason::kBackingOff, "backing_off"},
    {QueueReason::kAtPoolMax, "at_pool_max"},
    {QueueReason::kAtMaxStarting, "at_max_starting"},
    {QueueReason::kNoFreeCores, "no_free_cores"},
    {QueueReason::kScheduling, "scheduling"},
}};

// Why the lease needing the `nth` new VM (1-based) of the pool waits.
QueueReason new_vm_reason(const PoolQueueSnapshot& p, int nth) {
  if (!p.image_ready) return QueueReason::kImageUnavailable;
  if (p.now < p.retry_after) return QueueReason::kBackingOff;
  if (p.total + nth > p.max) return QueueReason::kAtPoolMax;
  if (p.starting + nth > p.max_starting) return QueueReason::kAtMaxStarting;
  if (nth > p.free_core_slots) return QueueReason::kNoFreeCores;
  return QueueReason::kScheduling;
}

}  // namespace

std::string_view to_string(QueueReason r) {
  for (const auto& [reason, name] : kReasons) {
    if (reason == r) return name;
  }
  return "scheduling";
}

std::optional<QueueReason> queue_reason_from_string(std::string_view s) {
  for (const auto& [reason, name] : kReasons) {
    if (name == s) return reason;
  }
  return std::nullopt;
}

std::vector<QueueSlot> plan_queue(const PoolQueueSnapshot& pool) {
  std::vector<QueueSlot> out;
  out.reserve(static_cast<size_t>(std::max(pool.waiting, 0)));
  for (int i = 0; i < pool.waiting; ++i) {
    QueueSlot slot{.position = i + 1};
    if (!pool.host_listed) {
      slot.reason = QueueReason::kHostUnavailable;
    } else if (i < pool.warm_free) {
      slot.reason = QueueReason::kWarmVmFree;
    } else if (i < pool.warm_free + pool.starting_unbound) {
      slot.reason = QueueReason::kWarmVmBooting;
    } else {
      slot.reason = new_vm_reason(pool, i - pool.warm_free - pool.starting_unbound + 1);
    }
    out.push_back(slot);
  }
  return out;
}

int vm_slots(int vcpus, bool dedicated, int free_dedicated, int shared_cpus, int shared_vcpus_used,
             double overcommit) {
  if (vcpus < 1) return 0;
  if (dedicated) return std::max(free_dedicated, 0) / vcpus;
  int capacity = static_cast<int>(std::floor(overcommit * shared_cpus));
  return std::max(capacity - shared_vcpus_used, 0) / vcpus;
}

}  // namespace armhive
