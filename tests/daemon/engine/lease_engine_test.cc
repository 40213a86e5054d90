#include "daemon/engine/lease_engine.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <vector>

#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

TEST_CASE("a warm pool fills to min_warm and hands out a ready VM at once", "[engine]") {
  Harness h({ci_pool(2, 4)});
  h.start();
  REQUIRE(h.settle(2));
  CHECK(h.hypervisor->domains().size() == 2);

  Lease l = h.lease();
  CHECK(l.state == LeaseState::kReady);
  CHECK(l.warm_handout);
  CHECK_FALSE(l.address.empty());
  CHECK(l.login_user == "root");
  CHECK(l.cpus.size() == 2);
  // The keys went into that very VM through the agent, and its metadata names the lease.
  auto domains = h.hypervisor->domains();
  REQUIRE(domains.count(l.vm_name));
  CHECK(domains[l.vm_name].keys == std::vector<std::string>{kTestKey});
  CHECK(domains[l.vm_name].lease_id == l.id);
  // The lease and the VM's record name the host that runs it.
  CHECK(l.host == "localhost");
  auto records = h.store->vms();
  REQUIRE(records.is_ok());
  REQUIRE_FALSE(records->empty());
  for (const VmRecord& r : *records) CHECK(r.host == "localhost");
  // The pool refills behind it.
  REQUIRE(h.settle(2));
  CHECK(h.hypervisor->domains().size() == 3);
  CHECK(h.metrics.count("armhive_handout_seconds",
                        {{"pool", "ci"}, {"host", "localhost"}, {"path", "warm"}}) == 1);
}

TEST_CASE("a lease on an empty pool boots a VM cold and becomes ready", "[engine]") {
  Harness h({ci_pool(0, 2)});
  h.start();
  Lease l = h.lease();
  CHECK((l.state == LeaseState::kProvisioning || l.state == LeaseState::kReady));
  l = h.wait_ready(l.id);
  CHECK(l.state == LeaseState::kReady);
  CHECK_FALSE(l.warm_handout);
  CHECK(l.host == "localhost");
  CHECK(h.hypervisor->domains().at(l.vm_name).spec.cmdline.find("armhive.hostname=" + l.vm_name) !=
        std::string::npos);
  // History records every step with a reason.
  std::vector<LeaseState> states;
  for (const auto& t : l.history) states.push_back(t.to);
  CHECK(states == std::vector<LeaseState>{LeaseState::kPending, LeaseState::kProvisioning,
                                          LeaseState::kReady});
  // The cold path is timed phase by phase, once each.
  for (const char* phase : {"create", "boot", "readiness"}) {
    CHECK(h.metrics.count("armhive_boot_phase_seconds",
                          {{"pool", "ci"}, {"host", "localhost"}, {"phase", phase}}) == 1);
  }
  CHECK(h.metrics.count("armhive_handout_seconds",
                        {{"pool", "ci"}, {"host", "localhost"}, {"path", "cold"}}) == 1);
}

TEST_CASE("release destroys the VM, frees its cores and the pool refills", "[engine]") {
  Harness h({ci_pool(1, 3)});
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  REQUIRE(l.state == LeaseState::kReady);
  std::string vm = l.vm_name;
  auto released = h.engine->release_lease(l.id);
  REQUIRE(released.is_ok());
  REQUIRE(h.settle(1));
  CHECK_FALSE(h.hypervisor->domains().count(vm));
  CHECK_FALSE(h.hypervisor->files().count(vm));
  auto after = h.engine->get_lease(l.id);
  REQUIRE(after.is_ok());
  CHECK(after->state == LeaseState::kReleased);
  CHECK(h.cores_held() == 2);  // only the refilled warm VM holds cores
  // Releasing again is harmless.
  CHECK(h.engine->release_lease(l.id).is_ok());
}

TEST_CASE("TTL expiry is enforced by the server without sleeping", "[engine]") {
  Harness h({ci_pool(1, 2)});
  h.start();
  REQUIRE(h.settle(1));
  LeaseRequest req;
  req.ttl = 600s;
  Lease l = h.lease(req);
  REQUIRE(l.state == LeaseState::kReady);
  // Let the refill behind the hand-out become ready first: moving the clock 599 s under its
  // readiness wait would time it out and put the pool in failure backoff.
  REQUIRE(h.settle(1));
  h.clock.advance(599s);
  h.engine->expire_due_leases();
  CHECK(h.engine->get_lease(l.id)->state == LeaseState::kReady);

  // Renewing moves the deadline; then it runs out.
  auto renewed = h.engine->renew_lease(l.id, 1200s);
  REQUIRE(renewed.is_ok());
  h.clock.advance(1199s);
  h.engine->expire_due_leases();
  CHECK(h.engine->get_lease(l.id)->state == LeaseState::kReady);
  h.clock.advance(2s);
  h.engine->expire_due_leases();
  REQUIRE(h.settle(1));
  Lease ended = *h.engine->get_lease(l.id);
  CHECK(ended.state == LeaseState::kExpired);
  CHECK(ended.reason.find("TTL") != std::string::npos);
  CHECK_FALSE(h.hypervisor->domains().count(l.vm_name));
}

TEST_CASE("a lease waits with a reason when the pool is at max, then gets the freed slot",
          "[engine]") {
  Harness h({ci_pool(0, 1)});
  h.start();
  Lease first = h.wait_ready(h.lease().id);
  REQUIRE(first.state == LeaseState::kReady);
  Lease second = h.lease();
  CHECK(second.state == LeaseState::kPending);
  CHECK(h.engine->get_lease(second.id)->reason.find("at max") != std::string::npos);
  REQUIRE(h.engine->release_lease(first.id).is_ok());
  Lease served = h.wait_ready(second.id);
  CHECK(served.state == LeaseState::kReady);
  CHECK(served.vm_name != first.vm_name);
}

TEST_CASE("a lease can be cancelled while it is provisioning and nothing leaks", "[engine]") {
  Harness h({ci_pool(0, 2)});
  h.hypervisor->never_ready = true;
  h.start();
  Lease l = h.lease();
  REQUIRE(l.state == LeaseState::kProvisioning);
  auto cancelled = h.engine->release_lease(l.id);
  REQUIRE(cancelled.is_ok());
  REQUIRE(h.settle(0));
  CHECK(h.engine->get_lease(l.id)->state == LeaseState::kReleased);
  CHECK(h.hypervisor->domains().empty());
  CHECK(h.hypervisor->files().empty());
  CHECK(h.cores_held() == 0);
  CHECK(h.store->vms()->empty());
}

TEST_CASE("a VM that fails to boot fails its lease and leaves nothing behind", "[engine]") {
  Harness h({ci_pool(0, 2)});
  h.hypervisor->fail_create = true;
  h.start();
  Lease l = h.lease();
  Lease ended = h.wait_ready(l.id);
  for (int i = 0; i < 100 && ended.state != LeaseState::kFailed; ++i) {
    h.engine->wait_idle(1s);
    ended = *h.engine->get_lease(l.id);
  }
  CHECK(ended.state == LeaseState::kFailed);
  CHECK(ended.reason.find("injected create failure") != std::string::npos);
  REQUIRE(h.engine->wait_idle(5s));  // the VM's cleanup may still run after the lease failed
  CHECK(h.hypervisor->domains().empty());
  CHECK(h.cores_held() == 0);
  CHECK(h.store->vms()->empty());
}

TEST_CASE("a pool whose VMs keep failing to boot backs off instead of looping", "[engine]") {
  // A 10 s backoff: after the first failed refill nothing is retried while the test runs.
  Harness h({ci_pool(1, 2)}, ":memory:", nullptr, 10s);
  h.hypervisor->fail_create = true;
  h.start();
  for (int i = 0; i < 1000 && h.hypervisor->creates() == 0; ++i) std::this_thread::sleep_for(1ms);
  REQUIRE(h.engine->wait_idle(5s));  // the failed boot is cleaned up
  // Many scheduling passes within the backoff (on the engine's clock) make no new attempt:
  // a loop would make one per pass.
  for (int pass = 0; pass < 100; ++pass) {
    h.clock.advance(50ms);  // 5 s in all, half the backoff
    h.engine->schedule();
  }
  REQUIRE(h.engine->wait_idle(5s));
  CHECK(h.hypervisor->creates() == 1);
  // A lease waits and says why instead of failing on a known-broken pool.
  Lease l = h.lease();
  CHECK(l.state == LeaseState::kPending);
  CHECK(h.engine->get_lease(l.id)->reason.find("backing off after 1 failed boot") !=
        std::string::npos);
  CHECK(h.hypervisor->creates() == 1);
  CHECK(h.engine->release_lease(l.id)->state == LeaseState::kReleased);
  // Once the backoff has passed on the engine's clock, the refill tries again (once).
  h.clock.advance(10s);
  h.engine->schedule();
  REQUIRE(h.engine->wait_idle(5s));
  CHECK(h.hypervisor->creates() == 2);
}

TEST_CASE("a host that is down keeps leases waiting instead of failing them", "[engine]") {
  Harness h({ci_pool(0, 2)});
  h.hypervisor->fail_create = true;
  h.hypervisor->fail_create_code = ErrorCode::kUnavailable;
  h.start();
  Lease l = h.lease();
  h.engine->wait_idle(1s);
  Lease waiting = *h.engine->get_lease(l.id);
  CHECK_FALSE(is_terminal(waiting.state));
  h.hypervisor->fail_create = false;
  h.clock.advance(1s);  // past the pool's backoff (on the engine's clock)
  CHECK(h.wait_ready(l.id).state == LeaseState::kReady);
}

TEST_CASE("a missing image makes leases wait and say why", "[engine]") {
  Harness h({ci_pool(0, 2)});
  h.image_missing = true;
  h.start();
  Lease l = h.lease();
  CHECK(l.state == LeaseState::kPending);
  CHECK(h.engine->get_lease(l.id)->reason.find("image 'tiny' unavailable") != std::string::npos);
  h.image_missing = false;
  CHECK(h.wait_ready(l.id).state == LeaseState::kReady);
}

TEST_CASE("a crashed guest fails its lease and the pool refills", "[engine]") {
  Harness h({ci_pool(1, 3)});
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  REQUIRE(l.state == LeaseState::kReady);
  h.hypervisor->crash(l.vm_name);
  // The crash event is handled asynchronously: wait for its effect before settling.
  for (int i = 0; i < 1000 && h.engine->get_lease(l.id)->state != LeaseState::kFailed; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  REQUIRE(h.settle(1));
  Lease failed = *h.engine->get_lease(l.id);
  CHECK(failed.state == LeaseState::kFailed);
  CHECK(failed.reason.find("crashed") != std::string::npos);
  CHECK_FALSE(h.hypervisor->files().count(l.vm_name));  // overlay deleted
  CHECK(h.cores_held() == 2);
  auto events = h.engine->events_since(0, 0ms);
  bool saw_crash = false;
  for (const Event& e : events)
    saw_crash = saw_crash || (e.type == "vm.crashed" && e.lease_id == l.id);
  CHECK(saw_crash);
}

TEST_CASE("events recorded from outside join the stream with the lease's owner", "[engine]") {
  Harness h({ci_pool(1, 3)});
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  REQUIRE(l.state == LeaseState::kReady);
  uint64_t before = h.engine->events_since(0, 0ms).back().seq;
  h.engine->record_event(l.id, "forward.opened", "10.0.0.1:22000 -> 10.77.0.10:22");
  h.engine->record_event("l-000000000000", "forward.opened", "unknown lease: dropped");
  // The pool refills behind the hand-out on the engine's own threads, so VM events may
  // interleave; only the recorded ones are this test's business.
  std::vector<Event> events;
  for (const Event& e : h.engine->events_since(before, 0ms))
    if (e.type == "forward.opened") events.push_back(e);
  REQUIRE(events.size() == 1);
  CHECK(events[0].lease_id == l.id);
  CHECK(events[0].owner == l.owner);
  CHECK(events[0].pool == l.pool);
  CHECK(events[0].detail == "10.0.0.1:22000 -> 10.77.0.10:22");
  CHECK(events[0].seq > before);
}

TEST_CASE("requests are validated with the field named", "[engine]") {
  Harness h({ci_pool(0, 2)});
  h.start();
  LeaseRequest req;
  req.owner = "a";
  req.pool = "nope";
  CHECK(h.engine->create_lease(req).status().code() == ErrorCode::kNotFound);
  req.pool = "ci";
  req.ttl = -5s;
  CHECK(h.engine->create_lease(req).status().field() == "ttl");
  req.ttl = 5 * 3600s;  // beyond the pool's max_ttl
  CHECK(h.engine->create_lease(req).status().code() == ErrorCode::kUnprocessable);
  req.ttl = 60s;
  req.ssh_keys = {kTestKey, "ssh-rsa not-base64!"};
  auto bad_key = h.engine->create_lease(req);
  CHECK(bad_key.status().code() == ErrorCode::kInvalidArgument);
  CHECK(bad_key.status().field() == "ssh_keys[1]");
  CHECK(h.store->list({})->empty());  // nothing was recorded for refused requests
}

TEST_CASE("a VM larger than the host is refused as unprocessable", "[engine]") {
  Harness h({ci_pool(0, 1, 64)});
  CHECK(h.engine->start().code() == ErrorCode::kUnprocessable);
}

TEST_CASE("an idempotency key returns the same lease to a retrying client", "[engine]") {
  Harness h({ci_pool(1, 3)});
  h.start();
  REQUIRE(h.settle(1));
  LeaseRequest req;
  req.idempotency_key = "pipeline-42-job-7";
  Lease a = h.lease(req);
  Lease b = h.lease(req);
  CHECK(a.id == b.id);
  req.owner = "someone-else";
  Lease c = h.lease(req);
  CHECK(c.id != a.id);
}

TEST_CASE("restart re-adopts live VMs, destroys orphans and fails leases whose VM vanished",
          "[engine]") {
  auto dir = std::filesystem::temp_directory_path() / "armhive-engine-restart";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string db = (dir / "armhive.db").string();
  auto hv = std::make_shared<FakeHypervisor>();
  std::string kept, lost_vm, lost_lease, kept_lease;
  {
    Harness h({ci_pool(1, 4)}, db, hv);
    h.start();
    REQUIRE(h.settle(1));
    Lease a = h.lease();
    Lease b = h.wait_ready(h.lease().id);
    REQUIRE(b.state == LeaseState::kReady);
    REQUIRE(h.settle(1));
    kept = a.vm_name;
    kept_lease = a.id;
    lost_vm = b.vm_name;
    lost_lease = b.id;
    h.engine->stop();  // like kill -9: VMs keep running, nothing is cleaned up
  }
  // While the daemon is down: one VM vanishes, an orphan appears, stray files appear, and the
  // kept VM is re-pinned (to CPUs 14-15) so that the database no longer says where it runs.
  REQUIRE(hv->destroy_vm(lost_vm).is_ok());
  hv->repin(kept, {14, 15});
  hv->add_orphan("armhive-vm-0rphan00");
  hv->add_stray_files("armhive-vm-5tray000");
  Harness h2({ci_pool(1, 4)}, db, hv);
  h2.start();
  REQUIRE(h2.settle(1));
  // Start-up recovery saw the orphan and the stray files once; a domain or files nobody wants
  // go only when a second pass still finds them unwanted.
  CHECK(hv->domains().count("armhive-vm-0rphan00"));
  REQUIRE(h2.engine->reconcile().is_ok());
  CHECK(h2.engine->get_lease(kept_lease)->state == LeaseState::kReady);
  CHECK(h2.engine->get_lease(lost_lease)->state == LeaseState::kFailed);
  auto domains = hv->domains();
  CHECK(domains.count(kept));
  CHECK_FALSE(domains.count("armhive-vm-0rphan00"));
  CHECK_FALSE(hv->files().count("armhive-vm-5tray000"));
  // Cores were re-derived: the kept VM and the warm one hold 4, and no two VMs share one.
  CHECK(h2.cores_held() == 4);
  // The disagreement was reported, and the lease now records where its VM really runs.
  CHECK(h2.engine->get_lease(kept_lease)->cpus == std::vector<int>{14, 15});
  bool reported = false;
  for (const Event& e : h2.engine->events_since(0, 0ms)) {
    reported = reported || (e.type == "vm.pins_mismatch" && e.vm_name == kept);
  }
  CHECK(reported);
  // The re-adopted lease can still be released normally.
  REQUIRE(h2.engine->release_lease(kept_lease).is_ok());
  REQUIRE(h2.settle(1));
  CHECK_FALSE(hv->domains().count(kept));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace armhive

namespace armhive {
namespace {

std::vector<std::pair<int, std::string>> queue_of(LeaseEngine& engine,
                                                  const std::vector<std::string>& ids) {
  std::vector<std::pair<int, std::string>> out;
  for (const auto& id : ids) {
    auto l = engine.get_lease(id);
    REQUIRE(l.is_ok());
    if (l->queue) {
      out.emplace_back(l->queue->position, std::string(to_string(l->queue->reason)));
    } else {
      out.emplace_back(0, std::string(to_string(l->state)));
    }
  }
  return out;
}

TEST_CASE("a burst of leases shows each waiting lease's queue position and reason",
          "[engine][queue]") {
  PoolConfig pool = ci_pool(0, 3);
  pool.max_starting = 1;
  Harness h({pool});
  h.hypervisor->pings_until_ready = 1 << 30;  // boots do not finish until the test says so
  h.start();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(h.lease().id);

  using Q = std::vector<std::pair<int, std::string>>;
  // The first boots its VM; the next two fit under max but wait for max_starting; the last two
  // need a release of one of the three VMs first.
  CHECK(queue_of(*h.engine, ids) == Q{{0, "provisioning"},
                                      {1, "at_max_starting"},
                                      {2, "at_max_starting"},
                                      {3, "at_pool_max"},
                                      {4, "at_pool_max"}});
  // The listing says the same.
  LeaseFilter all;
  auto listed = h.engine->list_leases(all);
  REQUIRE(listed.is_ok());
  int queued = 0;
  for (const Lease& l : *listed) {
    if (l.id == ids[4]) {
      REQUIRE(l.queue.has_value());
      CHECK(l.queue->position == 4);
      CHECK(l.queue->reason == QueueReason::kAtPoolMax);
    }
    queued += l.queue ? 1 : 0;
  }
  CHECK(queued == 4);

  // Boots finish: three leases run, the other two wait for a release, now at the head.
  h.hypervisor->pings_until_ready = 1;
  for (int i = 0; i < 3; ++i) CHECK(h.wait_ready(ids[i]).state == LeaseState::kReady);
  h.engine->wait_idle(5s);
  CHECK(queue_of(*h.engine, ids) ==
        Q{{0, "ready"}, {0, "ready"}, {0, "ready"}, {1, "at_pool_max"}, {2, "at_pool_max"}});
  Lease ready = h.wait_ready(ids[0]);
  CHECK_FALSE(ready.queue.has_value());

  // A release lets the head boot; the last moves up to position 1.
  REQUIRE(h.engine->release_lease(ids[0]).is_ok());
  CHECK(h.wait_ready(ids[3]).state == LeaseState::kReady);
  h.engine->wait_idle(5s);
  auto last = h.engine->get_lease(ids[4]);
  REQUIRE(last.is_ok());
  REQUIRE(last->queue.has_value());
  CHECK(last->queue->position == 1);
  CHECK(last->queue->reason == QueueReason::kAtPoolMax);
}

TEST_CASE("a waiting lease released from the middle of the queue moves the ones behind it up",
          "[engine][queue]") {
  Harness h({ci_pool(0, 1)});
  h.hypervisor->pings_until_ready = 1 << 30;
  h.start();
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(h.lease().id);
  using Q = std::vector<std::pair<int, std::string>>;
  CHECK(queue_of(*h.engine, ids) ==
        Q{{0, "provisioning"}, {1, "at_pool_max"}, {2, "at_pool_max"}, {3, "at_pool_max"}});

  REQUIRE(h.engine->release_lease(ids[2]).is_ok());
  CHECK(queue_of(*h.engine, {ids[0], ids[1], ids[3]}) ==
        Q{{0, "provisioning"}, {1, "at_pool_max"}, {2, "at_pool_max"}});
  // The listing counts the same leases ahead.
  auto listed = h.engine->list_leases(LeaseFilter{});
  REQUIRE(listed.is_ok());
  for (const Lease& l : *listed) {
    if (l.id == ids[3]) {
      REQUIRE(l.queue.has_value());
      CHECK(l.queue->position == 2);
    }
    if (l.id == ids[2]) CHECK_FALSE(l.queue.has_value());
  }
}

TEST_CASE("the queue shows what the engine does: a refill serves the head, the next boots",
          "[engine][queue]") {
  PoolConfig pool = ci_pool(1, 3);
  pool.max_starting = 2;
  Harness h({pool});
  h.hypervisor->pings_until_ready = 1 << 30;  // boots do not finish until the test says so
  h.start();                                  // the refill to min_warm 1 starts booting
  Lease head = h.lease();
  Lease next = h.lease();
  // The head waits for the refill rather than boot a second VM; the lease behind it boots its
  // own (room under max and max_starting), and the queue says exactly that.
  using Q = std::vector<std::pair<int, std::string>>;
  CHECK(queue_of(*h.engine, {head.id, next.id}) == Q{{1, "warm_vm_booting"}, {0, "provisioning"}});
  CHECK(h.engine->get_lease(head.id)->reason == "waiting for a warm VM that is booting");
  REQUIRE(h.engine->pools().size() == 1);
  CHECK(h.engine->pools()[0].starting == 2);  // the refill and the next lease's VM

  h.hypervisor->pings_until_ready = 1;
  Lease served = h.wait_ready(head.id);
  CHECK(served.state == LeaseState::kReady);
  CHECK(served.warm_handout);
  CHECK(h.wait_ready(next.id).state == LeaseState::kReady);
}

}  // namespace
}  // namespace armhive
