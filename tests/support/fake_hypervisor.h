#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/core/hypervisor.h"

namespace armhive {

// The in-memory Hypervisor of every test that does not need libvirt (engine, benchmarks),
// kept honest by tests/daemon/virt/hypervisor_conformance_itest.cc. Domains "boot" when the
// agent has been pinged `pings_until_ready` times. Guest commands echo their argv unless
// `exec_handler` answers them; every exec is recorded. The SSH host key listing
// (kHostKeysScript, daemon/core/host_keys.h) is answered by the guest's model of sshd instead:
// one ed25519 key per domain (host_key_of), printed from the `host_key_reads_until_ready`-th
// read on; those reads are counted (host_key_reads), not recorded in execs(). Thread-safe.
// Failure knobs are plain fields set by the test before the call they should affect.
class FakeHypervisor final : public Hypervisor {
 public:
  struct Domain {
    VmSpec spec;
    std::string lease_id;
    int pings = 0;
    std::vector<std::string> keys;
    std::string key_user;
    int host_key_reads = 0;
    // What vm_counters() reports: a new run (its id) at create with every counter at zero, as
    // QEMU's start; moved by the test (add_usage, set_rss, restart_qemu, set_counters).
    UsageCounters counters;
  };

  Status create_vm(const VmSpec& spec) override;
  Status destroy_vm(std::string_view name) override;
  Result<std::vector<VmInfo>> list_vms() override;
  Result<std::vector<std::string>> list_vm_files() override;
  Status set_lease(std::string_view name, std::string_view lease_id) override;
  Status ping_agent(std::string_view name, std::chrono::milliseconds timeout) override;
  Result<std::string> guest_address(std::string_view name) override;
  Status set_authorized_keys(std::string_view name, std::string_view user,
                             const std::vector<std::string>& keys) override;
  Result<GuestExecResult> exec(std::string_view name, const GuestExecRequest& request) override;
  // A started process runs until finish_process(pid, ...) or its domain goes; it is recorded
  // in execs() like exec's, and its env in started_env().
  Result<int64_t> exec_start(std::string_view name, const GuestExecRequest& request) override;
  Result<std::optional<GuestExecResult>> exec_status(std::string_view name, int64_t pid) override;
  Result<std::string> console_log(std::string_view name, size_t max_bytes) override;
  void set_event_handler(std::function<void(const VmEvent&)> handler) override;
  // The named running domains' counters, as libvirt's bulk statistics: unknown names left out.
  // Each call is counted (counter_calls) with the names it asked for (counter_requests).
  Result<std::vector<VmCounters>> vm_counters(const std::vector<std::string>& names) override;

  // The guest burns CPU, writes to disk, receives and sends: its cumulative counters grow.
  // False for an unknown domain.
  bool add_usage(const std::string& name, std::chrono::nanoseconds cpu, uint64_t disk_write = 0,
                 uint64_t net_rx = 0, uint64_t net_tx = 0);
  bool set_rss(const std::string& name, uint64_t bytes);
  // QEMU restarted: a new run id and every counter back at zero.
  bool restart_qemu(const std::string& name);
  bool set_counters(const std::string& name, const UsageCounters& counters);
  int counter_calls() const;
  std::vector<std::vector<std::string>> counter_requests() const;

  // Simulates QEMU dying: the domain disappears (files stay) and a crash event fires.
  void crash(const std::string& name);
  // Adds a domain the engine never made (an orphan) and a stray file set.
  void add_orphan(const std::string& name);
  void add_stray_files(const std::string& name);
  // Re-pins a running domain behind the engine's back (as an operator with virsh might).
  void repin(const std::string& name, std::vector<int> pins);

  // "name: argv joined by spaces" of every exec, in order; helpers to look for one.
  std::vector<std::string> execs() const;
  bool saw(const std::string& needle) const;
  // The domain's SSH host key as its guest prints it ("ssh-ed25519 BASE64"), and how many times
  // its host keys were asked for (0 for an unknown domain).
  static std::string host_key_of(const std::string& name);
  int host_key_reads(const std::string& name) const;
  size_t index_of(const std::string& needle) const;  // SIZE_MAX when never seen

  // Ends a process started by exec_start with `exit_code`; false if no such process runs.
  bool finish_process(int64_t pid, int exit_code);
  // The pids exec_start gave out that still run, and the env each was started with.
  std::vector<int64_t> running_processes() const;
  std::vector<std::string> started_env(int64_t pid) const;

  std::map<std::string, Domain> domains() const;
  std::set<std::string> files() const;
  int creates() const;

  // Knobs.
  std::atomic<int> pings_until_ready{2};
  std::atomic<bool> fail_create{false};
  std::atomic<ErrorCode> fail_create_code{ErrorCode::kInternal};
  std::atomic<bool> never_ready{false};
  std::atomic<bool> fail_keys{false};
  // The guest's sshd: its keys are printed from this read on (earlier reads print nothing, as
  // before sshd wrote its pid file); 0 or less: never. `host_keys_output`, when set, is what
  // every read prints instead (a hostile guest).
  std::atomic<int> host_key_reads_until_ready{1};
  std::function<std::string(const std::string& name)> host_keys_output;
  // Answers guest commands (runs without the fake's lock); nullopt falls back to echo. Set
  // before the first exec.
  std::function<std::optional<Result<GuestExecResult>>(const std::vector<std::string>& argv)>
      exec_handler;

 private:
  mutable std::mutex mu_;
  std::map<std::string, Domain> domains_;
  std::set<std::string> files_;  // overlays + per-VM files, by domain name
  std::function<void(const VmEvent&)> handler_;
  int creates_ = 0;
  std::vector<std::string> execs_;
  int next_ip_ = 10;
  struct Process {
    std::string domain;
    std::vector<std::string> env;
    std::optional<int> exit_code;  // set by finish_process
  };
  std::map<int64_t, Process> processes_;
  int64_t next_pid_ = 100;
  int64_t next_run_id_ = 1;
  std::vector<std::vector<std::string>> counter_requests_;
};

}  // namespace armhive
