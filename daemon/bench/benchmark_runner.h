#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/process_runner.h"
#include "base/thread_annotations.h"
#include "daemon/bench/benchmark_service.h"
#include "daemon/bench/lease_target.h"
#include "daemon/core/clock.h"
#include "daemon/core/hypervisor.h"

namespace armhive {

struct BenchmarkRunnerOptions {
  std::string runs_dir;                  // one RUN_ID.json per run; created if missing
  std::string proc_root = "/proc";       // host CPU sampler
  std::string sys_root = "/sys";         // host temperature sensors
  int iperf3_port = 5201;                // the guest server's port
  std::string guest_interface = "eth0";  // for `ip link set dev IF mtu M` when MTUs are given
  std::string guest_run_dir = "/run";    // where the guest server's pidfile goes
  int zstd_seconds = 1;                  // zstd -i<s>: minimum seconds per measurement
  std::chrono::milliseconds guest_command_timeout{std::chrono::seconds(30)};  // also `ip`, ping
  std::chrono::milliseconds zstd_timeout{std::chrono::minutes(5)};            // per zstd run
  // Per armhive-stream run (memory suite); crypto and storage derive theirs from their settings.
  std::chrono::milliseconds stream_timeout{std::chrono::minutes(10)};
  size_t max_queued_per_vm = 8;     // start() answers kResourceExhausted beyond this
  int client_connect_attempts = 3;  // the daemonised server may not listen yet
  std::chrono::milliseconds client_retry_delay{std::chrono::milliseconds(500)};
};

// BenchmarkService over injected interfaces: guest commands through Hypervisor::exec (the guest
// agent), the host-side iperf3 client (and the host zstd run) through ProcessRunner, the lease
// through a LeaseTargetResolver provided by the engine.
//
// Ownership: borrows hypervisor, processes and clock, which must outlive the runner. Owns one
// worker thread per VM with queued runs (runs on one VM execute one at a time, in order; runs on
// different VMs concurrently). The destructor fails queued runs, lets the running ones stop at
// their next step (always stopping the guest iperf3 server) and joins every thread.
// Threading: all public methods are thread-safe.
class BenchmarkRunner final : public BenchmarkService {
 public:
  BenchmarkRunner(GuestAgent& agent, ProcessRunner& processes, LeaseTargetResolver resolve,
                  const Clock& clock, BenchmarkRunnerOptions options);
  ~BenchmarkRunner() override;
  BenchmarkRunner(const BenchmarkRunner&) = delete;
  BenchmarkRunner& operator=(const BenchmarkRunner&) = delete;

  // Loads stored runs from runs_dir; runs left queued/running by a previous process are marked
  // failed ("interrupted by a daemon restart"). Call once before serving.
  Status load();

  Result<BenchmarkRun> start(const BenchmarkRequest& request) override;
  Result<BenchmarkRun> get(const std::string& id) override;
  std::vector<BenchmarkRun> list(const BenchmarkFilter& filter) override;
  Result<std::string> report_html(const std::vector<std::string>& ids) override;
  Result<std::string> report_csv(const std::vector<std::string>& ids) override;
  Result<nlohmann::json> compare(const std::vector<std::string>& ids) override;

  // Blocks until the run is succeeded/failed or `timeout` passes; returns it as it is then.
  Result<BenchmarkRun> wait(const std::string& id, std::chrono::milliseconds timeout);

 private:
  struct Job {
    std::string id;
    LeaseTarget target;
  };
  struct VmQueue {
    std::deque<Job> jobs;
    bool worker_active = false;
    std::thread worker;
  };

  void worker(std::string vm_name);
  void execute(const Job& job);
  void fail_escaped(const std::string& id, const std::string& what) noexcept;
  bool stopping() const;
  void update(const BenchmarkRun& run);  // stores in memory + on disk, notifies waiters
  Status save(const BenchmarkRun& run) const;
  Result<std::vector<BenchmarkRun>> collect(const std::vector<std::string>& ids);

  GuestAgent& agent_;
  ProcessRunner& processes_;
  LeaseTargetResolver resolve_;
  const Clock& clock_;
  BenchmarkRunnerOptions options_;

  mutable Mutex mu_;
  std::condition_variable_any changed_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::map<std::string, BenchmarkRun> runs_ GUARDED_BY(mu_);  // by id
  std::map<std::string, VmQueue> queues_ GUARDED_BY(mu_);     // by vm_name
};

}  // namespace armhive
