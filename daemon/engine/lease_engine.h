#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.h"
#include "daemon/core/clock.h"
#include "daemon/core/hypervisor.h"
#include "daemon/core/lease.h"
#include "daemon/core/placement.h"
#include "daemon/engine/lease_service.h"
#include "daemon/store/lease_store.h"

namespace armhive {

// A bootable image as the engine needs it (resolved from the image catalogue by name).
struct BootImage {
  std::string name;
  std::string version;
  std::string base_disk;
  std::string kernel;
  std::string initrd;
  std::string cmdline;
  std::string login_user = "root";
  // The image's deterministic compression corpus, for benchmarks (empty path: none).
  std::string corpus_path;
  uint64_t corpus_bytes = 0;
  uint64_t corpus_seed = 0;
  std::string corpus_sha256;
};
// Resolves a pool's image name. kNotFound / kUnprocessable make leases wait with that reason.
using ImageResolver = std::function<Result<BootImage>(const std::string& image)>;

struct EngineOptions {
  std::vector<PoolConfig> pools;
  PlacementStrategy strategy = PlacementStrategy::kPack;
  int threads = 4;  // io_context worker threads
  std::chrono::milliseconds boot_timeout{std::chrono::minutes(3)};
  std::chrono::milliseconds agent_poll{std::chrono::milliseconds(250)};
  std::chrono::milliseconds agent_timeout{std::chrono::seconds(2)};
  std::chrono::milliseconds handout_wait{std::chrono::seconds(10)};  // create_lease's warm wait
  std::chrono::milliseconds reaper_period{std::chrono::seconds(1)};
  std::chrono::milliseconds schedule_period{std::chrono::seconds(2)};  // retries waiting leases
  std::chrono::milliseconds reconcile_period{std::chrono::seconds(30)};
  // After a failed boot a pool waits retry_backoff × 2^(failures-1), at most max_retry_backoff.
  std::chrono::milliseconds retry_backoff{std::chrono::seconds(1)};
  std::chrono::milliseconds max_retry_backoff{std::chrono::minutes(1)};
  size_t event_buffer = 10000;
};

// The lease engine: keeps pools warm, hands VMs to leases, enforces TTLs, recycles VMs, and
// converges libvirt to the database (which is the desired state).
//
// Ownership: owns its io_context and worker threads, the CoreAllocator and all in-memory VM and
// lease state. Borrows the Hypervisor, LeaseStore, Clock and Metrics (they must outlive it).
//
// Metrics: the engine records only what it alone observes (hand-out and provisioning latency,
// VM failures, ended leases); gauges of pools, leases and cores are derived from pools() and
// hosts() when /metrics is scraped.
//
// Threading: public methods are thread-safe. All state sits behind mu_, which is never held
// across a Hypervisor call: work on a VM (create, boot polling, hand-out, destroy) runs on that
// VM's strand, so operations on one domain never overlap (QEMU's per-domain job lock), while
// different VMs proceed in parallel on the pool of `threads` workers. steady_timers drive TTL
// expiry, retries of waiting leases and periodic reconciliation. Hypervisor events arrive on
// the libvirt event-loop thread and are only posted onto the io_context.
class LeaseEngine final : public LeaseService {
 public:
  LeaseEngine(EngineOptions options, Hypervisor& hypervisor, LeaseStore& store,
              CoreAllocator allocator, ImageResolver images, const Clock& clock,
              Metrics* metrics = nullptr, std::string host_name = "localhost");
  ~LeaseEngine() override;
  LeaseEngine(const LeaseEngine&) = delete;
  LeaseEngine& operator=(const LeaseEngine&) = delete;

  // Recovers from the database and libvirt (adopts live VMs, destroys orphans, deletes stray
  // files, re-derives core allocations), then starts the workers and timers.
  Status start();
  // Stops timers and workers. VMs keep running and are re-adopted by the next start().
  void stop();

  // LeaseService
  Result<Lease> create_lease(const LeaseRequest& request) override;
  Result<Lease> get_lease(const std::string& id) override;
  Result<std::vector<Lease>> list_leases(const LeaseFilter& filter) override;
  Result<std::map<LeaseState, size_t>> count_leases(const LeaseFilter& filter) override;
  Result<Lease> wait_lease(const std::string& id, std::chrono::milliseconds timeout) override;
  Result<Lease> renew_lease(const std::string& id, Seconds ttl) override;
  Result<Lease> release_lease(const std::string& id) override;
  Result<GuestExecResult> exec(const std::string& lease_id,
                               const GuestExecRequest& request) override;
  Result<std::string> console(const std::string& lease_id, size_t max_bytes) override;
  std::vector<PoolStatus> pools() override;
  std::vector<HostView> hosts() override;
  std::vector<Event> events_since(uint64_t after, std::chrono::milliseconds timeout) override;

  // Runs one TTL sweep now (tests move a ManualClock instead of sleeping).
  void expire_due_leases();
  // One reconcile pass against libvirt now.
  Status reconcile();
  // Blocks until no VM operation is queued or running (tests).
  bool wait_idle(std::chrono::milliseconds timeout);

  // The VM behind a ready lease, for benchmarks and exec.
  struct LeaseVm {
    Lease lease;
    PoolConfig pool;
    std::vector<int> housekeeping;
  };
  Result<LeaseVm> lease_vm(const std::string& lease_id);

 private:
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  struct Vm {
    VmRecord record;
    Placement placement;
    std::shared_ptr<Strand> strand;
    bool cancelled = false;  // its boot must stop (lease cancelled, crash, shutdown)
    std::string failure;     // why, when cancelled by a crash
    TimePoint boot_started;
    std::chrono::steady_clock::time_point phase_mark;  // end of the last recorded boot phase
    std::set<std::string> phases_seen;
  };
  struct ActiveLease {
    Lease lease;
    LeaseState end_state = LeaseState::kReleased;  // where releasing leads
    int handout_attempts = 0;
    std::chrono::steady_clock::time_point requested;  // for latency metrics
  };
  struct PoolRuntime {
    PoolConfig config;
    std::deque<std::string> queue;  // leases waiting for a VM, FIFO
    // Consecutive VM boot failures, and until when new boots wait (exponential backoff, so a
    // broken image or host does not turn into a tight create/destroy loop).
    int failures = 0;
    std::chrono::steady_clock::time_point retry_after{};
    std::string last_failure;
  };

  // All *_locked methods require mu_.
  void transition_locked(ActiveLease& al, LeaseState to, std::string reason);
  void emit_locked(std::string type, const Lease& lease, std::string detail = {});
  void emit_vm_locked(std::string type, const Vm& vm, std::string detail = {});
  void schedule_locked(PoolRuntime& pool);
  void schedule_all_locked();
  Result<std::string> start_vm_locked(PoolRuntime& pool, const std::string& lease_id);
  void begin_handout_locked(Vm& vm, ActiveLease& al);
  void begin_release_locked(ActiveLease& al, LeaseState end_state, std::string reason);
  void destroy_vm_locked(Vm& vm, std::string reason);
  void finish_lease_locked(ActiveLease& al);
  void persist_vm_locked(const Vm& vm);
  Status validate_request_locked(const LeaseRequest& request, const PoolRuntime& pool, Seconds ttl);
  std::string new_id_locked(const char* prefix, int hex_digits);

  // Strand tasks.
  void boot_step(const std::string& vm_name, TimePoint deadline, bool create);
  void handout(const std::string& vm_name, const std::string& lease_id);
  void destroy(const std::string& vm_name);
  void on_event(const VmEvent& event);
  void vm_gone_locked(Vm& vm, const std::string& why);
  void boot_failed(const std::string& vm_name, std::string why, bool host_down);
  void record_phase(const std::string& vm_name, const char* phase,
                    std::chrono::steady_clock::time_point start);

  void arm_timer(boost::asio::steady_timer& timer, std::chrono::milliseconds period,
                 std::function<void()> fn);
  void recover();
  void track_op(int delta);

  EngineOptions options_;
  Hypervisor& hypervisor_;
  LeaseStore& store_;
  ImageResolver images_;
  const Clock& clock_;
  Metrics* metrics_;
  std::string host_name_;

  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  boost::asio::steady_timer reaper_timer_;
  boost::asio::steady_timer schedule_timer_;
  boost::asio::steady_timer reconcile_timer_;

  mutable std::mutex mu_;
  std::condition_variable changed_;  // any lease or event change
  CoreAllocator allocator_;
  std::map<std::string, PoolRuntime> pools_;
  std::map<std::string, Vm> vms_;
  std::map<std::string, ActiveLease> leases_;  // non-terminal leases only
  std::deque<Event> events_;
  uint64_t next_seq_ = 1;
  int ops_in_flight_ = 0;
  bool running_ = false;
  std::mt19937_64 rng_;
};

}  // namespace armhive
