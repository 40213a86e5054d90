#include "daemon/engine/lease_engine.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>

#include "daemon/store/sqlite_lease_store.h"
#include "tests/support/fake_hypervisor.h"
#include "tests/support/manual_clock.h"
#include "tests/support/topologies.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

const std::string kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk2b2hDb3JlS2V5Rm9yVGVzdHNPbmx5MTIzNDU2Nzg5 ci@test";

PoolConfig ci_pool(int min_warm, int max, int vcpus = 2) {
  PoolConfig p;
  p.name = "ci";
  p.image = "tiny";
  p.vcpus = vcpus;
  p.memory_mib = 256;
  p.min_warm = min_warm;
  p.max = max;
  p.max_starting = 2;
  p.default_ttl = 3600s;
  p.max_ttl = 4 * 3600s;
  return p;
}

// One engine over a fake hypervisor, an in-memory (or file) database and a manual clock.
struct Harness {
  explicit Harness(std::vector<PoolConfig> pools,
                   std::string db_path = ":memory:", std::shared_ptr<FakeHypervisor> hv = nullptr,
                   std::chrono::milliseconds retry_backoff = 5ms)
      : hypervisor(hv ? hv : std::make_shared<FakeHypervisor>()) {
    db = std::move(Database::open(db_path).value());
    store = std::move(SqliteLeaseStore::open(*db).value());
    EngineOptions options;
    options.pools = std::move(pools);
    options.agent_poll = 1ms;
    options.reaper_period = 3600s;  // tests call expire_due_leases() themselves
    options.reconcile_period = 3600s;
    options.schedule_period = 20ms;
    options.retry_backoff = retry_backoff;
    options.max_retry_backoff = retry_backoff * 8;
    options.boot_timeout = 30s;
    options.threads = 2;
    auto allocator =
        CoreAllocator::create(lx2160a_topology(), default_cpu_sets(lx2160a_topology()));
    engine = std::make_unique<LeaseEngine>(
        options, *hypervisor, *store, std::move(allocator).value(),
        [this](const std::string& name) -> Result<BootImage> {
          if (image_missing) return not_found("no image named '" + name + "'", name);
          return BootImage{name,
                           "1",
                           "/images/tiny/disk.qcow2",
                           "/images/tiny/vmlinuz",
                           "/images/tiny/initrd",
                           "console=ttyAMA0",
                           "root"};
        },
        clock, &metrics);
  }
  ~Harness() { engine->stop(); }

  void start() { REQUIRE(engine->start().is_ok()); }

  Lease lease(LeaseRequest req = {}) {
    if (req.pool.empty()) req.pool = "ci";
    if (req.owner.empty()) req.owner = "ci-token";
    if (req.ssh_keys.empty()) req.ssh_keys = {kKey};
    auto r = engine->create_lease(req);
    REQUIRE(r.is_ok());
    return *r;
  }

  Lease wait_ready(const std::string& id) {
    auto r = engine->wait_lease(id, 10s);
    REQUIRE(r.is_ok());
    return *r;
  }

  // Waits until the pool has `warm` warm VMs and nothing is booting.
  bool settle(int warm) {
    for (int i = 0; i < 2000; ++i) {
      engine->wait_idle(1s);
      auto pools = engine->pools();
      if (!pools.empty() && pools[0].warm == warm && pools[0].starting == 0) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }

  int cores_held() {
    int n = 0;
    std::vector<HostView> hosts = engine->hosts();  // keep the views alive while iterating
    for (const CoreUse& c : hosts[0].cores) n += c.vm_name.empty() ? 0 : 1;
    return n;
  }

  ManualClock clock;
  Metrics metrics;
  std::shared_ptr<FakeHypervisor> hypervisor;
  std::unique_ptr<Database> db;
  std::unique_ptr<SqliteLeaseStore> store;
  std::unique_ptr<LeaseEngine> engine;
  std::atomic<bool> image_missing{false};
};

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
  CHECK(domains[l.vm_name].keys == std::vector<std::string>{kKey});
  CHECK(domains[l.vm_name].lease_id == l.id);
  // The pool refills behind it.
  REQUIRE(h.settle(2));
  CHECK(h.hypervisor->domains().size() == 3);
  CHECK(h.metrics.count("armhive_handout_seconds", {{"pool", "ci"}, {"path", "warm"}}) == 1);
}

TEST_CASE("a lease on an empty pool boots a VM cold and becomes ready", "[engine]") {
  Harness h({ci_pool(0, 2)});
  h.start();
  Lease l = h.lease();
  CHECK((l.state == LeaseState::kProvisioning || l.state == LeaseState::kReady));
  l = h.wait_ready(l.id);
  CHECK(l.state == LeaseState::kReady);
  CHECK_FALSE(l.warm_handout);
  CHECK(h.hypervisor->domains().at(l.vm_name).spec.cmdline.find("armhive.hostname=" + l.vm_name) !=
        std::string::npos);
  // History records every step with a reason.
  std::vector<LeaseState> states;
  for (const auto& t : l.history) states.push_back(t.to);
  CHECK(states == std::vector<LeaseState>{LeaseState::kPending, LeaseState::kProvisioning,
                                          LeaseState::kReady});
  // The cold path is timed phase by phase, once each.
  for (const char* phase : {"create", "boot", "readiness"}) {
    CHECK(h.metrics.count("armhive_boot_phase_seconds", {{"pool", "ci"}, {"phase", phase}}) == 1);
  }
  CHECK(h.metrics.count("armhive_handout_seconds", {{"pool", "ci"}, {"path", "cold"}}) == 1);
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
  std::this_thread::sleep_for(300ms);  // a loop would make hundreds of attempts meanwhile
  CHECK(h.hypervisor->creates() == 1);
  // A lease waits and says why instead of failing on a known-broken pool.
  Lease l = h.lease();
  CHECK(l.state == LeaseState::kPending);
  CHECK(h.engine->get_lease(l.id)->reason.find("backing off after 1 failed boot") !=
        std::string::npos);
  CHECK(h.hypervisor->creates() == 1);
  CHECK(h.engine->release_lease(l.id)->state == LeaseState::kReleased);
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
  req.ssh_keys = {kKey, "ssh-rsa not-base64!"};
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
