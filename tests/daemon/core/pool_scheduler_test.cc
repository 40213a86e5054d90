#include "daemon/core/pool_scheduler.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <deque>
#include <map>
#include <random>
#include <set>

#include "tests/support/manual_clock.h"

namespace armhive {
namespace {

using K = PoolActionKind;

// A pool snapshot built line by line; VMs are named vm-00, vm-01, … in the order added.
struct Pool {
  PoolSnapshot p;
  explicit Pool(const ManualClock& clock, int min_warm, int max, int max_starting) {
    p.limits = {.min_warm = min_warm, .max = max, .max_starting = max_starting};
    p.free_core_slots = 14;
    p.now = clock.now();
  }
  Pool& vms(int n, VmState state, bool bound, bool cancelled = false) {
    for (int i = 0; i < n; ++i) {
      char name[16];
      std::snprintf(name, sizeof name, "vm-%02zu", p.vms.size());
      p.vms.push_back({.name = name, .state = state, .bound = bound, .cancelled = cancelled});
    }
    return *this;
  }
  Pool& leases(int n) {
    for (int i = 0; i < n; ++i) p.queue.push_back("l-" + std::to_string(p.queue.size() + 1));
    return *this;
  }
};

std::vector<std::string> reasons(const PoolPlan& plan) {
  std::vector<std::string> out;
  for (const auto& s : plan.slots) out.emplace_back(to_string(s.reason));
  return out;
}

std::vector<std::string> kinds(const PoolPlan& plan) {
  std::vector<std::string> out;
  for (const auto& a : plan.actions) out.emplace_back(to_string(a.kind));
  return out;
}

TEST_CASE("scheduler: free warm VMs go to the first leases, one each, then boots",
          "[sched][pool_queue]") {
  ManualClock clock;
  Pool pool(clock, 2, 6, 2);
  pool.vms(2, VmState::kWarm, false).vms(1, VmState::kLeased, true).leases(4);
  PoolPlan plan = plan_pool(pool.p);
  REQUIRE(plan.actions.size() == 4);
  CHECK(plan.actions[0] == PoolAction{.kind = K::kHandOut, .lease_id = "l-1", .vm_name = "vm-00"});
  CHECK(plan.actions[1] == PoolAction{.kind = K::kHandOut, .lease_id = "l-2", .vm_name = "vm-01"});
  CHECK(plan.actions[2] == PoolAction{.kind = K::kBootForLease, .lease_id = "l-3"});
  CHECK(plan.actions[3] == PoolAction{.kind = K::kBootForLease, .lease_id = "l-4"});
  CHECK(reasons(plan) ==
        std::vector<std::string>{"warm_vm_free", "warm_vm_free", "scheduling", "scheduling"});
  for (int i = 0; i < 4; ++i) CHECK(plan.slots[i].position == i + 1);
  CHECK(plan_pool(PoolSnapshot{}).slots.empty());
}

TEST_CASE("scheduler: a cancelled or bound VM serves nobody", "[sched]") {
  ManualClock clock;
  Pool pool(clock, 0, 6, 2);
  pool.vms(1, VmState::kWarm, false, /*cancelled=*/true)
      .vms(1, VmState::kStarting, false, /*cancelled=*/true)
      .vms(1, VmState::kStarting, true)
      .leases(1);
  PoolPlan plan = plan_pool(pool.p);
  // The cancelled ones still count against max_starting: 2 booting, none may start.
  CHECK(kinds(plan) == std::vector<std::string>{"wait"});
  CHECK(reasons(plan) == std::vector<std::string>{"at_max_starting"});
  pool.p.limits.max_starting = 3;
  CHECK(kinds(plan_pool(pool.p)) == std::vector<std::string>{"boot_for_lease"});
}

TEST_CASE("scheduler: a refill booting for no lease serves the next lease", "[sched]") {
  ManualClock clock;
  Pool pool(clock, 1, 6, 3);
  pool.vms(1, VmState::kStarting, false).leases(3);
  PoolPlan plan = plan_pool(pool.p);
  // The head waits for the refill; the two behind it boot their own (room for two more).
  CHECK(kinds(plan) == std::vector<std::string>{"wait", "boot_for_lease", "boot_for_lease"});
  CHECK(reasons(plan) == std::vector<std::string>{"warm_vm_booting", "scheduling", "scheduling"});
  // While any lease waits, the pool does not refill.
  CHECK(std::count_if(plan.actions.begin(), plan.actions.end(),
                      [](const PoolAction& a) { return a.kind == K::kBootWarm; }) == 0);
}

TEST_CASE("scheduler: refills to min_warm only when no lease waits, within the limits", "[sched]") {
  ManualClock clock;
  SECTION("an idle pool refills to min_warm") {
    Pool pool(clock, 3, 6, 4);
    pool.vms(1, VmState::kWarm, false);
    CHECK(kinds(plan_pool(pool.p)) == std::vector<std::string>{"boot_warm", "boot_warm"});
  }
  SECTION("refills booting count toward min_warm") {
    Pool pool(clock, 2, 6, 4);
    pool.vms(1, VmState::kWarm, false).vms(1, VmState::kStarting, false);
    CHECK(plan_pool(pool.p).actions.empty());
  }
  SECTION("max_starting bounds a refill") {
    Pool pool(clock, 4, 6, 1);
    CHECK(kinds(plan_pool(pool.p)) == std::vector<std::string>{"boot_warm"});
  }
  SECTION("max bounds a refill, destroying VMs included") {
    Pool pool(clock, 4, 3, 4);
    pool.vms(2, VmState::kDestroying, false);
    CHECK(kinds(plan_pool(pool.p)) == std::vector<std::string>{"boot_warm"});
  }
  SECTION("free cores bound a refill") {
    Pool pool(clock, 4, 6, 4);
    pool.p.free_core_slots = 2;
    CHECK(kinds(plan_pool(pool.p)) == std::vector<std::string>{"boot_warm", "boot_warm"});
  }
  SECTION("served leases first, then the refill behind them") {
    Pool pool(clock, 1, 6, 4);
    pool.vms(1, VmState::kWarm, false).leases(1);
    CHECK(kinds(plan_pool(pool.p)) == std::vector<std::string>{"hand_out", "boot_warm"});
  }
  SECTION("no refill while the image is missing, backing off or the host is not listed") {
    Pool pool(clock, 2, 6, 4);
    pool.p.image_ready = false;
    CHECK(plan_pool(pool.p).actions.empty());
    pool.p.image_ready = true;
    pool.p.retry_after = clock.now() + Seconds(1);
    CHECK(plan_pool(pool.p).actions.empty());
    pool.p.retry_after = {};
    pool.p.host_listed = false;
    CHECK(plan_pool(pool.p).actions.empty());
  }
}

// The burst of issue 17: min_warm 2, max 6, max_starting 1, on a host with room for 14 VMs.
TEST_CASE("scheduler: a burst on a pool with min_warm 2, max 6, max_starting 1",
          "[sched][pool_queue]") {
  ManualClock clock;
  Pool pool(clock, 2, 6, 1);

  SECTION("after the two warm VMs went out and one cold boot started") {
    // 20 requested: 2 warm hand-outs, lease 3 booting its VM (not queued), 17 waiting.
    pool.vms(2, VmState::kLeased, true).vms(1, VmState::kStarting, true).leases(17);
    PoolPlan plan = plan_pool(pool.p);
    auto r = reasons(plan);
    // Room under max for 3 more VMs, but only one may boot at a time: all three wait for
    // max_starting; the 14 behind them need a release first.
    CHECK(r[0] == "at_max_starting");
    CHECK(r[2] == "at_max_starting");
    CHECK(r[3] == "at_pool_max");
    CHECK(r[16] == "at_pool_max");
    CHECK(kinds(plan) == std::vector<std::string>(17, "wait"));
  }
  SECTION("with max_starting 2") {
    pool.p.limits.max_starting = 2;
    pool.vms(2, VmState::kLeased, true).vms(2, VmState::kStarting, true).leases(16);
    auto r = reasons(plan_pool(pool.p));
    CHECK(r[0] == "at_max_starting");
    CHECK(r[1] == "at_max_starting");
    CHECK(r[2] == "at_pool_max");
  }
  SECTION("all six VMs leased: every waiting lease waits for a release") {
    pool.vms(6, VmState::kLeased, true).leases(14);
    for (const auto& s : plan_pool(pool.p).slots) CHECK(s.reason == QueueReason::kAtPoolMax);
  }
  SECTION("a refill booting for no lease serves the head first") {
    pool.vms(4, VmState::kLeased, true).vms(1, VmState::kStarting, false).leases(3);
    CHECK(reasons(plan_pool(pool.p)) ==
          std::vector<std::string>{"warm_vm_booting", "at_max_starting", "at_pool_max"});
  }
  SECTION("a free warm VM goes to the head before any boot") {
    pool.vms(1, VmState::kWarm, false).leases(2);
    PoolPlan plan = plan_pool(pool.p);
    CHECK(reasons(plan) == std::vector<std::string>{"warm_vm_free", "scheduling"});
    CHECK(kinds(plan) == std::vector<std::string>{"hand_out", "boot_for_lease"});
  }
}

TEST_CASE("scheduler: cores, image, host and backoff", "[sched][pool_queue]") {
  ManualClock clock;
  Pool pool(clock, 0, 20, 4);
  pool.leases(3);

  SECTION("cores run out before max_starting") {
    pool.p.free_core_slots = 1;
    CHECK(reasons(plan_pool(pool.p)) ==
          std::vector<std::string>{"scheduling", "no_free_cores", "no_free_cores"});
  }
  SECTION("in a fleet, the hosts' boot slots replace the pool's max_starting") {
    pool.vms(4, VmState::kStarting, true);  // 4 booting: the pool's max_starting is used up
    pool.p.boot_slots = 2;                  // but another host may boot two more
    CHECK(reasons(plan_pool(pool.p)) ==
          std::vector<std::string>{"scheduling", "scheduling", "at_max_starting"});
    CHECK(plan_slot(pool.p, 2).reason == QueueReason::kAtMaxStarting);
    pool.p.boot_slots = 0;
    CHECK(reasons(plan_pool(pool.p)) == std::vector<std::string>(3, "at_max_starting"));
  }
  SECTION("a backoff holds every lease that needs a boot until it ends") {
    pool.p.retry_after = clock.now() + Seconds(4);
    pool.vms(1, VmState::kStarting, false);
    CHECK(reasons(plan_pool(pool.p)) ==
          std::vector<std::string>{"warm_vm_booting", "backing_off", "backing_off"});
    clock.advance(Seconds(4));
    pool.p.now = clock.now();
    PoolPlan plan = plan_pool(pool.p);
    CHECK(reasons(plan) == std::vector<std::string>{"warm_vm_booting", "scheduling", "scheduling"});
    CHECK(kinds(plan) == std::vector<std::string>{"wait", "boot_for_lease", "boot_for_lease"});
  }
  SECTION("a backoff does not hold a warm hand-out") {
    pool.p.retry_after = clock.now() + Seconds(4);
    pool.vms(1, VmState::kWarm, false);
    CHECK(kinds(plan_pool(pool.p)) == std::vector<std::string>{"hand_out", "wait", "wait"});
  }
  SECTION("an unresolved image") {
    pool.p.image_ready = false;
    PoolPlan plan = plan_pool(pool.p);
    for (const auto& s : plan.slots) CHECK(s.reason == QueueReason::kImageUnavailable);
    CHECK(kinds(plan) == std::vector<std::string>(3, "wait"));
  }
  SECTION("a host not listed holds everyone, even for a warm VM") {
    pool.p.host_listed = false;
    pool.vms(1, VmState::kWarm, false);
    PoolPlan plan = plan_pool(pool.p);
    for (const auto& s : plan.slots) CHECK(s.reason == QueueReason::kHostUnavailable);
    CHECK(kinds(plan) == std::vector<std::string>(3, "wait"));
  }
  SECTION("a draining host: every lease waits, free VMs are retired, bound ones kept") {
    pool.p.host_draining = true;
    pool.vms(1, VmState::kWarm, false)                       // vm-00: free warm, retired
        .vms(1, VmState::kStarting, false)                   // vm-01: a refill booting, retired
        .vms(1, VmState::kStarting, true)                    // vm-02: booting for a lease, kept
        .vms(1, VmState::kLeased, true)                      // vm-03: leased, kept
        .vms(1, VmState::kWarm, false, /*cancelled=*/true);  // vm-04: already going
    PoolPlan plan = plan_pool(pool.p);
    for (const auto& s : plan.slots) CHECK(s.reason == QueueReason::kHostDraining);
    CHECK(kinds(plan) == std::vector<std::string>{"wait", "wait", "wait", "retire", "retire"});
    CHECK(plan.actions[3].vm_name == "vm-00");
    CHECK(plan.actions[4].vm_name == "vm-01");
    for (size_t i = 0; i < 3; ++i) CHECK(plan_slot(pool.p, i) == plan.slots[i]);
  }
  SECTION("a draining host refills nothing; undrained, it refills") {
    Pool empty(clock, 2, 6, 4);
    empty.p.host_draining = true;
    CHECK(plan_pool(empty.p).actions.empty());
    empty.p.host_draining = false;
    CHECK(kinds(plan_pool(empty.p)) == std::vector<std::string>{"boot_warm", "boot_warm"});
  }
  SECTION("min_warm lowered: the surplus goes, booting refills first, leased VMs stay") {
    Pool lowered(clock, 1, 6, 4);
    lowered.p.shrinking = true;  // a reload lowered min_warm
    lowered
        .vms(2, VmState::kWarm, false)      // vm-00 kept, vm-01 retired second
        .vms(1, VmState::kStarting, false)  // vm-02: a refill booting, retired first
        .vms(1, VmState::kLeased, true);    // vm-03: leased, not the pool's to take
    PoolPlan plan = plan_pool(lowered.p);
    CHECK(kinds(plan) == std::vector<std::string>{"retire", "retire"});
    CHECK(plan.actions[0].vm_name == "vm-02");
    CHECK(plan.actions[1].vm_name == "vm-01");
    CHECK(plan.actions[0].reason == QueueReason::kScheduling);  // not a drain
    // A removed pool (min_warm 0) empties of free VMs; a lease takes its warm VM first.
    lowered.p.limits.min_warm = 0;
    CHECK(kinds(plan_pool(lowered.p)) == std::vector<std::string>{"retire", "retire", "retire"});
    lowered.leases(1);
    CHECK(kinds(plan_pool(lowered.p)) == std::vector<std::string>{"hand_out", "retire", "retire"});
  }
  SECTION("a host not listed and draining: not listed comes first") {
    pool.p.host_listed = false;
    pool.p.host_draining = true;
    for (const auto& s : plan_pool(pool.p).slots) CHECK(s.reason == QueueReason::kHostUnavailable);
  }
}

TEST_CASE("scheduler: in a fleet, free VMs on a draining host are retired, the others serve",
          "[sched][fleet]") {
  ManualClock clock;
  Pool pool(clock, 2, 6, 4);
  pool.vms(1, VmState::kWarm, false)      // vm-00: on the draining host
      .vms(1, VmState::kStarting, false)  // vm-01: a refill there, booting
      .vms(1, VmState::kLeased, true)     // vm-02: leased there: left to its lease
      .vms(1, VmState::kWarm, false);     // vm-03: on a host that takes VMs
  for (int i = 0; i < 3; ++i) pool.p.vms[i].host_draining = true;
  SECTION("the lease gets the VM on the other host; the drained host's free VMs go") {
    pool.leases(1);
    PoolPlan plan = plan_pool(pool.p);
    REQUIRE(kinds(plan) ==
            std::vector<std::string>{"hand_out", "retire", "retire", "boot_warm", "boot_warm"});
    CHECK(plan.actions[0].vm_name == "vm-03");
    CHECK(plan.actions[1].vm_name == "vm-00");
    CHECK(plan.actions[2].vm_name == "vm-01");
    CHECK(plan.slots[0].reason == QueueReason::kWarmVmFree);
  }
  SECTION("a VM retired is not counted warm: the pool refills elsewhere to min_warm") {
    PoolPlan plan = plan_pool(pool.p);
    CHECK(kinds(plan) == std::vector<std::string>{"retire", "retire", "boot_warm"});
  }
  SECTION("a second lease does not wait for the draining host's refill") {
    pool.leases(2);
    PoolPlan plan = plan_pool(pool.p);
    CHECK(reasons(plan) == std::vector<std::string>{"warm_vm_free", "scheduling"});
    CHECK(plan_slot(pool.p, 1) == plan.slots[1]);
  }
}

// ---- property test over random event sequences ------------------------------------------

// A pool and its leases as the engine would hold them, moved by random events; every
// scheduling pass's plan is checked against the invariants, then carried out.
struct World {
  std::mt19937 rng;
  PoolLimits limits;
  int core_slots = 0;  // VMs the host holds in all (each VM, destroying ones too, takes one)
  struct V {
    std::string name;
    VmState state = VmState::kStarting;
    std::string lease;
    bool cancelled = false;
  };
  std::map<std::string, V> vms;  // by name: the order the engine hands warm VMs out in
  std::deque<std::string> queue;
  std::map<std::string, std::string> lease_vm;  // lease -> the VM it holds
  std::set<std::string> live;                   // leases not ended
  bool host_listed = true;
  bool host_draining = false;
  bool image_ready = true;
  ManualClock clock;
  TimePoint retry_after{};
  int next_vm = 0;
  int next_lease = 0;
  int passes = 0, handouts = 0, boots = 0, retires = 0, prefix_checks = 0, slot_checks = 0;

  bool drains = false;  // the admin drains and undrains the host now and then

  World(uint32_t seed, bool with_drains) : rng(seed), drains(with_drains) {
    limits.max = pick(1, 6);
    limits.min_warm = pick(0, limits.max);
    limits.max_starting = pick(1, 3);
    core_slots = pick(1, 8);
  }

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

  PoolSnapshot snapshot() const {
    PoolSnapshot p;
    p.limits = limits;
    for (const auto& [name, v] : vms) {
      p.vms.push_back({name, v.state, !v.lease.empty(), v.cancelled});
    }
    p.queue.assign(queue.begin(), queue.end());
    p.free_core_slots = std::max(core_slots - static_cast<int>(vms.size()), 0);
    p.host_listed = host_listed;
    p.host_draining = host_draining;
    p.image_ready = image_ready;
    p.shrinking = true;  // min_warm changes mid-run, as a reload changes it
    p.now = clock.now();
    p.retry_after = retry_after;
    return p;
  }

  // The limit a pass's n-th new VM breaks, computed from the world, not the plan.
  bool room_for(const PoolSnapshot& p, int n) const {
    int starting = 0;
    for (const auto& v : p.vms) starting += v.state == VmState::kStarting ? 1 : 0;
    return p.host_listed && !p.host_draining && p.image_ready && p.now >= p.retry_after &&
           static_cast<int>(p.vms.size()) + n <= limits.max &&
           starting + n <= limits.max_starting && n <= p.free_core_slots;
  }

  void check(const PoolSnapshot& p, const PoolPlan& plan) {
    REQUIRE(plan.slots.size() == p.queue.size());
    REQUIRE(plan.actions.size() >= p.queue.size());
    std::set<std::string> warm_free;
    std::set<std::string> free_vms;  // warm or booting, bound to no lease, not cancelled
    int booting_free = 0;
    for (const auto& v : p.vms) {
      if (v.state == VmState::kWarm && !v.bound && !v.cancelled) warm_free.insert(v.name);
      if (v.state == VmState::kStarting && !v.bound && !v.cancelled) ++booting_free;
      if ((v.state == VmState::kWarm || v.state == VmState::kStarting) && !v.bound &&
          !v.cancelled) {
        free_vms.insert(v.name);
      }
    }
    std::set<std::string> given_vms, retired;
    int new_vms = 0, handed = 0, waits_for_booting = 0;
    bool any_wait = false, blocked = false;
    for (size_t i = 0; i < plan.actions.size(); ++i) {
      const PoolAction& a = plan.actions[i];
      if (i < p.queue.size()) {
        // One action per queued lease, in queue order (so no lease gets two VMs).
        REQUIRE(a.lease_id == p.queue[i]);
        REQUIRE(a.kind != K::kBootWarm);
        CHECK(plan.slots[i].position == static_cast<int>(i) + 1);
      } else {
        // Refills (or, draining, retirements) come last.
        REQUIRE((a.kind == K::kBootWarm || a.kind == K::kRetire));
      }
      switch (a.kind) {
        case K::kHandOut:
          CHECK(plan.slots[i].reason == QueueReason::kWarmVmFree);
          // A free warm VM, never given twice; hand-outs take the head of the queue.
          CHECK(warm_free.count(a.vm_name) == 1);
          CHECK(given_vms.insert(a.vm_name).second);
          CHECK(handed == static_cast<int>(i));
          CHECK(p.host_listed);
          CHECK_FALSE(p.host_draining);
          ++handed;
          break;
        case K::kBootForLease:
        case K::kBootWarm:
          if (a.kind == K::kBootForLease) CHECK(plan.slots[i].reason == QueueReason::kScheduling);
          // FIFO: no boot behind a lease that waits for anything but a booting refill.
          CHECK_FALSE(blocked);
          // No boot while the host is unlisted, the image missing or the pool backing off;
          // max, max_starting and the free cores are respected.
          ++new_vms;
          CHECK(room_for(p, new_vms));
          break;
        case K::kWait:
          CHECK(plan.slots[i].reason == a.reason);
          any_wait = true;
          if (a.reason == QueueReason::kWarmVmBooting) {
            ++waits_for_booting;
          } else {
            blocked = true;
            // It waits only when a new VM would break a limit.
            CHECK_FALSE(room_for(p, new_vms + 1));
          }
          // A draining host (once listed) holds every lease for that reason.
          if (p.host_listed && p.host_draining) CHECK(a.reason == QueueReason::kHostDraining);
          break;
        case K::kRetire:
          // Only free VMs nobody was handed this pass, each once.
          CHECK(free_vms.count(a.vm_name) == 1);
          CHECK(given_vms.count(a.vm_name) == 0);
          CHECK(retired.insert(a.vm_name).second);
          break;
      }
    }
    // Draining empties the host of every free VM; otherwise, when no lease waits, exactly the
    // free VMs beyond min_warm go (none while a lease waits: it may need them).
    const int spare_before = static_cast<int>(warm_free.size()) - handed + booting_free;
    if (p.host_draining) {
      CHECK(retired == free_vms);
    } else if (any_wait || !p.host_listed) {
      CHECK(retired.empty());
    } else {
      CHECK(static_cast<int>(retired.size()) == std::max(spare_before - limits.min_warm, 0));
    }
    // Work-conserving: no lease waits while a free warm VM stays unused.
    CHECK(handed ==
          std::min<int>(p.host_listed && !p.host_draining ? warm_free.size() : 0, p.queue.size()));
    CHECK(waits_for_booting <= booting_free);
    // min_warm: when no lease waits, the pool refills to min_warm unless a limit stops it,
    // and never beyond it.
    int warm_boots = 0;
    for (const auto& a : plan.actions) warm_boots += a.kind == K::kBootWarm ? 1 : 0;
    int spare = spare_before - (p.host_draining ? 0 : static_cast<int>(retired.size()));
    if (any_wait || p.host_draining) {
      CHECK(warm_boots == 0);
    } else if (p.host_listed) {
      CHECK((spare + warm_boots >= limits.min_warm || !room_for(p, new_vms + 1)));
      CHECK(spare + warm_boots <= std::max(limits.min_warm, spare));
    }
  }

  std::string new_vm(const std::string& lease) {
    char name[16];
    std::snprintf(name, sizeof name, "vm-%04d", next_vm++);
    vms[name] = V{.name = name, .state = VmState::kStarting, .lease = lease};
    return name;
  }

  // The engine plans only a prefix of the queue (LeaseEngine::schedule_locked): one lease per VM
  // of the pool plus max_starting, plus one. That must not change what the pass does, nor the
  // slots of the leases in it.
  void check_prefix(const PoolSnapshot& p, const PoolPlan& full) {
    size_t horizon = p.vms.size() + static_cast<size_t>(std::max(p.limits.max_starting, 0)) + 1;
    if (p.queue.size() <= horizon) return;
    ++prefix_checks;
    PoolSnapshot q = p;
    q.queue.resize(horizon);
    PoolPlan part = plan_pool(q);
    auto acting = [](const PoolPlan& plan) {
      std::vector<PoolAction> out;
      for (const PoolAction& a : plan.actions) {
        if (a.kind != K::kWait) out.push_back(a);
      }
      return out;
    };
    CHECK(acting(part) == acting(full));
    for (size_t i = 0; i < horizon; ++i) CHECK(part.slots[i] == full.slots[i]);
  }

  // GET /v1/leases/{id} reads one lease's slot with plan_slot, from its index alone.
  void check_slots(const PoolSnapshot& p, const PoolPlan& full) {
    PoolSnapshot no_queue = p;
    no_queue.queue.clear();
    for (size_t i = 0; i < full.slots.size(); ++i) {
      ++slot_checks;
      CHECK(plan_slot(no_queue, i) == full.slots[i]);
    }
  }

  void pass() {
    PoolSnapshot p = snapshot();
    PoolPlan plan = plan_pool(p);
    check(p, plan);
    check_prefix(p, plan);
    check_slots(p, plan);
    ++passes;
    for (const PoolAction& a : plan.actions) {
      bool start_fails = (a.kind == K::kBootForLease || a.kind == K::kBootWarm) && pick(0, 9) == 0;
      if (start_fails) return;  // the engine ends the pass at a boot that cannot start
      switch (a.kind) {
        case K::kHandOut: {
          V& v = vms.at(a.vm_name);
          REQUIRE(v.lease.empty());                  // a VM never serves two leases
          REQUIRE(lease_vm.count(a.lease_id) == 0);  // a lease never holds two VMs
          v.lease = a.lease_id;
          v.state = VmState::kLeased;
          lease_vm[a.lease_id] = a.vm_name;
          queue.erase(std::find(queue.begin(), queue.end(), a.lease_id));
          ++handouts;
          break;
        }
        case K::kBootForLease:
          REQUIRE(lease_vm.count(a.lease_id) == 0);
          lease_vm[a.lease_id] = new_vm(a.lease_id);
          queue.erase(std::find(queue.begin(), queue.end(), a.lease_id));
          ++boots;
          break;
        case K::kBootWarm:
          new_vm("");
          ++boots;
          break;
        case K::kRetire:
          end_vm(vms.at(a.vm_name));
          ++retires;
          break;
        case K::kWait:
          break;
      }
    }
    // What the engine's limits promise once the plan is carried out.
    int starting = 0;
    for (const auto& [name, v] : vms) starting += v.state == VmState::kStarting ? 1 : 0;
    CHECK(static_cast<int>(vms.size()) <= std::max(limits.max, 0));
    CHECK(starting <= limits.max_starting);
    CHECK(static_cast<int>(vms.size()) <= core_slots);
  }

  V* random_vm(VmState state) {
    std::vector<V*> found;
    for (auto& [name, v] : vms) {
      if (v.state == state) found.push_back(&v);
    }
    return found.empty() ? nullptr : found[pick(0, static_cast<int>(found.size()) - 1)];
  }

  void end_vm(V& v) {  // destroy (a starting VM is cancelled: its boot task destroys it)
    if (v.state == VmState::kStarting) {
      v.cancelled = true;
    } else {
      v.state = VmState::kDestroying;
    }
  }

  void release(std::string lease) {  // by value: callers pass an element of `live`
    live.erase(lease);
    auto q = std::find(queue.begin(), queue.end(), lease);
    if (q != queue.end()) queue.erase(q);
    if (auto it = lease_vm.find(lease); it != lease_vm.end()) {
      end_vm(vms.at(it->second));
      lease_vm.erase(it);
    }
  }

  void event() {
    switch (pick(0, 9)) {
      case 0:
      case 1: {  // a lease is requested
        std::string id = "l-" + std::to_string(next_lease++);
        live.insert(id);
        queue.push_back(id);
        break;
      }
      case 2:
      case 9: {  // a boot finishes
        V* v = random_vm(VmState::kStarting);
        if (!v) break;
        if (v->cancelled) {
          v->state = VmState::kDestroying;
        } else {
          v->state = v->lease.empty() ? VmState::kWarm : VmState::kLeased;
        }
        break;
      }
      case 3: {  // a boot fails: the lease goes back to the head of the queue, the pool backs off
        V* v = random_vm(VmState::kStarting);
        if (!v) break;
        if (!v->lease.empty() && live.count(v->lease)) {
          lease_vm.erase(v->lease);
          queue.push_front(v->lease);
        }
        v->lease.clear();
        v->state = VmState::kDestroying;
        retry_after = clock.now() + Seconds(pick(1, 5));
        break;
      }
      case 4: {  // a lease is released or expires
        if (live.empty()) break;
        auto it = live.begin();
        std::advance(it, pick(0, static_cast<int>(live.size()) - 1));
        release(*it);
        break;
      }
      case 5: {  // a destroy finishes
        V* v = random_vm(VmState::kDestroying);
        if (v) vms.erase(v->name);
        break;
      }
      case 6:  // a warm VM crashes
        if (V* v = random_vm(VmState::kWarm)) v->state = VmState::kDestroying;
        break;
      case 7:
        clock.advance(Seconds(1));
        break;
      case 8:
        // The operator changes min_warm (armhived reloads its configuration).
        if (pick(0, 9) == 0) limits.min_warm = pick(0, limits.max);
        if (pick(0, 4) == 0) host_listed = !host_listed;
        if (pick(0, 4) == 0) image_ready = !image_ready;
        if (drains && pick(0, 1) == 0) host_draining = !host_draining;
        break;
      default:
        break;
    }
  }
};

TEST_CASE("scheduler: random event sequences keep the invariants", "[sched][property]") {
  int handouts = 0, boots = 0, retires = 0, prefix_checks = 0, slot_checks = 0;
  // Seeds 1-300 without drains, 301-450 with them.
  for (uint32_t seed = 1; seed <= 450; ++seed) {
    INFO("seed " << seed);
    World w(seed, /*with_drains=*/seed > 300);
    for (int step = 0; step < 200; ++step) {
      w.event();
      if (w.pick(0, 2) == 0) w.pass();
    }
    // Then the world calms down: every lease ends, every boot and destroy finishes, the host
    // and image are back and the backoff is over; the pool settles at min_warm (or what its
    // limits allow) warm VMs.
    for (const std::string& id : std::set<std::string>(w.live)) w.release(id);
    w.host_listed = w.image_ready = true;
    w.host_draining = false;
    w.clock.advance(Seconds(10));
    for (int round = 0; round < 20; ++round) {
      for (auto it = w.vms.begin(); it != w.vms.end();) {
        World::V& v = it->second;
        if (v.state == VmState::kDestroying) {
          it = w.vms.erase(it);
          continue;
        }
        if (v.state == VmState::kStarting) {
          v.state = v.cancelled ? VmState::kDestroying : VmState::kWarm;
        }
        ++it;
      }
      PoolSnapshot p = w.snapshot();
      PoolPlan plan = plan_pool(p);
      w.check(p, plan);
      for (const PoolAction& a : plan.actions) {
        if (a.kind == K::kBootWarm) w.new_vm("");
      }
    }
    int warm = 0;
    for (const auto& [name, v] : w.vms) warm += v.state == VmState::kWarm ? 1 : 0;
    CHECK(warm == std::min({w.limits.min_warm, w.limits.max, w.core_slots}));
    handouts += w.handouts;
    boots += w.boots;
    retires += w.retires;
    prefix_checks += w.prefix_checks;
    slot_checks += w.slot_checks;
  }
  // The sequences exercised both paths (a property test that never hands out proves little).
  CHECK(handouts > 100);
  CHECK(boots > 100);
  CHECK(retires > 20);
  CHECK(prefix_checks > 100);
  CHECK(slot_checks > 1000);
}

}  // namespace
}  // namespace armhive
