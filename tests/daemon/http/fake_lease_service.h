#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "daemon/bench/benchmark_service.h"
#include "daemon/engine/lease_service.h"
#include "tests/support/memory_guest_agent.h"

namespace armhive {

// A hand-written LeaseService for API tests. Pools:
//   "tiny": warm — leases are ready at once (vm + address), default ttl 1h, max ttl 8h
//   "slow": leases stay pending until make_ready(id) (for long-poll tests), max ttl 2h
// A ready lease carries its VM's host key (kFakeHostKey), as the engine's do.
// Guest exec: "echo A B" -> "A B\n"; "cat" -> stdin; "false" -> exit 1; "binary" -> bytes
// that are not UTF-8; "sleep" -> timed out; "exit N" -> exit N. Streamed (exec_stream), "hold"
// starts and runs until the sink is cancelled (the client went away, the server stops), as a
// command without timeout_s would; everything else streams as LeaseService's default does.
// Guest files: one in-memory guest (tests/support/memory_guest_agent.h, shared by all leases)
// behind the real transfer (daemon/virt/guest_file_transfer.h) and the real pool policy
// (daemon/core/file_policy.h): "tiny" allows 1 MiB anywhere, "slow" 1 MiB under /work.
// Thread-safe; waits are real condition-variable waits with the given timeouts.
// The SSH host key of every ready lease's VM.
inline const std::string kFakeHostKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL4VKYqD6zyeGmUdw5PnHb2hHd3HpM6d3ODBC8iXrGrg";

class FakeLeaseService final : public LeaseService {
 public:
  FakeLeaseService();

  Result<Lease> create_lease(const LeaseRequest& request) override;
  Result<Lease> get_lease(const std::string& id) override;
  Result<std::vector<Lease>> list_leases(const LeaseFilter& filter) override;
  Result<Lease> wait_lease(const std::string& id, std::chrono::milliseconds timeout) override;
  Result<Lease> renew_lease(const std::string& id, Seconds ttl) override;
  Result<Lease> release_lease(const std::string& id) override;
  Result<GuestExecResult> exec(const std::string& lease_id,
                               const GuestExecRequest& request) override;
  Result<GuestExecResult> exec_stream(const std::string& lease_id, const GuestExecRequest& request,
                                      ExecSink& sink) override;
  Result<std::string> console(const std::string& lease_id, size_t max_bytes) override;
  // How many streamed "hold" commands are running now.
  int holding() const;
  Result<GuestFileTransfer> put_file(const std::string& lease_id, const GuestFilePut& put,
                                     ByteSource& source) override;
  Result<GuestFileTransfer> get_file(const std::string& lease_id, const std::string& path,
                                     ByteSink& sink) override;
  MemoryGuestAgent& guest() { return guest_; }
  std::vector<PoolStatus> pools() override;
  std::vector<HostView> hosts() override;
  std::vector<Event> events_since(uint64_t after, std::chrono::milliseconds timeout) override;
  // Kept and shown by hosts(), a degraded result making the host degraded, as the engine does.
  void set_host_health(std::vector<HealthResult> latest) override;
  // As the engine: host "honeycomb" only; drained, new leases wait (`host_draining`), and
  // undrained, the warm pools' waiting leases are handed out.
  Status set_host_admin(const std::string& host, HostHealthTracker::Admin admin) override;

  // Test controls.
  void make_ready(const std::string& id);
  // What the lease's VM used, as the engine's samples would have it (false: no such lease).
  // usage() is LeaseService's default over these leases.
  bool set_usage(const std::string& id, const LeaseUsage& usage);
  void emit(const std::string& type, const std::string& lease_id, const std::string& owner);
  GuestExecRequest last_exec() const;
  // How many wait_lease calls have begun (a client long-polling for readiness).
  int waits() const;
  // Another warm pool like "tiny", named `name` (the README's pool "ci").
  void add_warm_pool(const std::string& name);
  // Makes `name` a min_warm = "auto" pool whose engine decided `target` (its min_warm then).
  void set_auto_target(const std::string& name, const AutoWarmConfig& config, WarmTarget target);
  // What hosts() reports as the host's state and last error.
  void set_host_state(HostState state, std::string last_error);
  // More hosts, as hosts() lists them after "honeycomb": empty, with `uri` and `labels`.
  void add_host(const std::string& name, const std::string& uri,
                std::map<std::string, std::string> labels);
  void remove_host(const std::string& name);

 private:
  void event_locked(const std::string& type, const Lease& l);
  // The pool policy of a ready lease, or why there is none (404, 409).
  Result<PoolConfig> ready_pool(const std::string& lease_id);
  void transition_locked(Lease& l, LeaseState to, const std::string& reason);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, PoolConfig> pools_;
  std::map<std::string, WarmTarget> auto_targets_;
  std::vector<Lease> leases_;  // in creation order
  std::vector<Event> events_;
  HostState host_state_ = HostState::kOk;
  std::string host_last_error_;
  std::vector<HealthResult> host_health_;
  std::vector<HostView> extra_hosts_;
  HostHealthTracker::Admin host_admin_ = HostHealthTracker::Admin::kNone;
  uint64_t next_id_ = 1;
  uint64_t next_seq_ = 1;
  int waits_ = 0;
  std::atomic<int> holding_{0};
  GuestExecRequest last_exec_;
  TimePoint now_;
  MemoryGuestAgent guest_;
};

// A BenchmarkService double: runs are created queued and reported as succeeded when read.
class FakeBenchmarkService final : public BenchmarkService {
 public:
  explicit FakeBenchmarkService(LeaseService& leases) : leases_(leases) {}
  Result<BenchmarkRun> start(const BenchmarkRequest& request) override;
  Result<BenchmarkRun> get(const std::string& id) override;
  std::vector<BenchmarkRun> list(const BenchmarkFilter& filter) override;
  Result<std::string> report_html(const std::vector<std::string>& ids) override;
  Result<std::string> report_csv(const std::vector<std::string>& ids) override;
  Result<nlohmann::json> compare(const std::vector<std::string>& ids) override;

 private:
  LeaseService& leases_;
  std::mutex mu_;
  std::vector<BenchmarkRun> runs_;
};

}  // namespace armhive
