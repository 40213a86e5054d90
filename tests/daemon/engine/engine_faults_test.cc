// Fault injection over whole lease lifecycles: every call the engine makes to the hypervisor or
// the store during a scenario (create, hand-out, renew, release, expire, reconcile, restart) is
// made to fail in turn — transiently, permanently, or by hanging past its deadline — and once
// the faults stop and the engine settles, the end state must be the fault-free one: the ready
// lease kept its VM, nothing leaked, the database agrees with the engine.
#include <catch2/catch.hpp>
#include <set>

#include "daemon/engine/lease_engine.h"
#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

struct Outcome {
  Lease kept;  // the lease that is never released
  std::set<std::string> domains;
};

// Phase A (no faults): a warm pool and a ready lease. Phase B (faults armed): a second lease
// handed out and released, the first renewed, a third that expires, a reconcile pass, a
// restart and another pass. Phase C (faults off): the engine settles.
Outcome run_scenario(Harness& h, bool inject, int nth, FaultKind kind, int* calls = nullptr) {
  h.start();
  REQUIRE(h.settle(1));
  Lease kept = h.lease();
  REQUIRE(kept.state == LeaseState::kReady);
  REQUIRE(h.settle(1));

  if (inject) h.faults.fail_nth(nth, kind);
  h.faults.arm();
  auto second = h.engine->create_lease({.pool = "ci", .ssh_keys = {kTestKey}, .owner = "ci"});
  if (second.is_ok()) {
    (void)h.engine->wait_lease(second->id, 2s);
    (void)h.engine->renew_lease(kept.id, 7200s);
    (void)h.engine->release_lease(second->id);
  }
  h.engine->wait_idle(5s);
  auto third =
      h.engine->create_lease({.pool = "ci", .ttl = 60s, .ssh_keys = {kTestKey}, .owner = "ci"});
  if (third.is_ok()) (void)h.engine->wait_lease(third->id, 2s);
  h.clock.advance(61s);
  h.engine->expire_due_leases();
  h.engine->wait_idle(5s);
  (void)h.engine->reconcile();
  h.engine->wait_idle(5s);
  h.make_engine();  // restart (like kill -9: nothing is cleaned up)
  bool started = h.engine->start().is_ok();
  if (started) {
    h.engine->wait_idle(5s);
    (void)h.engine->reconcile();
  }
  h.faults.disarm();
  if (calls) *calls = h.faults.calls();

  if (!started) {
    h.make_engine();  // the operator (or systemd) starts it again once the fault is gone
    h.start();
  }
  for (int round = 0; round < 4; ++round) {
    h.clock.advance(2min);  // past every backoff
    h.engine->schedule();
    REQUIRE(h.engine->reconcile().is_ok());
    h.engine->wait_idle(5s);
  }
  REQUIRE(h.settle(1));
  Outcome out;
  out.kept = h.engine->get_lease(kept.id).value();
  for (const auto& [name, d] : h.hypervisor->domains()) out.domains.insert(name);
  // Everything the engine, the database and the host hold agrees, and nothing leaked.
  std::set<std::string> records;
  std::vector<VmRecord> stored_vms = h.store->vms().value();
  for (const VmRecord& r : stored_vms) records.insert(r.name);
  CHECK(records == out.domains);
  CHECK(h.hypervisor->files() == out.domains);
  CHECK(h.cores_held() == 2 * static_cast<int>(out.domains.size()));
  PoolStatus pool = h.engine->pools().at(0);
  CHECK(pool.warm + pool.leased == static_cast<int>(out.domains.size()));
  std::vector<Lease> active = h.store->active().value();
  for (const Lease& stored : active) {
    CHECK(h.engine->get_lease(stored.id)->state == stored.state);
  }
  for (const auto& r : {second, third}) {
    if (r.is_ok()) CHECK(is_terminal(h.store->find(r->id).value()->state));
  }
  CHECK(h.engine->hosts().at(0).state == HostState::kOk);
  // The kept lease was never ended: it is ready on the VM it was given, which still runs.
  CHECK(out.kept.state == LeaseState::kReady);
  CHECK(out.kept.vm_name == kept.vm_name);
  CHECK(out.domains.count(kept.vm_name));
  return out;
}

TEST_CASE("every single fault in a lease lifecycle heals to the fault-free end state",
          "[engine][faults]") {
  int total = 0;
  size_t baseline_domains = 0;
  {
    Harness h({ci_pool(1, 4)});
    Outcome clean = run_scenario(h, false, 0, FaultKind::kTransient, &total);
    baseline_domains = clean.domains.size();
  }
  REQUIRE(total > 20);
  REQUIRE(baseline_domains == 2);  // the kept lease's VM and one warm VM
  for (FaultKind kind : {FaultKind::kTransient, FaultKind::kPermanent, FaultKind::kHang}) {
    for (int nth = 1; nth <= total; ++nth) {
      Harness h({ci_pool(1, 4)});
      INFO("fault " << to_string(kind) << " at call " << nth << " of " << total);
      Outcome out = run_scenario(h, true, nth, kind);
      CHECK(out.domains.size() == baseline_domains);
    }
  }
}

}  // namespace
}  // namespace armhive
