// End-to-end: a real armhived, real aarch64 guests (tiny image) under the sandboxed libvirtd.
// This process runs inside the sandbox's network namespace (see tests/CMakeLists.txt), so the
// guests' addresses are reachable and nothing leaves the namespace.

#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "api/json.h"
#include "base/process_runner.h"
#include "tests/support/daemon_process.h"
#include "tests/support/e2e_daemon.h"
#include "tests/support/files.h"
#include "tests/support/instance_domains.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Runs a command over one real OpenSSH login as the lease's first response says to: the host
// key checked strictly against `known_hosts` (the lease's ssh.known_hosts) under its
// ssh.host_key_alias. No retry: a ready lease's sshd is up and its keys are known.
ProcessResult ssh(const std::string& key, const std::string& known_hosts, const SshDto& s,
                  const std::string& command) {
  SubprocessRunner run;
  auto r = run.run({.argv = {"ssh", "-i", key, "-o", "HostKeyAlias=" + s.host_key_alias, "-o",
                             "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + known_hosts,
                             "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o",
                             "LogLevel=ERROR", s.user + "@" + s.host, command},
                    .timeout = 60s});
  REQUIRE(r.is_ok());
  return *r;
}

void append(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app);
  out << text;
  REQUIRE(out.good());
}

TEST_CASE("warm hand-out, ssh, exec, pinning, renew, waiting, release, refill and expiry",
          "[lease]") {
  std::string state = e2e_state() + "/lease-warm";
  DaemonProcess daemon(state, e2e_state() + "/images", 18470, one_core_pool_toml(1));
  Status started = daemon.start();
  INFO(daemon.log());
  REQUIRE(started.is_ok());
  auto api = daemon.client();
  REQUIRE(api);
  REQUIRE(eventually(
      [&] {
        auto pools = api->pools();
        return pools.is_ok() && pools->size() == 1 && (*pools)[0].warm == 1;
      },
      240s));

  std::string pub = make_ssh_key(state);
  LeaseCreateRequest req;
  req.pool = "ci";
  req.ttl_seconds = 600;
  req.ssh_keys = {pub};
  req.labels = {{"job", "e2e"}};
  auto lease = api->create_lease(req, "e2e-job-1");
  REQUIRE(lease.is_ok());
  CHECK(lease->state == "ready");  // served from the warm pool, keys already installed
  CHECK(lease->warm_handout);
  REQUIRE(lease->vm.has_value());
  const std::string vm = lease->vm->name;
  const std::string address = lease->vm->address;
  CHECK(lease->vm->cpus == std::vector<int>{1});
  // A retry with the same idempotency key gets the same lease, not a second VM.
  auto again = api->create_lease(req, "e2e-job-1");
  REQUIRE(again.is_ok());
  CHECK(again->id == lease->id);

  // The pool has only just become warm, and the lease's first response already carries its
  // VM's host keys (issue 28): a real OpenSSH client logs in at once with the key installed
  // through the guest agent, verifying the host key strictly, and the guest carries its own
  // per-VM hostname. The known_hosts file is one a user keeps adding leases to.
  REQUIRE(lease->ssh.has_value());
  REQUIRE_FALSE(lease->ssh->host_keys.empty());
  CHECK(lease->ssh->host == address);
  CHECK(lease->ssh->command.find("HostKeyAlias=" + lease->ssh->host_key_alias) !=
        std::string::npos);
  const std::string known_hosts = state + "/known_hosts";
  std::filesystem::remove(known_hosts);
  append(known_hosts, lease->ssh->known_hosts);
  auto login = ssh(state + "/id_ed25519", known_hosts, *lease->ssh,
                   "hostname; iperf3 --version | head -1; zstd --version");
  INFO(login.err);
  REQUIRE(login.ok());
  CHECK(login.out.find(vm) != std::string::npos);
  CHECK(login.out.find("iperf 3") != std::string::npos);
  CHECK(login.out.find("Zstandard") != std::string::npos);

  // exec through the agent.
  auto uname = api->exec(lease->id, {{"uname", "-m"}, "", 30});
  REQUIRE(uname.is_ok());
  CHECK(uname->exit_code == 0);
  CHECK(uname->out == "aarch64\n");

  // A job that keeps its one vCPU busy for kBurn seconds (by the guest's clock) and writes
  // 4 MiB to disk; its usage is checked once the lease has ended, below.
  constexpr int kBurn = 8;
  auto burn =
      api->exec(lease->id, {{"sh", "-c",
                             "end=$(( $(date +%s) + " + std::to_string(kBurn) +
                                 " )); while [ $(date +%s) -lt $end ]; do :; done; "
                                 "dd if=/dev/zero of=/root/usage bs=64k count=64 conv=fsync "
                                 "2>/dev/null; echo burnt"},
                            "",
                            60});
  REQUIRE(burn.is_ok());
  CHECK(burn->out == "burnt\n");

  // The vCPU thread runs on the dedicated core only; QEMU's own threads on housekeeping.
  pid_t pid = qemu_pid(vm);
  REQUIRE(pid > 0);
  auto vcpu = thread_affinities(pid, "CPU ");
  REQUIRE(vcpu.size() == 1);
  CHECK(vcpu[0] == "1");
  auto main_thread = thread_affinities(pid, "qemu-system-aar");
  REQUIRE_FALSE(main_thread.empty());
  CHECK(main_thread[0] == "0");

  // Renew moves the deadline.
  auto renewed = api->renew_lease(lease->id, 1200);
  REQUIRE(renewed.is_ok());
  CHECK(renewed->expires_at > lease->expires_at);

  // The pool is at max and the only dedicated core is taken: a second lease waits and says why.
  req.ttl_seconds = 300;
  auto second = api->create_lease(req);
  REQUIRE(second.is_ok());
  CHECK(second->state == "pending");
  CHECK_FALSE(second->reason.empty());

  // Releasing the first destroys its VM; the waiting lease gets the freed slot.
  auto released = api->release_lease(lease->id);
  REQUIRE(released.is_ok());
  auto served = api->wait_lease(second->id, 240s);
  REQUIRE(served.is_ok());
  CHECK(served->state == "ready");
  // A new VM with fresh host keys, perhaps at the first one's address: its own alias keeps the
  // two leases' lines apart in the same known_hosts file, and its first response has them.
  REQUIRE(served->ssh.has_value());
  CHECK(served->ssh->host_keys != lease->ssh->host_keys);
  append(known_hosts, served->ssh->known_hosts);
  auto second_login = ssh(state + "/id_ed25519", known_hosts, *served->ssh, "hostname");
  INFO(second_login.err);
  CHECK(second_login.ok());
  CHECK(second_login.out.find(served->vm->name) != std::string::npos);
  CHECK(qemu_pid(vm) < 0);
  CHECK_FALSE(vm_files(state).count(vm));
  CHECK(api->get_lease(lease->id)->state == "released");

  // What the first lease's VM used, final now that it ended (libvirt's bulk stats of the real
  // QEMU process): at least most of the burn — one TCG vCPU busy for kBurn guest seconds needs
  // the host CPU for about as long, though a starved vCPU thread gets less and the guest clock
  // follows the host's — and no more than its VM's one vCPU plus QEMU's own threads could use
  // in the time it was leased.
  auto ended = api->get_lease(lease->id);
  REQUIRE(ended.is_ok());
  REQUIRE(ended->usage.has_value());
  const LeaseUsageDto& used = *ended->usage;
  INFO(to_json(used).dump());
  CHECK(used.final);
  CHECK(used.wall_seconds >= kBurn);
  CHECK(used.cpu_seconds >= 0.5 * kBurn);
  CHECK(used.cpu_seconds <= 2 * used.wall_seconds);  // two host cores, no more
  CHECK(used.peak_memory_bytes > 16 * 1024 * 1024);
  CHECK(used.disk_write_bytes >= 4 * 1024 * 1024);
  CHECK(used.net_rx_bytes > 0);  // the ssh login
  CHECK(used.net_tx_bytes > 0);
  // The usage report counts it under its pool, with at least its figures.
  auto report = api->usage({.since = "1h", .group_by = "pool"});
  REQUIRE(report.is_ok());
  REQUIRE(report->rows.size() == 1);
  CHECK(report->rows[0].group == "ci");
  CHECK(report->rows[0].leases >= 2);
  CHECK(report->rows[0].cpu_seconds >= used.cpu_seconds);

  // Shortened to 3 s, its TTL runs out on the server; the pool refills to one warm VM.
  REQUIRE(api->renew_lease(second->id, 3).is_ok());
  REQUIRE(eventually([&] { return api->get_lease(second->id)->state == "expired"; }, 60s));
  REQUIRE(eventually(
      [&] {
        auto pools = api->pools();
        return pools.is_ok() && (*pools)[0].warm == 1 && (*pools)[0].leased == 0;
      },
      240s));
  CHECK(vm_files(state).size() == 1);  // only the fresh warm VM has files

  // No secret in a log line, an event, the audit log (in the database), a response or a
  // problem body: neither the admin secret nor a near-miss guess of it.
  const std::string secret = daemon.token();
  REQUIRE(secret.size() > 10);
  std::string guess = secret;
  guess.back() = guess.back() == 'A' ? 'B' : 'A';
  auto refused = daemon.client_with(guess)->pools();
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == ErrorCode::kUnauthenticated);
  std::string answers = refused.status().to_string();
  REQUIRE(api->stream_events(0, false,
                             [&](const EventDto& e) {
                               answers += to_json(e).dump();
                               return true;
                             })
              .is_ok());
  auto page = api->list_leases({});
  auto one = api->get_lease(second->id);
  auto pools = api->pools();
  auto hosts = api->hosts();
  REQUIRE((page.is_ok() && one.is_ok() && pools.is_ok() && hosts.is_ok()));
  answers += to_json(*page).dump() + to_json(*one).dump();
  for (const auto& p : *pools) answers += to_json(p).dump();
  for (const auto& h : *hosts) answers += to_json(h).dump();
  for (const std::string& s : {secret, guess, secret.substr(3)}) {
    CHECK(answers.find(s) == std::string::npos);
    CHECK(daemon.full_log().find(s) == std::string::npos);
    CHECK(files_containing(state, s, state + "/admin.token").empty());
  }

  // A reload (SIGHUP, `systemctl reload armhived`) while a lease runs: its limits change at
  // once, its VM is untouched, and min_warm is followed down and up.
  auto held = api->create_lease(req, "e2e-job-reload");
  REQUIRE(held.is_ok());
  REQUIRE(held->state == "ready");
  const std::string held_vm = held->vm->name;
  const pid_t held_qemu = qemu_pid(held_vm);
  REQUIRE(held_qemu > 0);
  CHECK_FALSE(api->renew_lease(held->id, 90 * 60).is_ok());  // over max_ttl 1h
  auto pool_with = [](int min_warm) {                        // max_ttl 2h
    std::string toml = one_core_pool_toml(min_warm);
    return toml.replace(toml.find("max_ttl = \"1h\""), 14, "max_ttl = \"2h\"");
  };
  REQUIRE(daemon.reload(pool_with(0)).is_ok());
  REQUIRE(eventually(
      [&] {
        auto p = api->pools();
        return p.is_ok() && (*p)[0].max_ttl_seconds == 7200 && (*p)[0].min_warm == 0;
      },
      60s));
  CHECK(api->renew_lease(held->id, 90 * 60).is_ok());
  CHECK(qemu_pid(held_vm) == held_qemu);  // the same QEMU process serves it
  CHECK(api->get_lease(held->id)->state == "ready");
  // Released with min_warm 0: nothing refills.
  REQUIRE(api->release_lease(held->id).is_ok());
  REQUIRE(eventually([&] { return qemu_pid(held_vm) < 0; }, 120s));
  REQUIRE(eventually(
      [&] {
        auto p = api->pools();
        return p.is_ok() && (*p)[0].warm == 0 && (*p)[0].starting == 0 && (*p)[0].leased == 0;
      },
      60s));
  // min_warm 1 again: a warm VM boots.
  REQUIRE(daemon.reload(pool_with(1)).is_ok());
  REQUIRE(eventually(
      [&] {
        auto p = api->pools();
        return p.is_ok() && (*p)[0].warm == 1;
      },
      240s));
  // And down to 0 again: the warm VM nobody holds is destroyed.
  std::vector<std::string> warm_vms = instance_domains("armhive-e2e-18470");  // "name (instance)"
  REQUIRE(warm_vms.size() == 1);
  const std::string warm_vm = warm_vms.front().substr(0, warm_vms.front().find(' '));
  REQUIRE(qemu_pid(warm_vm) > 0);
  REQUIRE(daemon.reload(pool_with(0)).is_ok());
  REQUIRE(eventually([&] { return qemu_pid(warm_vm) < 0; }, 120s));
  REQUIRE(eventually(
      [&] {
        auto p = api->pools();
        return p.is_ok() && (*p)[0].warm == 0 && (*p)[0].starting == 0;
      },
      60s));
  const std::string log = daemon.full_log();
  CHECK(log.find("reload: pool ci: min_warm, max_ttl") != std::string::npos);
  CHECK(log.find("reload: pool ci: min_warm\n") != std::string::npos);

  daemon.kill(SIGTERM);
}

TEST_CASE("kill -9 of the daemon while provisioning: restart converges, nothing leaks",
          "[recovery]") {
  std::string state = e2e_state() + "/lease-recovery";
  DaemonProcess daemon(state, e2e_state() + "/images", 18471, one_core_pool_toml(0));
  const Status started = daemon.start();
  INFO(started.to_string());
  REQUIRE(started.is_ok());
  auto api = daemon.client();
  LeaseCreateRequest req;
  req.pool = "ci";
  req.ssh_keys = {make_ssh_key(state)};
  auto lease = api->create_lease(req);
  REQUIRE(lease.is_ok());
  // Cold (no warm VM configured): pending until the engine has placed it (the first reconcile
  // pass must have seen the host), then provisioning; never ready at once.
  INFO(lease->reason);
  REQUIRE((lease->state == "pending" || lease->state == "provisioning"));
  // Let the domain come into existence, then kill the daemon mid-boot.
  REQUIRE(eventually([&] { return !vm_files(state).empty(); }, 60s));
  daemon.kill(SIGKILL);

  // Restart on the same state: the lease and the VM agree, with exactly one VM.
  Status restarted = daemon.start();
  INFO(daemon.log());
  REQUIRE(restarted.is_ok());
  api = daemon.client();
  auto ready = api->wait_lease(lease->id, 240s);
  INFO(daemon.log());
  REQUIRE(ready.is_ok());
  CHECK(ready->state == "ready");
  REQUIRE(ready->vm.has_value());
  // Exactly one VM once the restart has converged: whatever the kill left half-made (an
  // overlay without a domain, a domain without a record) is gone within the reconciler's two
  // passes, which may end after the lease's new VM is ready.
  const std::set<std::string> only{ready->vm->name};
  CHECK(eventually([&] { return vm_files(state) == only; }, 60s));
  CHECK(vm_files(state) == only);
  CHECK(qemu_pid(ready->vm->name) > 0);

  REQUIRE(api->release_lease(lease->id).is_ok());
  REQUIRE(eventually([&] { return api->get_lease(lease->id)->state == "released"; }, 60s));
  CHECK(eventually([&] { return vm_files(state).empty(); }, 60s));
  auto pools = api->pools();
  REQUIRE(pools.is_ok());
  CHECK((*pools)[0].starting + (*pools)[0].warm + (*pools)[0].leased == 0);
  daemon.kill(SIGTERM);
}

TEST_CASE("kill -9 of a guest's QEMU fails its lease and the pool refills", "[crash]") {
  std::string state = e2e_state() + "/lease-crash";
  DaemonProcess daemon(state, e2e_state() + "/images", 18472, one_core_pool_toml(1));
  REQUIRE(daemon.start().is_ok());
  auto api = daemon.client();
  const LeaseDto lease = lease_warm_vm(*api, state);
  pid_t pid = qemu_pid(lease.vm->name);
  REQUIRE(pid > 0);
  ::kill(pid, SIGKILL);

  REQUIRE(eventually([&] { return api->get_lease(lease.id)->state == "failed"; }, 60s));
  auto failed = api->get_lease(lease.id);
  INFO(failed->reason);
  CHECK(failed->reason.find(lease.vm->name) != std::string::npos);
  // The crashed VM's files and address go with it (the destroy follows the lease's end).
  CHECK(eventually([&] { return !vm_files(state).count(lease.vm->name); }, 60s));
  REQUIRE(eventually([&] { return (*api->pools())[0].warm == 1; }, 240s));
  daemon.kill(SIGTERM);
}

}  // namespace
}  // namespace armhive
