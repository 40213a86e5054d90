#include "tests/support/engine_harness.h"

#include <catch2/catch.hpp>
#include <thread>

#include "tests/support/topologies.h"

namespace armhive {

using namespace std::chrono_literals;

const std::string kTestKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk2b2hDb3JlS2V5Rm9yVGVzdHNPbmx5MTIzNDU2Nzg5 ci@test";

PoolConfig ci_pool(int min_warm, int max, int vcpus) {
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

Harness::Harness(std::vector<PoolConfig> pools, std::string db_path,
                 std::shared_ptr<FakeHypervisor> hv, std::chrono::milliseconds retry_backoff)
    : hypervisor(hv ? hv : std::make_shared<FakeHypervisor>()) {
  faulty_hypervisor = std::make_unique<FaultyHypervisor>(*hypervisor, faults);
  db = std::move(Database::open(db_path).value());
  store = std::move(SqliteLeaseStore::open(*db).value());
  faulty_store = std::make_unique<FaultyStore>(*store, faults);
  options.pools = std::move(pools);
  options.agent_poll = 1ms;
  options.reaper_period = 3600s;  // tests call expire_due_leases() themselves
  options.reconcile_period = 3600s;
  options.host_probe_period = 0ms;  // tests call probe_hosts() themselves
  options.usage_period = 0ms;       // tests call sample_usage() themselves
  options.schedule_period = 20ms;
  options.retry_backoff = retry_backoff;
  options.max_retry_backoff = retry_backoff * 8;
  options.boot_timeout = 30s;
  options.threads = 2;
  make_engine();
}

Harness::~Harness() {
  if (engine) engine->stop();
}

void Harness::make_engine() {
  if (engine) engine->stop();
  engine.reset();
  auto allocator = CoreAllocator::create(lx2160a_topology(), default_cpu_sets(lx2160a_topology()));
  engine = std::make_unique<LeaseEngine>(
      options, *faulty_hypervisor, *faulty_store, std::move(allocator).value(),
      [this](const std::string& name) -> Result<BootImage> {
        if (on_resolve) on_resolve();
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

void Harness::start() { REQUIRE(engine->start().is_ok()); }

Lease Harness::lease(LeaseRequest req) {
  if (req.pool.empty()) req.pool = "ci";
  if (req.owner.empty()) req.owner = "ci-token";
  if (req.ssh_keys.empty()) req.ssh_keys = {kTestKey};
  auto r = engine->create_lease(req);
  REQUIRE(r.is_ok());
  return *r;
}

Lease Harness::wait_ready(const std::string& id) {
  auto r = engine->wait_lease(id, 10s);
  REQUIRE(r.is_ok());
  return *r;
}

bool settle_pool(LeaseEngine& engine, int warm) {
  for (int i = 0; i < 2000; ++i) {
    engine.wait_idle(1s);
    auto pools = engine.pools();
    if (!pools.empty() && pools[0].warm == warm && pools[0].starting == 0) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

bool Harness::settle(int warm) { return settle_pool(*engine, warm); }

int Harness::cores_held() {
  int n = 0;
  std::vector<HostView> hosts = engine->hosts();  // keep the views alive while iterating
  for (const CoreUse& c : hosts[0].cores) n += c.vm_name.empty() ? 0 : 1;
  return n;
}

}  // namespace armhive
