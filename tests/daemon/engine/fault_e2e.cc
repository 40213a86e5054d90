// End-to-end faults of the host under a real armhived and real guests (the sandboxed
// libvirtd): a database that cannot be read, libvirtd stopped, a destroy that fails, the overlay
// directory full. Each case asserts what an operator would check afterwards: the VMs that were
// running still are, nothing is left half-made, and the daemon catches up once the fault ends.
// docs/reliability.md lists them.

#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "api/json.h"
#include "tests/support/daemon_process.h"
#include "tests/support/e2e_daemon.h"
#include "tests/support/e2e_faults.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST_CASE("an unreadable database at start: armhived refuses to start and no VM is touched",
          "[recovery]") {
  std::string state = e2e_state() + "/lease-baddb";
  DaemonProcess daemon(state, e2e_state() + "/images", 18473, one_core_pool_toml(1));
  const Status started = daemon.start();
  INFO(started.to_string());
  REQUIRE(started.is_ok());
  auto api = daemon.client();
  const LeaseDto lease = lease_warm_vm(*api, state);
  const std::string vm = lease.vm->name;
  const pid_t qemu = qemu_pid(vm);
  REQUIRE(qemu > 0);
  daemon.kill(SIGKILL);

  // The database's header overwritten (a disk error, a bad restore): the copy is put back later.
  const std::string db = state + "/armhive.db";
  for (const char* suffix : {"", "-wal", "-shm"}) {
    if (fs::exists(db + suffix)) {
      fs::copy_file(db + suffix, db + suffix + ".good", fs::copy_options::overwrite_existing);
    }
  }
  // (Without its write-ahead log: SQLite would read page 1 from the log and never see it.)
  fs::remove(db + "-wal");
  fs::remove(db + "-shm");
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f);
    const std::string garbage(100, '\x5a');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  Status refused = daemon.start(60s);
  INFO(daemon.log());
  REQUIRE_FALSE(refused.is_ok());
  CHECK_FALSE(daemon.running());
  CHECK(daemon.full_log().find("armhive.db") != std::string::npos);
  // Nothing was destroyed on partial knowledge: the same QEMU process, the same files.
  CHECK(qemu_pid(vm) == qemu);
  CHECK(vm_files(state).count(vm));

  // Restored, the daemon adopts the VM and the lease is as it was.
  for (const char* suffix : {"", "-wal", "-shm"}) {
    fs::remove(db + suffix);
    if (fs::exists(db + suffix + ".good")) fs::rename(db + suffix + ".good", db + suffix);
  }
  Status restarted = daemon.start();
  INFO(daemon.log());
  REQUIRE(restarted.is_ok());
  api = daemon.client();
  auto again = api->get_lease(lease.id);
  REQUIRE(again.is_ok());
  CHECK(again->state == "ready");
  REQUIRE(again->vm.has_value());
  CHECK(again->vm->name == vm);
  CHECK(qemu_pid(vm) == qemu);
  REQUIRE(api->release_lease(lease.id).is_ok());
  REQUIRE(eventually([&] { return !vm_files(state).count(vm); }, 60s));
  daemon.kill(SIGTERM);
}

TEST_CASE(
    "libvirtd stopped under a running armhived and at its restart: nothing is destroyed, "
    "the host shows unreachable and the lease host_unreachable, the VM is adopted once "
    "libvirtd continues, without another restart",
    "[libvirtd-stop]") {
  std::string state = e2e_state() + "/lease-stopped";
  DaemonProcess daemon(state, e2e_state() + "/images", 18474, one_core_pool_toml(1));
  // Restarting against the stopped libvirtd must give up in seconds, not the default minute.
  daemon.set_host_keys("libvirt_timeout = \"5s\"\n");
  REQUIRE(daemon.start().is_ok());
  auto api = daemon.client();
  const LeaseDto lease = lease_warm_vm(*api, state);
  const std::string vm = lease.vm->name;
  const pid_t qemu = qemu_pid(vm);
  REQUIRE(qemu > 0);
  {
    StoppedLibvirtd stopped;
    REQUIRE(stopped.stopped());
    // The host's probe misses its deadline: the host says so, the lease shows host_unreachable
    // (its VM may still run: it does), the API keeps answering, and nothing is destroyed on
    // that partial knowledge.
    std::string last_error;
    CHECK(eventually(
        [&] {
          auto hosts = api->hosts();
          if (!hosts.is_ok() || hosts->empty() || (*hosts)[0].state != "unreachable") {
            return false;
          }
          last_error = (*hosts)[0].last_error;
          return true;
        },
        120s));
    INFO(last_error);
    CHECK_FALSE(last_error.empty());
    auto during = api->get_lease(lease.id);
    REQUIRE(during.is_ok());
    CHECK(during->state == "host_unreachable");
    CHECK(during->reason.find("unreachable") != std::string::npos);
    CHECK(qemu_pid(vm) == qemu);

    // A restart while libvirtd is still stopped: armhived serves all the same (after
    // libvirt_timeout), drives the host as unreachable with the topology it had last time, and
    // touches nothing.
    daemon.kill(SIGKILL);
    Status restarted = daemon.start(120s);
    INFO(daemon.log());
    REQUIRE(restarted.is_ok());
    api = daemon.client();
    CHECK(eventually(
        [&] {
          auto hosts = api->hosts();
          return hosts.is_ok() && !hosts->empty() && (*hosts)[0].state == "unreachable" &&
                 (*hosts)[0].last_error.find("not connected") != std::string::npos;
        },
        120s));
    CHECK(api->get_lease(lease.id)->state == "host_unreachable");
    CHECK(daemon.full_log().find("driven as unreachable with its last known topology") !=
          std::string::npos);
    CHECK(qemu_pid(vm) == qemu);
    CHECK(vm_files(state).count(vm));
  }
  // libvirtd continues: armhived connects by itself (no restart), adopts the VM, the lease is
  // ready again (its TTL as it was), the host is ok.
  CHECK(eventually([&] { return api->get_lease(lease.id)->state == "ready"; }, 180s));
  auto again = api->get_lease(lease.id);
  REQUIRE(again.is_ok());
  CHECK(again->state == "ready");
  CHECK(again->expires_at == lease.expires_at);
  REQUIRE(again->vm.has_value());
  CHECK(again->vm->name == vm);
  CHECK(qemu_pid(vm) == qemu);
  CHECK(eventually(
      [&] {
        auto hosts = api->hosts();
        return hosts.is_ok() && !hosts->empty() && (*hosts)[0].state == "ok";
      },
      60s));
  REQUIRE(api->release_lease(lease.id).is_ok());
  REQUIRE(eventually([&] { return !vm_files(state).count(vm); }, 60s));
  daemon.kill(SIGTERM);
}

TEST_CASE("a destroy that fails is retried: the lease ends, nothing leaks, the pool refills",
          "[destroy-fails]") {
  std::string state = e2e_state() + "/lease-destroyfail";
  DaemonProcess daemon(state, e2e_state() + "/images", 18476, one_core_pool_toml(1));
  REQUIRE(daemon.start().is_ok());
  auto api = daemon.client();
  const LeaseDto lease = lease_warm_vm(*api, state);
  const std::string vm = lease.vm->name;
  const std::string vm_dir = state + "/vms/domains/" + vm;
  REQUIRE(fs::is_directory(vm_dir));
  uint64_t since = 0;
  REQUIRE(api->stream_events(0, false,
                             [&](const EventDto& e) {
                               since = e.seq;
                               return true;
                             })
              .is_ok());
  {
    ReadOnlyDir readonly(vm_dir);
    REQUIRE(readonly.active());
    REQUIRE(api->release_lease(lease.id).is_ok());
    // The domain is gone but its files cannot be removed: the destroy fails, is reported, and
    // the lease waits in releasing instead of claiming an end that leaked files.
    std::string failure;
    REQUIRE(eventually(
        [&] {
          (void)api->stream_events(since, false, [&](const EventDto& e) {
            since = e.seq;
            if (e.type == "vm.destroy_failed" && e.vm == vm) failure = e.detail;
            return true;
          });
          return !failure.empty();
        },
        120s));
    INFO(failure);
    auto during = api->get_lease(lease.id);
    REQUIRE(during.is_ok());
    CHECK(during->state == "releasing");
    auto hosts = api->hosts();
    REQUIRE(hosts.is_ok());
    REQUIRE_FALSE(hosts->empty());
    CHECK((*hosts)[0].state == "degraded");
    CHECK((*hosts)[0].last_error.find("destroy") != std::string::npos);
  }
  // The disk "recovers": a retry removes everything, ends the lease, frees the core for a
  // fresh warm VM, and the host is ok again.
  CHECK(eventually(
      [&] {
        auto l = api->get_lease(lease.id);
        return l.is_ok() && l->state == "released";
      },
      180s));
  CHECK(eventually([&] { return !vm_files(state).count(vm) && qemu_pid(vm) < 0; }, 60s));
  CHECK(eventually(
      [&] {
        auto pools = api->pools();
        return pools.is_ok() && (*pools)[0].warm == 1;
      },
      240s));
  CHECK(eventually(
      [&] {
        auto hosts = api->hosts();
        return hosts.is_ok() && !hosts->empty() && (*hosts)[0].state == "ok";
      },
      60s));
  daemon.kill(SIGTERM);
}

TEST_CASE(
    "the overlay directory full: the lease fails naming it, nothing is half-made, the "
    "next lease boots once there is room",
    "[overlay-full]") {
  std::string state = e2e_state() + "/lease-full";
  DaemonProcess daemon(state, e2e_state() + "/images", 18477, one_core_pool_toml(0));
  REQUIRE(daemon.start().is_ok());
  auto api = daemon.client();
  const std::string overlays = state + "/vms/overlays";
  REQUIRE(fs::is_directory(overlays));
  // 64 KiB: less than one qcow2 overlay's header, L1 and refcount clusters.
  REQUIRE(run_in_libvirtd_mounts({"mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", overlays}));
  struct Unmount {
    std::string dir;
    bool done = false;
    void operator()() {
      if (!done) (void)run_in_libvirtd_mounts({"umount", "-l", dir});
      done = true;
    }
    ~Unmount() { (*this)(); }
  } unmount{overlays};

  LeaseCreateRequest req;
  req.pool = "ci";
  req.ssh_keys = {make_ssh_key(state)};
  auto lease = api->create_lease(req);
  REQUIRE(lease.is_ok());
  CHECK((lease->state == "pending" || lease->state == "provisioning"));
  // The job learns at once why, in words an operator acts on (the disk, not "boot failed").
  LeaseDto failed;
  REQUIRE(eventually(
      [&] {
        auto l = api->get_lease(lease->id);
        if (!l.is_ok() || l->state != "failed") return false;
        failed = *l;
        return true;
      },
      180s));
  INFO(failed.reason);
  CHECK(failed.reason.find("No space left on device") != std::string::npos);
  // Nothing half-made: no QEMU, no per-VM files, no core held; the host shows the error.
  CHECK(eventually([&] { return vm_files(state).empty(); }, 30s));
  auto pools = api->pools();
  REQUIRE(pools.is_ok());
  CHECK((*pools)[0].starting + (*pools)[0].warm + (*pools)[0].leased == 0);
  auto hosts = api->hosts();
  REQUIRE(hosts.is_ok());
  REQUIRE_FALSE(hosts->empty());
  CHECK((*hosts)[0].state == "degraded");
  CHECK((*hosts)[0].last_error.find("No space left on device") != std::string::npos);

  // Room again: the next lease boots and is served.
  unmount();
  auto next = api->create_lease(req);
  REQUIRE(next.is_ok());
  CHECK(eventually(
      [&] {
        auto l = api->get_lease(next->id);
        return l.is_ok() && l->state == "ready";
      },
      300s));
  REQUIRE(api->release_lease(next->id).is_ok());
  CHECK(eventually([&] { return vm_files(state).empty(); }, 60s));
  daemon.kill(SIGTERM);
}

}  // namespace
}  // namespace armhive
