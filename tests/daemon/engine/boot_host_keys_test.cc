// Issue 28: a VM is ready (warm, or its cold lease ready) only once its SSH host keys have been
// read through the guest agent, and every ready lease carries them.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <thread>

#include "daemon/engine/lease_engine.h"
#include "tests/support/engine_harness.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

// The one VM of the pool (empty while there is none).
std::string only_vm(Harness& h) {
  auto domains = h.hypervisor->domains();
  return domains.size() == 1 ? domains.begin()->first : std::string();
}

// Waits (real time, bounded) until `vm` has had its host keys asked for `n` times.
bool reads_reach(Harness& h, const std::string& vm, int n) {
  for (int i = 0; i < 5000; ++i) {
    if (h.hypervisor->host_key_reads(vm) >= n) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// The detail of the first event of `type` about `vm`, or "" when there is none.
std::string event_detail(Harness& h, const std::string& type, const std::string& vm) {
  for (const Event& e : h.engine->events_since(0, 0ms)) {
    if (e.type == type && e.vm_name == vm) return e.detail;
  }
  return {};
}

TEST_CASE("a VM is not warm until its host keys are read, the warm hand-out carries them",
          "[engine][host_keys]") {
  Harness h({ci_pool(1, 2)});
  h.hypervisor->host_key_reads_until_ready = 0;  // sshd not up yet
  h.start();
  std::string vm;
  for (int i = 0; i < 5000 && vm.empty(); ++i) {
    vm = only_vm(h);
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE_FALSE(vm.empty());
  // The agent answers and the address is known, but the keys are not: still booting.
  REQUIRE(reads_reach(h, vm, 3));
  auto pools = h.engine->pools();
  CHECK(pools[0].warm == 0);
  CHECK(pools[0].starting == 1);

  h.hypervisor->host_key_reads_until_ready = 1;  // sshd is up: the next read has them
  REQUIRE(h.settle(1));
  const std::vector<std::string> keys{FakeHypervisor::host_key_of(vm)};
  auto records = h.store->vms();
  REQUIRE(records.is_ok());
  REQUIRE(records->size() == 1);
  CHECK(records->front().host_keys == keys);  // kept with the VM (a restart keeps them)
  CHECK(h.metrics.count("armhive_boot_phase_seconds",
                        {{"pool", "ci"}, {"host", "localhost"}, {"phase", "host_keys"}}) == 1);

  const int reads = h.hypervisor->host_key_reads(vm);
  Lease l = h.lease();
  CHECK(l.state == LeaseState::kReady);
  CHECK(l.warm_handout);
  CHECK(l.vm_name == vm);
  CHECK(l.host_keys == keys);                        // in the very response that hands it out
  CHECK(h.hypervisor->host_key_reads(vm) == reads);  // read at boot, not again
  // The lease row is written behind the hand-out (the engine's persist queue).
  CHECK(eventually(*h.engine, [&] {
    auto stored = h.store->find(l.id);
    return stored.is_ok() && stored->has_value() && (*stored)->host_keys == keys;
  }));
}

TEST_CASE("a cold lease is ready only with its VM's host keys", "[engine][host_keys]") {
  Harness h({ci_pool(0, 2)});
  h.hypervisor->host_key_reads_until_ready = 5;
  h.start();
  Lease l = h.lease();
  l = h.wait_ready(l.id);
  REQUIRE(l.state == LeaseState::kReady);
  CHECK(l.host_keys == std::vector<std::string>{FakeHypervisor::host_key_of(l.vm_name)});
  CHECK(h.hypervisor->host_key_reads(l.vm_name) == 5);
}

TEST_CASE("a VM whose host keys never come is failed at the boot deadline and retried",
          "[engine][host_keys]") {
  Harness h({ci_pool(1, 1)});
  // A guest that prints a key line that is not one: never taken, never ready.
  h.hypervisor->host_keys_output = [](const std::string&) {
    return std::string("ssh-ed25519 AAAA;not-base64 root@evil\n");
  };
  h.start();
  std::string first;
  for (int i = 0; i < 5000 && first.empty(); ++i) {
    first = only_vm(h);
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE_FALSE(first.empty());
  REQUIRE(reads_reach(h, first, 2));
  CHECK(h.engine->pools()[0].warm == 0);

  // The boot deadline passes on the engine's clock: failed like a VM whose agent never came up.
  h.clock.advance(h.options.boot_timeout + 1s);
  std::string failed;
  for (int i = 0; i < 5000 && failed.empty(); ++i) {
    failed = event_detail(h, "vm.failed", first);
    std::this_thread::sleep_for(1ms);
  }
  CHECK_THAT(failed, Catch::Contains("SSH host keys not read"));
  CHECK_THAT(failed, Catch::Contains("not base64"));
  CHECK(h.metrics.value("armhive_vm_failures_total", {{"pool", "ci"}, {"host", "localhost"}}) == 1);

  // Once the guest behaves, the pool's retry boots a VM that becomes warm with its keys.
  h.hypervisor->host_keys_output = nullptr;
  h.clock.advance(1s);  // past the backoff
  h.engine->schedule();
  REQUIRE(h.settle(1));
  CHECK(h.hypervisor->domains().count(first) == 0);  // destroyed
  CHECK(h.hypervisor->creates() == 2);
  const std::string second = only_vm(h);
  REQUIRE_FALSE(second.empty());
  auto records = h.store->vms();
  REQUIRE(records.is_ok());
  REQUIRE(records->size() == 1);
  CHECK(records->front().host_keys ==
        std::vector<std::string>{FakeHypervisor::host_key_of(second)});
}

TEST_CASE("a pool without sshd is warm without host keys and its leases carry none",
          "[engine][host_keys]") {
  PoolConfig pool = ci_pool(1, 2);
  pool.ssh = false;
  Harness h({pool});
  h.hypervisor->host_key_reads_until_ready = 0;  // would never be ready if asked
  h.start();
  REQUIRE(h.settle(1));
  Lease l = h.lease();
  CHECK(l.state == LeaseState::kReady);
  CHECK(l.host_keys.empty());
  CHECK(h.hypervisor->host_key_reads(l.vm_name) == 0);
}

TEST_CASE("a restart keeps a warm VM's host keys for its hand-out", "[engine][host_keys]") {
  const std::string path = "/tmp/armhive-boot-keys-" + std::to_string(::getpid()) + ".db";
  std::remove(path.c_str());
  {
    Harness h({ci_pool(1, 2)}, path);
    h.start();
    REQUIRE(h.settle(1));
    const std::string vm = only_vm(h);
    REQUIRE(h.hypervisor->host_key_reads(vm) == 1);
    h.make_engine();  // kill -9 and start again: the VM is adopted from its record
    h.start();
    REQUIRE(h.settle(1));
    Lease l = h.lease();
    REQUIRE(l.state == LeaseState::kReady);
    CHECK(l.vm_name == vm);
    CHECK(l.host_keys == std::vector<std::string>{FakeHypervisor::host_key_of(vm)});
    CHECK(h.hypervisor->host_key_reads(vm) == 1);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

}  // namespace
}  // namespace armhive
