// The admin's drain of the engine's host (issue 13 item 4): no new VMs, free warm VMs
// destroyed, leases run to their end, undrain refills; the state survives a restart.
#include <catch2/catch.hpp>
#include <thread>

#include "daemon/engine/lease_engine.h"
#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;
using Admin = HostHealthTracker::Admin;

int count_events(LeaseEngine& engine, const std::string& type) {
  int n = 0;
  for (const Event& e : engine.events_since(0, 0ms)) n += e.type == type ? 1 : 0;
  return n;
}

TEST_CASE("drain: warm VMs go, a lease stays ready, new leases wait, undrain refills",
          "[engine][drain]") {
  Harness h({ci_pool(2, 4)});
  h.start();
  REQUIRE(h.settle(2));
  Lease a = h.lease();
  REQUIRE(a.state == LeaseState::kReady);
  REQUIRE(h.settle(2));
  REQUIRE(h.hypervisor->domains().size() == 3);

  Status unknown = h.engine->set_host_admin("tx1", Admin::kDrain);
  CHECK(unknown.code() == ErrorCode::kNotFound);
  CHECK(unknown.field() == "name");

  REQUIRE(h.engine->set_host_admin("localhost", Admin::kDrain).is_ok());
  CHECK(h.engine->hosts()[0].admin == Admin::kDrain);
  CHECK(count_events(*h.engine, "host.draining") == 1);
  // Free warm VMs are destroyed; the leased one runs on.
  REQUIRE(h.settle(0));
  auto domains = h.hypervisor->domains();
  CHECK(domains.size() == 1);
  CHECK(domains.count(a.vm_name) == 1);
  CHECK(h.engine->get_lease(a.id)->state == LeaseState::kReady);
  // Draining again changes nothing and says nothing.
  REQUIRE(h.engine->set_host_admin("localhost", Admin::kDrain).is_ok());
  CHECK(count_events(*h.engine, "host.draining") == 1);

  // A new lease waits, saying why; scheduling passes boot nothing for it.
  Lease b = h.lease();
  CHECK(b.state == LeaseState::kPending);
  REQUIRE(b.queue.has_value());
  CHECK(b.queue->reason == QueueReason::kHostDraining);
  h.engine->schedule();
  h.engine->wait_idle(5s);
  Lease b2 = h.engine->get_lease(b.id).value();
  CHECK(b2.state == LeaseState::kPending);
  CHECK_THAT(b2.reason, Catch::Contains("host 'localhost' is draining"));
  CHECK(h.hypervisor->domains().size() == 1);

  // The lease ends: the host is empty.
  REQUIRE(h.engine->release_lease(a.id).is_ok());
  h.engine->wait_idle(5s);
  CHECK(h.hypervisor->domains().empty());
  CHECK(h.cores_held() == 0);

  // Undrained: the waiting lease gets its VM and the pool refills.
  REQUIRE(h.engine->set_host_admin("localhost", Admin::kNone).is_ok());
  CHECK(count_events(*h.engine, "host.undrained") == 1);
  CHECK(h.engine->hosts()[0].admin == Admin::kNone);
  CHECK(h.wait_ready(b.id).state == LeaseState::kReady);
  REQUIRE(h.settle(2));
}

TEST_CASE("drain: maintenance holds leases too, saying so", "[engine][drain]") {
  Harness h({ci_pool(1, 4)});
  h.start();
  REQUIRE(h.settle(1));
  REQUIRE(h.engine->set_host_admin("localhost", Admin::kMaintenance).is_ok());
  CHECK(count_events(*h.engine, "host.maintenance") == 1);
  REQUIRE(h.settle(0));
  Lease l = h.lease();
  CHECK(l.state == LeaseState::kPending);
  CHECK_THAT(l.reason, Catch::Contains("in maintenance"));
  CHECK(h.engine->hosts()[0].admin == Admin::kMaintenance);
}

TEST_CASE("drain: a restart keeps a drained host drained", "[engine][drain][recovery]") {
  Harness h({ci_pool(2, 4)});
  h.start();
  REQUIRE(h.settle(2));
  REQUIRE(h.engine->set_host_admin("localhost", Admin::kDrain).is_ok());
  REQUIRE(h.settle(0));
  REQUIRE(h.hypervisor->domains().empty());

  h.make_engine();  // a restart over the same database
  h.start();
  CHECK(h.engine->hosts()[0].admin == Admin::kDrain);
  h.engine->schedule();
  h.engine->wait_idle(5s);
  CHECK(h.hypervisor->domains().empty());  // no refill
  Lease l = h.lease();
  CHECK(l.state == LeaseState::kPending);
  REQUIRE(l.queue.has_value());
  CHECK(l.queue->reason == QueueReason::kHostDraining);

  // Undrained after the restart: saved too, so the next restart refills.
  REQUIRE(h.engine->set_host_admin("localhost", Admin::kNone).is_ok());
  CHECK(h.wait_ready(l.id).state == LeaseState::kReady);
  h.make_engine();
  h.start();
  CHECK(h.engine->hosts()[0].admin == Admin::kNone);
  REQUIRE(h.settle(2));
}

TEST_CASE("drain: a drain the database refuses changes nothing", "[engine][drain][faults]") {
  Harness h({ci_pool(2, 4)});
  h.start();
  REQUIRE(h.settle(2));
  h.faults.fail_method("store.put_host_admin", FaultKind::kPermanent);
  Status s = h.engine->set_host_admin("localhost", Admin::kDrain);
  CHECK_FALSE(s.is_ok());
  CHECK_THAT(s.to_string(), Catch::Contains("host localhost unchanged"));
  CHECK(h.engine->hosts()[0].admin == Admin::kNone);
  CHECK(count_events(*h.engine, "host.draining") == 0);
  CHECK(h.lease().state == LeaseState::kReady);  // still hands out
  // A start that cannot read the drain states refuses to run (it would refill a drained host).
  h.faults.clear_method("store.put_host_admin");
  h.faults.fail_method("store.host_admin", FaultKind::kPermanent);
  h.make_engine();
  Status started = h.engine->start();
  CHECK_FALSE(started.is_ok());
  CHECK_THAT(started.to_string(), Catch::Contains("drain states"));
}

}  // namespace
}  // namespace armhive
