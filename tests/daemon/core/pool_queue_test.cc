#include "daemon/core/pool_queue.h"

#include <catch2/catch.hpp>

#include "tests/support/manual_clock.h"

namespace armhive {
namespace {

std::vector<std::string> reasons(const std::vector<QueueSlot>& slots) {
  std::vector<std::string> out;
  for (const auto& s : slots) out.emplace_back(to_string(s.reason));
  return out;
}

// The burst of issue 17: min_warm 2, max 6, max_starting 1, on a host with room for 14 VMs.
PoolQueueSnapshot burst_pool(const ManualClock& clock) {
  PoolQueueSnapshot p;
  p.max = 6;
  p.max_starting = 1;
  p.free_core_slots = 14;
  p.now = clock.now();
  return p;
}

TEST_CASE("pool queue: positions are 1-based in the order the engine serves", "[pool_queue]") {
  ManualClock clock;
  PoolQueueSnapshot p = burst_pool(clock);
  p.waiting = 4;
  p.total = 3;
  p.starting = 1;  // one cold boot under way for an earlier lease
  auto slots = plan_queue(p);
  REQUIRE(slots.size() == 4);
  for (int i = 0; i < 4; ++i) CHECK(slots[i].position == i + 1);
  CHECK(plan_queue(PoolQueueSnapshot{}).empty());
}

TEST_CASE("pool queue: a burst on a pool with min_warm 2, max 6, max_starting 1", "[pool_queue]") {
  ManualClock clock;
  PoolQueueSnapshot p = burst_pool(clock);

  SECTION("after the two warm VMs went out and one cold boot started") {
    // 20 requested: 2 warm hand-outs, lease 3 booting its VM (not queued), 17 waiting.
    p.waiting = 17;
    p.total = 3;
    p.starting = 1;
    auto r = reasons(plan_queue(p));
    // Room under max for 3 more VMs, but only one may boot at a time: all three wait for
    // max_starting; the 14 behind them need a release first.
    CHECK(r[0] == "at_max_starting");
    CHECK(r[2] == "at_max_starting");
    CHECK(r[3] == "at_pool_max");
    CHECK(r[16] == "at_pool_max");
  }
  SECTION("with max_starting 2") {
    p.max_starting = 2;
    p.waiting = 16;
    p.total = 4;
    p.starting = 2;
    auto r = reasons(plan_queue(p));
    CHECK(r[0] == "at_max_starting");
    CHECK(r[1] == "at_max_starting");
    CHECK(r[2] == "at_pool_max");
  }
  SECTION("all six VMs leased: every waiting lease waits for a release") {
    p.waiting = 14;
    p.total = 6;
    for (const auto& s : plan_queue(p)) CHECK(s.reason == QueueReason::kAtPoolMax);
  }
  SECTION("a refill booting for no lease serves the head first") {
    p.waiting = 3;
    p.total = 5;
    p.starting = 1;
    p.starting_unbound = 1;
    auto r = reasons(plan_queue(p));
    CHECK(r == std::vector<std::string>{"warm_vm_booting", "at_max_starting", "at_pool_max"});
  }
  SECTION("a free warm VM goes to the head before any boot") {
    p.waiting = 2;
    p.total = 1;
    p.warm_free = 1;
    auto r = reasons(plan_queue(p));
    CHECK(r == std::vector<std::string>{"warm_vm_free", "scheduling"});
  }
}

TEST_CASE("pool queue: cores, image, host and backoff", "[pool_queue]") {
  ManualClock clock;
  PoolQueueSnapshot p = burst_pool(clock);
  p.max = 20;
  p.max_starting = 4;
  p.waiting = 3;

  SECTION("cores run out before max_starting") {
    p.free_core_slots = 1;
    auto r = reasons(plan_queue(p));
    CHECK(r == std::vector<std::string>{"scheduling", "no_free_cores", "no_free_cores"});
  }
  SECTION("a backoff holds every lease that needs a boot until it ends") {
    p.retry_after = clock.now() + Seconds(4);
    p.total = 1;
    p.starting_unbound = 1;
    p.starting = 1;
    auto r = reasons(plan_queue(p));
    CHECK(r == std::vector<std::string>{"warm_vm_booting", "backing_off", "backing_off"});
    clock.advance(Seconds(4));
    p.now = clock.now();
    r = reasons(plan_queue(p));
    CHECK(r == std::vector<std::string>{"warm_vm_booting", "scheduling", "scheduling"});
  }
  SECTION("an unresolved image") {
    p.image_ready = false;
    for (const auto& s : plan_queue(p)) CHECK(s.reason == QueueReason::kImageUnavailable);
  }
  SECTION("a host not listed holds everyone, even for a warm VM") {
    p.host_listed = false;
    p.warm_free = 1;
    for (const auto& s : plan_queue(p)) CHECK(s.reason == QueueReason::kHostUnavailable);
  }
  SECTION("a draining host holds everyone, even for a warm VM") {
    p.host_draining = true;
    p.warm_free = 1;
    for (const auto& s : plan_queue(p)) CHECK(s.reason == QueueReason::kHostDraining);
    CHECK(to_string(QueueReason::kHostDraining) == "host_draining");
  }
}

TEST_CASE("pool queue: reason strings round-trip", "[pool_queue]") {
  for (auto r :
       {QueueReason::kWarmVmFree, QueueReason::kWarmVmBooting, QueueReason::kHostUnavailable,
        QueueReason::kHostDraining, QueueReason::kImageUnavailable, QueueReason::kBackingOff,
        QueueReason::kAtPoolMax, QueueReason::kAtMaxStarting, QueueReason::kNoFreeCores,
        QueueReason::kScheduling}) {
    CHECK(queue_reason_from_string(to_string(r)) == r);
  }
  CHECK_FALSE(queue_reason_from_string("busy").has_value());
}

TEST_CASE("pool queue: VM slots of a host", "[pool_queue]") {
  CHECK(vm_slots(2, true, 7, 0, 0, 1.0) == 3);
  CHECK(vm_slots(1, true, 0, 0, 0, 1.0) == 0);
  // 4 shared CPUs at overcommit 1.5 hold 6 vCPUs; 3 are used.
  CHECK(vm_slots(1, false, 0, 4, 3, 1.5) == 3);
  CHECK(vm_slots(2, false, 0, 4, 3, 1.5) == 1);
  CHECK(vm_slots(1, false, 0, 4, 7, 1.5) == 0);
}

}  // namespace
}  // namespace armhive
