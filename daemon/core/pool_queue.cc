#include "daemon/core/pool_queue.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "daemon/core/pool_scheduler.h"

namespace armhive {
namespace {

constexpr std::array<std::pair<QueueReason, std::string_view>, 10> kReasons = {{
    {QueueReason::kWarmVmFree, "warm_vm_free"},
    {QueueReason::kWarmVmBooting, "warm_vm_booting"},
    {QueueReason::kHostUnavailable, "host_unavailable"},
    {QueueReason::kHostDraining, "host_draining"},
    {QueueReason::kImageUnavailable, "image_unavailable"},
    {QueueReason::kBackingOff, "backing_off"},
    {QueueReason::kAtPoolMax, "at_pool_max"},
    {QueueReason::kAtMaxStarting, "at_max_starting"},
    {QueueReason::kNoFreeCores, "no_free_cores"},
    {QueueReason::kScheduling, "scheduling"},
}};

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

// The pool the counts describe, VM by VM (counts that contradict each other are read as the
// smallest pool that has them all), through the one scheduler.
std::vector<QueueSlot> plan_queue(const PoolQueueSnapshot& pool) {
  PoolSnapshot snap;
  snap.limits = {.max = pool.max, .max_starting = pool.max_starting};
  auto add = [&snap](int n, VmState state, bool bound) {
    for (int i = 0; i < n; ++i) {
      snap.vms.push_back(
          {.name = "vm-" + std::to_string(snap.vms.size()), .state = state, .bound = bound});
    }
  };
  add(pool.warm_free, VmState::kWarm, false);
  add(pool.starting_unbound, VmState::kStarting, false);
  add(pool.starting - pool.starting_unbound, VmState::kStarting, true);
  add(pool.total - static_cast<int>(snap.vms.size()), VmState::kLeased, true);
  for (int i = 0; i < pool.waiting; ++i) snap.queue.push_back("l-" + std::to_string(i + 1));
  snap.free_core_slots = pool.free_core_slots;
  snap.host_listed = pool.host_listed;
  snap.host_draining = pool.host_draining;
  snap.image_ready = pool.image_ready;
  snap.now = pool.now;
  snap.retry_after = pool.retry_after;
  return plan_pool(snap).slots;
}

int vm_slots(int vcpus, bool dedicated, int free_dedicated, int shared_cpus, int shared_vcpus_used,
             double overcommit) {
  if (vcpus < 1) return 0;
  if (dedicated) return std::max(free_dedicated, 0) / vcpus;
  int capacity = static_cast<int>(std::floor(overcommit * shared_cpus));
  return std::max(capacity - shared_vcpus_used, 0) / vcpus;
}

}  // namespace armhive
