#pragma once

#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"

namespace armhive {

// Shared bits of the e2e tests that run a real armhived (tests/support/daemon_process.h).

// $ARMHIVE_E2E_STATE (set by tests/CMakeLists.txt), where each test keeps its state directory.
inline std::string e2e_state() {
  const char* s = std::getenv("ARMHIVE_E2E_STATE");
  return s ? s : "/tmp/armhive-e2e";
}

// A pool "ci" of one 1-vCPU VM of `image` (tiny by default) on one dedicated core (CPU 1 of
// this 2-CPU machine), CPU 0 for housekeeping; min_warm 1 keeps a warm VM, 0 makes every lease
// boot cold.
inline std::string one_core_pool_toml(int min_warm, const std::string& default_ttl = "10m",
                                      const std::string& image = "tiny", int memory_mib = 384) {
  return R"(
[host.cpus]
housekeeping = "0"
dedicated = "1"

[[pools]]
name = "ci"
image = ")" +
         image + R"("
vcpus = 1
memory_mib = )" +
         std::to_string(memory_mib) + R"(
network = "armhive"
max = 1
max_starting = 1
default_ttl = ")" +
         default_ttl + R"("
max_ttl = "1h"
cpu_policy = "dedicated"
min_warm = )" +
         std::to_string(min_warm) + "\n";
}

// A fresh ed25519 key pair in `dir` (id_ed25519, replaced); returns the public key line.
std::string make_ssh_key(const std::string& dir);

// Domains with per-VM files under <state>/vms: overlays/NAME.qcow2 and domains/NAME/.
std::set<std::string> vm_files(const std::string& state);

// Waits until `api`'s first pool has a warm VM, then leases it with a fresh key made in
// `state_dir`; the lease is ready (REQUIREd) and names its VM.
LeaseDto lease_warm_vm(Client& api, const std::string& state_dir);

// The leases of GitLab job `job_id` (label gitlab.job, as `armhive gitlab prepare` sets it),
// only the active ones when `active`; REQUIREs the listing to work.
std::vector<LeaseDto> gitlab_job_leases(Client& api, const std::string& job_id, bool active);

// Polls `pred` until it holds or `timeout` passes (real guests: no events to wait on).
template <typename Pred>
bool eventually(Pred pred, std::chrono::seconds timeout,
                std::chrono::milliseconds poll = std::chrono::milliseconds(500)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(poll);
  }
  return pred();
}

}  // namespace armhive
