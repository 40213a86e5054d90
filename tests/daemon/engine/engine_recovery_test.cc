// The engine's failure handling, one fault at a time: each test fails if the recovery code it
// names is removed.
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <thread>

#include "daemon/engine/lease_engine.h"
#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

// The database's failures carry no host; libvirt calls' carry the host they went to.
double errors(Harness& h, const std::string& op, const std::string& code) {
  if (op.rfind("store.", 0) == 0) {
    return h.metrics.value("armhive_engine_errors_total", {{"op", op}, {"code", code}});
  }
  return h.metrics.value("armhive_engine_errors_total",
                         {{"op", op}, {"code", code}, {"host", "localhost"}});
}

TEST_CASE("start() refuses to run when the database cannot be read, and touches no VM",
          "[engine][recovery]") {
  Harness h({ci_pool(1, 3)});
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  REQUIRE(l.state == LeaseState::kReady);
  REQUIRE(h.settle(1));
  auto domains = h.hypervisor->domains();
  auto files = h.hypervisor->files();

  h.make_engine();  // a restart
  h.faults.fail_method("store.vms", FaultKind::kPermanent);
  Status started = h.engine->start();
  CHECK(started.code() == ErrorCode::kInternal);
  CHECK_THAT(started.message(), Catch::Contains("cannot read the VM records"));
  CHECK(h.engine->create_lease({.pool = "ci", .owner = "x"}).status().code() ==
        ErrorCode::kUnavailable);
  CHECK(errors(h, "store.vms", "internal") == 1);
  CHECK(h.engine->hosts()[0].state == HostState::kDegraded);
  h.engine->stop();
  CHECK(h.hypervisor->domains().size() == domains.size());
  CHECK(h.hypervisor->files() == files);

  SECTION("a row the store cannot understand is such a failure too") {
    h.faults.clear_method("store.vms");
    REQUIRE(h.db->execute("UPDATE vms SET state = 'hibernating'").is_ok());
    h.make_engine();
    Status bad = h.engine->start();
    CHECK(bad.code() == ErrorCode::kInternal);
    CHECK_THAT(bad.message(), Catch::Contains("state 'hibernating' is unknown"));
    h.engine->stop();
    CHECK(h.hypervisor->domains().size() == domains.size());
  }
  SECTION("once the database is readable again, the VMs are adopted") {
    h.faults.clear_method("store.vms");
    h.make_engine();
    h.start();
    REQUIRE(h.settle(1));
    CHECK(h.engine->get_lease(l.id)->state == LeaseState::kReady);
    CHECK(h.hypervisor->domains().size() == domains.size());
  }
}

TEST_CASE("libvirt failing to list during recovery fails no lease and destroys nothing",
          "[engine][recovery]") {
  Harness h({ci_pool(1, 3)});
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  REQUIRE(l.state == LeaseState::kReady);
  REQUIRE(h.settle(1));
  h.hypervisor->add_stray_files("armhive-vm-5tray000");
  auto domains = h.hypervisor->domains();

  h.make_engine();
  h.faults.fail_method("list_vms", FaultKind::kTransient);
  h.start();
  h.engine->wait_idle(5s);
  CHECK(h.engine->get_lease(l.id)->state == LeaseState::kReady);
  CHECK(h.hypervisor->domains().size() == domains.size());
  CHECK(h.hypervisor->creates() == 2);  // no VM started on cores it cannot see
  HostView host = h.engine->hosts()[0];
  CHECK(host.state == HostState::kDegraded);
  CHECK_THAT(host.last_error, Catch::Contains("hypervisor.list_vms"));
  CHECK(errors(h, "hypervisor.list_vms", "unavailable") >= 1);
  // Periodic passes while libvirt still fails change nothing either.
  CHECK_FALSE(h.engine->reconcile().is_ok());
  CHECK_FALSE(h.engine->reconcile().is_ok());
  CHECK(h.engine->get_lease(l.id)->state == LeaseState::kReady);
  CHECK(h.hypervisor->domains().size() == domains.size());
  CHECK(h.hypervisor->files().count("armhive-vm-5tray000"));

  // libvirt answers again: the next pass adopts everything, and the host is ok.
  h.faults.clear_method("list_vms");
  REQUIRE(h.engine->reconcile().is_ok());
  REQUIRE(h.settle(1));
  CHECK(h.engine->hosts()[0].state == HostState::kOk);
  CHECK(h.cores_held() == 4);
  CHECK(h.hypervisor->domains().size() == domains.size());
  REQUIRE(h.engine->release_lease(l.id).is_ok());
  REQUIRE(h.settle(1));
  CHECK_FALSE(h.hypervisor->domains().count(l.vm_name));
}

TEST_CASE("a destroy that fails is retried by reconcile after its backoff, leaking nothing",
          "[engine][recovery]") {
  Harness h({ci_pool(0, 2)});
  h.start();
  Lease l = h.wait_ready(h.lease().id);
  REQUIRE(l.state == LeaseState::kReady);
  h.faults.fail_method("destroy_vm", FaultKind::kTransient);
  REQUIRE(h.engine->release_lease(l.id).is_ok());
  REQUIRE(h.engine->wait_idle(5s));
  CHECK(h.hypervisor->domains().count(l.vm_name));
  CHECK(h.engine->get_lease(l.id)->state == LeaseState::kReleasing);
  CHECK(errors(h, "hypervisor.destroy_vm", "unavailable") == 1);
  CHECK(h.engine->hosts()[0].state == HostState::kDegraded);

  h.faults.clear_method("destroy_vm");
  REQUIRE(h.engine->reconcile().is_ok());  // backoff not over on the engine's clock
  REQUIRE(h.engine->wait_idle(5s));
  CHECK(h.hypervisor->domains().count(l.vm_name));
  h.clock.advance(1s);
  REQUIRE(h.engine->reconcile().is_ok());
  REQUIRE(h.engine->wait_idle(5s));
  CHECK_FALSE(h.hypervisor->domains().count(l.vm_name));
  CHECK_FALSE(h.hypervisor->files().count(l.vm_name));
  CHECK(h.engine->get_lease(l.id)->state == LeaseState::kReleased);
  CHECK(h.cores_held() == 0);
  CHECK(h.store->vms()->empty());
  REQUIRE(h.engine->reconcile().is_ok());
  CHECK(h.engine->hosts()[0].state == HostState::kOk);
}

TEST_CASE("failed writes are counted, shown and retried until the database has them",
          "[engine][recovery]") {
  Harness h({ci_pool(1, 2)});
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  REQUIRE(l.state == LeaseState::kReady);
  // Writes are queued: let the hand-out's reach the database before the store starts failing.
  for (int i = 0; i < 2000 && h.store->find(l.id).value()->state != LeaseState::kReady; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(h.store->find(l.id).value()->state == LeaseState::kReady);
  h.faults.fail_method("store.update", FaultKind::kTransient);
  REQUIRE(h.engine->release_lease(l.id).is_ok());
  REQUIRE(h.settle(1));
  // The engine knows the lease ended; the database does not yet.
  CHECK(h.engine->get_lease(l.id)->state == LeaseState::kReleased);
  CHECK(h.store->find(l.id).value()->state == LeaseState::kReady);
  CHECK(errors(h, "store.update", "unavailable") >= 1);
  CHECK_THAT(h.engine->hosts()[0].last_error, Catch::Contains("store.update"));
  // Renewing reports that its write did not land (and keeps it queued).
  Lease other = h.lease();
  auto renewed = h.engine->renew_lease(other.id, 60s);
  CHECK(renewed.status().code() == ErrorCode::kUnavailable);
  CHECK_THAT(renewed.status().message(), Catch::Contains("not yet saved"));

  h.faults.clear_method("store.update");
  h.clock.advance(1min);  // past the write backoff
  h.engine->schedule();
  CHECK(h.store->find(l.id).value()->state == LeaseState::kReleased);
  CHECK(h.store->find(other.id).value()->ttl == 60s);
  REQUIRE(h.engine->reconcile().is_ok());
  CHECK(h.engine->hosts()[0].state == HostState::kOk);
}

TEST_CASE("a failed boot's reason keeps the failing call's code and context",
          "[engine][recovery]") {
  Harness h({ci_pool(0, 2)});
  h.hypervisor->fail_create = true;
  h.start();
  Lease l = h.lease();
  Lease ended = h.wait_ready(l.id);
  for (int i = 0; i < 100 && ended.state != LeaseState::kFailed; ++i) {
    h.engine->wait_idle(1s);
    ended = *h.engine->get_lease(l.id);
  }
  REQUIRE(ended.state == LeaseState::kFailed);
  CHECK_THAT(ended.reason, Catch::Contains("internal: injected create failure [armhive-vm-"));
}

// Runs `probe` on another thread and says whether it finished within a second: a call that
// needs the engine lock does not while the caller holds it.
bool lock_free(std::function<void()> probe) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> f = done->get_future();
  std::thread([probe, done] {
    probe();
    done->set_value();
  }).detach();
  return f.wait_for(1s) == std::future_status::ready;
}

TEST_CASE("the engine lock is not held across SQLite or image resolution", "[engine][recovery]") {
  Harness h({ci_pool(1, 3)});
  std::atomic<int> calls{0}, held{0};
  auto check = [&] {
    ++calls;
    if (!lock_free([&h] { (void)h.engine->pools(); })) ++held;
  };
  h.on_resolve = check;
  h.faulty_store->on_call = [&](std::string_view) { check(); };
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  REQUIRE(h.engine->renew_lease(l.id, 60s).is_ok());
  REQUIRE(h.engine->release_lease(l.id).is_ok());
  REQUIRE(h.settle(1));
  REQUIRE(h.engine->reconcile().is_ok());
  // Stopped first: the engine's timers call the hooks on its own threads until then (clearing a
  // hook while one ran was a data race under TSan), and the hooks refer to this scope's locals.
  h.engine->stop();
  h.on_resolve = nullptr;
  h.faulty_store->on_call = nullptr;
  CHECK(calls > 10);
  CHECK(held == 0);
}

}  // namespace
}  // namespace armhive
