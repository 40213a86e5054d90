#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/deadline_worker.h"
#include "base/metrics.h"
#include "base/thread_annotations.h"
#include "daemon/core/boot_image.h"
#include "daemon/core/clock.h"
#include "daemon/core/fleet.h"
#include "daemon/core/host_health.h"
#include "daemon/core/hypervisor.h"
#include "daemon/core/lease.h"
#include "daemon/core/lease_store.h"
#include "daemon/core/placement.h"
#include "daemon/core/pool_reload.h"
#include "daemon/core/pool_scheduler.h"
#include "daemon/core/reconciler.h"
#include "daemon/engine/engine_health.h"
#include "daemon/engine/lease_service.h"
#include "daemon/engine/persist_queue.h"
#include "daemon/engine/vm_agent_router.h"

namespace armhive {

struct EngineOptions {
  std::vector<PoolConfig> pools;
  PlacementStrategy strategy = PlacementStrategy::kPack;
  int threads = 4;  // worker threads per host
  std::chrono::milliseconds boot_timeout{std::chrono::minutes(3)};
  std::chrono::milliseconds agent_poll{std::chrono::milliseconds(250)};
  std::chrono::milliseconds agent_timeout{std::chrono::seconds(2)};
  // Bounds each read of a booting VM's SSH host keys (a guest-exec; asked again every
  // agent_poll until boot_timeout).
  std::chrono::milliseconds host_keys_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds handout_wait{std::chrono::seconds(10)};  // create_lease's warm wait
  std::chrono::milliseconds reaper_period{std::chrono::seconds(1)};
  std::chrono::milliseconds schedule_period{std::chrono::seconds(2)};  // retries waiting leases
  std::chrono::milliseconds reconcile_period{std::chrono::seconds(30)};
  // After a failed boot a pool waits retry_backoff × 2^(failures-1), at most max_retry_backoff;
  // a VM whose destroy failed is retried by reconcile passes on the same backoff.
  std::chrono::milliseconds retry_backoff{std::chrono::seconds(1)};
  std::chrono::milliseconds max_retry_backoff{std::chrono::minutes(1)};
  size_t event_buffer = 10000;
  // Each host is probed (a domain listing) every host_probe_period; a probe that misses
  // host_probe_timeout, or finds the connection gone, makes the host unreachable: its free VMs
  // leave the pools and its ready leases turn host_unreachable. Past unreachable_grace those
  // leases end as lost. A period of zero probes only when probe_hosts() is called.
  std::chrono::milliseconds host_probe_period{std::chrono::seconds(5)};
  std::chrono::milliseconds host_probe_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds unreachable_grace{std::chrono::minutes(5)};
  // Every usage_period each host's ready leases are sampled with one bulk statistics call
  // (VmMeter::vm_counters) for their usage (Lease::usage). Zero: only when sample_usage() is
  // called (the baseline at hand-out and the final sample before a destroy are taken anyway).
  std::chrono::milliseconds usage_period{std::chrono::seconds(10)};
};

// One libvirt host the engine drives: its hypervisor (borrowed, outlives the engine), its
// cores, how a catalogue image is found on it (local paths, or the host's shipped volumes) and
// the labels pools select it by.
struct EngineHost {
  std::string name;
  Hypervisor* hypervisor = nullptr;
  CoreAllocator cores;
  ImageResolver images;
  std::map<std::string, std::string> labels;
  std::string uri;  // the libvirt URI, shown in hosts() (empty: not shown)
};

// The lease engine: keeps pools warm, hands VMs to leases, enforces TTLs, recycles VMs, and
// converges libvirt to the database (which is the desired state).
//
// Hosts: the engine drives the hosts it is given (a fleet; one host is the usual case). A new
// VM's host is chosen by Fleet::place (daemon/core/fleet.h: the pool's host labels, the host's
// admin state, its image, spread across hosts); every later call for the VM goes to its host's
// hypervisor. Each host is listed and reconciled on its own: a host that cannot be listed holds
// only what would go to it, and its failures make only it degraded (database failures make
// every host degraded: nothing can be recorded). The set of hosts is fixed at construction.
//
// Ownership: owns its io_context and worker threads, the Fleet (one CoreAllocator per host) and
// all in-memory VM and lease state. Borrows the hypervisors, LeaseStore, Clock and Metrics
// (they must outlive it).
//
// Usage (lease_engine_usage.cc): a lease's usage starts from its VM's counters read at hand-out
// (what a warm VM used before is not the lease's), grows with the samples every usage_period
// (one VmMeter call per host for all its ready leases) and with a last sample just before its
// VM is destroyed, and is final once the lease ended (daemon/core/usage_meter.h). It is
// persisted with the lease; what each sample adds is counted in armhive_usage_*_total{pool,
// owner}.
//
// Metrics: the engine records only what it alone observes (hand-out and provisioning latency,
// VM failures, ended leases, usage); gauges of pools, leases and cores are derived from pools() and
// hosts() when /metrics is scraped.
//
// Threading: public methods are thread-safe. All state sits behind mu_, which is never held
// across a Hypervisor call, a LeaseStore call (writes are queued in PersistQueue and written
// after mu_ is released) or image resolution (pool images are resolved outside the lock and
// cached per pool). Lifecycle work on a VM (create, boot polling, hand-out, destroy) runs on
// that VM's strand, so those operations on one domain never overlap (QEMU's per-domain job
// lock), while different VMs proceed in parallel. A VM's strand is on its host's io_context,
// run by `threads` workers of that host alone, and the timed reconcile pass of a host runs
// there too (never two queued): a host whose calls hang holds only its own workers. Timers and
// hypervisor events run on the engine's io_context (two workers). Each host's probe runs on a
// thread of its own and calls libvirt through the host's DeadlineWorker (HostIo::probe), so
// it learns within host_probe_timeout that a host hangs; stop() waits for a probe in progress
// for at most that long.
// exec() and console() run on the caller's thread and MAY overlap the VM's strand: exec is a
// guest-agent command (libvirt takes its agent job, separate from the domain job that lifecycle
// calls take, and every agent call has a timeout) and console() reads the console log file, so
// neither contends for the domain job; if the VM is destroyed meanwhile they fail with an
// error, which is what their caller must see. They are allowed only on a ready lease, i.e.
// after the hand-out's agent calls finished. steady_timers drive TTL expiry, retries of
// waiting leases and periodic reconciliation. Hypervisor events arrive on the libvirt
// event-loop thread and are only posted onto the io_context, through a gate the destructor
// closes, so an event already being dispatched cannot reach a destroyed engine.
//
// Failures: every failed hypervisor or persistence call is counted in
// armhive_engine_errors_total{op, code, host} and shown in hosts() as degraded with the last error;
// failed writes are retried (PersistQueue), failed destroys are retried by reconcile passes
// with backoff, and an unreadable database makes start() fail before any VM is touched.
class LeaseEngine final : public LeaseService {
 public:
  LeaseEngine(EngineOptions options, Hypervisor& hypervisor, LeaseStore& store,
              CoreAllocator allocator, ImageResolver images, const Clock& clock,
              Metrics* metrics = nullptr, std::string host_name = "localhost");
  // A fleet: `hosts` in order (the first takes records from before hosts were recorded). An
  // invalid or repeated host name, or none, makes start() fail.
  LeaseEngine(EngineOptions options, std::vector<EngineHost> hosts, LeaseStore& store,
              const Clock& clock, Metrics* metrics = nullptr);
  ~LeaseEngine() override;
  LeaseEngine(const LeaseEngine&) = delete;
  LeaseEngine& operator=(const LeaseEngine&) = delete;

  // Recovers from the database and libvirt through the reconciler (adopts live VMs, re-derives
  // core allocations, fails leases whose VM is gone), then starts the workers and timers.
  // Fails, touching no VM, when the database cannot be read. Domains and files nobody wants
  // are destroyed only by a later reconcile() that still finds them unwanted.
  Status start();
  // Stops timers and workers. VMs keep running and are re-adopted by the next start().
  void stop();
  // Applies the pool changes of a configuration reload (daemon/core/pool_reload.h) and
  // schedules every pool under its new limits. An added pool no host can hold one VM of is
  // not added: each such refusal is a line of the result. Any thread.
  std::vector<std::string> reload_pools(const PoolReload& plan);
  // OK when the engine's event loop runs a posted no-op within `deadline`; kUnavailable when
  // it is stopped or its workers are all stuck (what a service watchdog asks). Any thread.
  [[nodiscard]] Status ping(std::chrono::milliseconds deadline);

  // LeaseService
  Result<Lease> create_lease(const LeaseRequest& request) override;
  Result<Lease> get_lease(const std::string& id) override;
  Result<std::vector<Lease>> list_leases(const LeaseFilter& filter) override;
  Result<std::map<LeaseState, size_t>> count_leases(const LeaseFilter& filter) override;
  Result<Lease> wait_lease(const std::string& id, std::chrono::milliseconds timeout) override;
  Result<Lease> renew_lease(const std::string& id, Seconds ttl) override;
  Result<Lease> release_lease(const std::string& id) override;
  // From the store (summed in SQL): the figures of live leases as of their last sample.
  Result<std::vector<UsageRow>> usage(const UsageQuery& q) override;
  Result<GuestExecResult> exec(const std::string& lease_id,
                               const GuestExecRequest& request) override;
  // On the caller's thread like exec(); the sink is also cancelled once the lease is no
  // longer ready (released, expired, failed), checked about once a second.
  Result<GuestExecResult> exec_stream(const std::string& lease_id, const GuestExecRequest& request,
                                      ExecSink& sink) override;
  Result<std::string> console(const std::string& lease_id, size_t max_bytes) override;
  // Off the strand, as exec() (lease_engine_files.cc).
  Result<GuestFileTransfer> put_file(const std::string& lease_id, const GuestFilePut& put,
                                     ByteSource& source) override;
  Result<GuestFileTransfer> get_file(const std::string& lease_id, const std::string& path,
                                     ByteSink& sink) override;
  std::vector<PoolStatus> pools() override;
  std::vector<HostView> hosts() override;
  std::vector<Event> events_since(uint64_t after, std::chrono::milliseconds timeout) override;
  void record_event(const std::string& lease_id, std::string type, std::string detail) override;
  void record_pool_event(const std::string& pool, std::string type, std::string detail) override;
  void set_host_health(std::vector<HealthResult> latest) override;
  // Saved through LeaseStore::put_host_admin before it takes effect (a failed write changes
  // nothing); start() restores it. The next scheduling pass (run at once) retires the host's
  // free VMs (pool_scheduler.h) and holds waiting leases; undrained, the pools refill.
  Status set_host_admin(const std::string& host, HostHealthTracker::Admin admin) override;

  // Drives one more host from now on (POST /v1/hosts): listed at once on its own workers, then
  // placed on like the others. kConflict for a name taken, kInvalidArgument for a bad name or
  // no hypervisor. The hypervisor is borrowed as the constructor's are.
  Status add_host(EngineHost host);
  // Stops driving a host that holds no VM and no live lease: kNotFound for an unknown host;
  // kConflict naming what is still there ("drain it first") or for the first host (it holds
  // the records from before hosts were recorded). Its workers and probe stop before it
  // returns; its drain state is forgotten. The hypervisor may go after it returns, unless a
  // call of its probe is still stuck in it (see HostIo: the engine no longer calls it).
  Status remove_host(const std::string& name);

  // The guest agent of whichever host a VM runs on, for callers that know the VM by name only
  // (benchmarks, startup commands): a VM this engine does not manage is kNotFound.
  GuestAgent& guest_agent() { return agent_router_; }

  // Runs one TTL sweep now (tests move a ManualClock instead of sleeping).
  void expire_due_leases();
  // One reconcile pass against libvirt now (also run every reconcile_period). Returns an error
  // when a snapshot could not be taken (and then changes nothing).
  Status reconcile();
  // One scheduling pass now (also run every schedule_period): refreshes pool images, retries
  // queued writes, hands out and boots what the pools need.
  void schedule();
  // Probes every host now (also each host every host_probe_period, on its own thread), waiting
  // at most host_probe_timeout per host. Returns the hosts found unreachable.
  std::vector<std::string> probe_hosts();
  // Samples every host's ready leases now, one host after another on this thread (also each
  // host every usage_period, on its own workers).
  void sample_usage();
  // Blocks until no VM operation is queued or running (tests).
  bool wait_idle(std::chrono::milliseconds timeout);

  // The VM behind a ready lease, for benchmarks and exec.
  using LeaseVm = LeasedVm;
  Result<LeaseVm> lease_vm(const std::string& lease_id);

 private:
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  struct Vm {
    VmRecord record;
    Placement placement;
    std::shared_ptr<Strand> strand;
    BootImage image;         // resolved when the VM was started
    bool cancelled = false;  // its boot must stop (lease cancelled, crash, shutdown)
    std::string failure;     // why, when cancelled by a crash
    TimePoint boot_started;
    std::string boot_address;  // the address found while booting, kept between polls
    std::chrono::steady_clock::time_point phase_mark;  // end of the last recorded boot phase
    std::set<std::string> phases_seen;
    int destroy_failures = 0;
    TimePoint destroy_retry_at{};  // when a failed destroy may be retried
    bool destroy_queued = false;   // a destroy task is posted or running
  };
  struct ActiveLease {
    Lease lease;
    LeaseState end_state = LeaseState::kReleased;  // where releasing leads
    int handout_attempts = 0;
    std::chrono::steady_clock::time_point requested;  // for latency metrics
  };
  struct PoolRuntime {
    PoolConfig config;
    // Leases waiting for a VM, FIFO. Entries are live leases: finish_lease_locked() erases an
    // ended one at once (schedule_locked() still drops any that is not, defensively).
    std::deque<std::string> queue;
    // Consecutive VM boot failures on each host, and until when new boots there wait
    // (exponential backoff, so a broken image or host does not turn into a tight
    // create/destroy loop; per host, so a broken host does not hold the pool's others).
    struct Backoff {
      int failures = 0;
      TimePoint retry_after{};
      std::string last_failure;
    };
    std::map<std::string, Backoff> backoff;
    // The pool's image on each host, resolved outside the lock by refresh_images() (a host
    // not in the map: not resolved yet).
    std::map<std::string, Result<BootImage>> images;
    // Gone from the configuration (reload_pools): takes no new lease, keeps no warm VM, and
    // leaves pools_ once no VM or lease of it remains (drop_removed_pools_locked).
    bool removed = false;
    // A reload lowered min_warm or removed the pool: its surplus free VMs are retired until
    // none is left (schedule_locked clears it then).
    bool shrinking = false;
    // min_warm = "auto": the pool's lease requests and boot times (seeded from the lease
    // history at start), and the target the last scheduling pass computed from them.
    DemandModel demand;
    std::optional<WarmTarget> warm_target;
  };
  // A host's calls, found by host_io() under hosts_mu_ and used outside any lock (held by
  // shared_ptr: a host removed meanwhile stays alive until the engine is destroyed, in
  // retired_). Each host has its own io_context and `threads` workers: its VMs' strands and its
  // reconcile passes run there, so a host whose calls hang holds only its own threads and never
  // delays the others' boots and hand-outs (issue 13 item 5).
  struct HostIo {
    std::string name;
    Hypervisor* hypervisor = nullptr;
    ImageResolver images;
    std::string uri;
    std::unique_ptr<EngineHealth> health;  // its calls' failures (thread-safe)
    std::unique_ptr<boost::asio::io_context> io;
    std::unique_ptr<std::mutex> reconcile_mu;  // one pass at a time (held across libvirt)
    // A timed pass is queued or running: the timer queues no second one behind a hung host.
    std::unique_ptr<std::atomic<bool>> reconcile_queued;
    // One usage sample of the host at a time, held across its libvirt statistics call and the
    // applying of what it read (usage_mu, then mu_; never the other way round), so a VM's
    // samples are applied in the order they were read: a periodic sample read before the
    // final one and applied after it would look like counters going backwards. Never held
    // with mu_.
    std::unique_ptr<std::mutex> usage_mu;
    std::unique_ptr<std::atomic<bool>> usage_queued;  // a timed sample is queued or running
    // Runs the host's probe with a deadline: a hung libvirtd holds this thread, not the caller.
    std::unique_ptr<DeadlineWorker> probe;
    // Its io workers and probe loop, started by start_host() and joined by stop_host() (by the
    // thread that starts or stops the engine, or removes the host).
    std::unique_ptr<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
    std::vector<std::thread> threads;
    std::atomic<bool> stopping{false};  // its probe loop ends (the host is removed)
  };
  // What the engine knows of a host's domains (under mu_).
  struct HostSync {
    // A complete libvirt listing has been applied: until then the cores of its running
    // domains are unknown, so no VM is started there.
    bool listed = false;
    ReconcileMemory memory;
    int failed_probes = 0;  // in a row
  };
  // Hypervisor events go through this gate: the destructor closes it (under its mutex) so a
  // handler copy that is already running cannot post to a destroyed io_context.
  struct EventGate {
    std::mutex mu;
    LeaseEngine* engine = nullptr;
  };

  // All *_locked methods require mu_.
  void transition_locked(ActiveLease& al, LeaseState to, std::string reason) REQUIRES(mu_);
  void append_event_locked(Event e) REQUIRES(mu_);
  void emit_locked(std::string type, const Lease& lease, std::string detail = {}) REQUIRES(mu_);
  void emit_vm_locked(std::string type, const Vm& vm, std::string detail = {}) REQUIRES(mu_);
  // Scheduling: pool_snapshot_locked() feeds plan_pool() (daemon/core/pool_scheduler.h);
  // schedule_locked() carries its plan out and queue_slots_locked() shows the same plan's slots.
  void schedule_locked(PoolRuntime& pool) REQUIRES(mu_);
  void size_auto_pool_locked(PoolRuntime& pool) REQUIRES(mu_);
  void seed_demand() EXCLUDES(mu_);
  void schedule_all_locked() REQUIRES(mu_);
  // Erases removed pools that no VM or live lease names any more.
  void drop_removed_pools_locked() REQUIRES(mu_);
  // Whether a queue entry is a lease that still waits (not ended, not releasing).
  bool queued_live_locked(const std::string& id) const REQUIRES(mu_);
  // The live leases of the pool's queue, in order.
  std::vector<std::string> live_queue_locked(const PoolRuntime& pool) const REQUIRES(mu_);
  // The first `max` of them; the ended ones among the entries it passes leave the queue.
  std::vector<std::string> take_live_head_locked(PoolRuntime& pool, size_t max) REQUIRES(mu_);
  // Everything plan_pool() needs but the queue, which each caller fills as far as it needs.
  PoolSnapshot pool_snapshot_locked(const PoolRuntime& pool) const REQUIRES(mu_);
  std::string wait_text_locked(const PoolRuntime& pool, QueueReason reason) const REQUIRES(mu_);
  void set_waiting_locked(ActiveLease& al, const std::string& why) REQUIRES(mu_);
  // The queue slot of every waiting lease of the pool, by lease id, and a copy of a live lease
  // with its slot filled in.
  std::map<std::string, QueueSlot> queue_slots_locked(const PoolRuntime& pool) const REQUIRES(mu_);
  Lease with_queue_locked(const ActiveLease& al) const REQUIRES(mu_);
  Result<std::string> start_vm_locked(PoolRuntime& pool, const std::string& lease_id) REQUIRES(mu_);
  void begin_handout_locked(Vm& vm, ActiveLease& al) REQUIRES(mu_);
  void begin_release_locked(ActiveLease& al, LeaseState end_state, std::string reason)
      REQUIRES(mu_);
  void destroy_vm_locked(Vm& vm, std::string reason) REQUIRES(mu_);
  void post_destroy_locked(Vm& vm) REQUIRES(mu_);
  void finish_lease_locked(ActiveLease& al) REQUIRES(mu_);
  void expire_due_locked() REQUIRES(mu_);
  // Host reachability (lease_engine_hosts.cc). probe_host() runs one probe and applies it.
  bool probe_host(const std::string& host);
  void probe_loop(const std::string& host);
  // The host stopped answering: its ready leases turn host_unreachable, leases still being
  // provisioned there wait for a VM elsewhere, its free VMs leave the pools (not destroyed).
  void host_unreachable_locked(const std::string& host, const std::string& why) REQUIRES(mu_);
  // The host answers: its host_unreachable leases are ready again and a reconcile pass of it
  // is queued (adopt or destroy by the usual rules).
  void host_back_locked(const std::string& host) REQUIRES(mu_);
  // Leases of hosts unreachable for longer than the grace period end as lost; their VMs and
  // the host's free VMs are destroyed (once the host answers).
  void lose_past_grace_locked() REQUIRES(mu_);
  bool host_unreachable_now_locked(const std::string& host) const REQUIRES(mu_);
  // The ids of the live leases on `host` (in `state`, if given).
  std::vector<std::string> leases_on_locked(const std::string& host,
                                            std::optional<LeaseState> state) const REQUIRES(mu_);
  // Queues one reconcile pass of the host on its io (none if one is queued or running).
  void queue_reconcile(const std::string& host);
  // Usage (lease_engine_usage.cc). queue_usage() posts one sample of the host to its io (none
  // if one is queued or running); sample_host_usage() reads the counters of the host's ready
  // leases in one call and applies them; final_usage_sample() is the last sample of a VM
  // whose lease is being released, taken on its strand before it is destroyed.
  void queue_usage(const std::string& host);
  void sample_host_usage(const std::string& host);
  void final_usage_sample(HostIo& io, const std::string& vm_name);
  // The counters of one VM (a hand-out's baseline); nullopt when they cannot be read (the
  // failure is counted) or it does not run.
  std::optional<UsageCounters> vm_counters_of(HostIo& io, const std::string& vm_name);
  // Applies counters to the usage of the leases their VMs are handed to (ready or releasing)
  // and queues the leases' writes.
  void apply_counters_locked(const std::vector<VmCounters>& counters) REQUIRES(mu_);
  void persist_vm_locked(const Vm& vm) REQUIRES(mu_);
  // Whether each host the pool selects may take one of its boots now, and if not the first
  // reason (in this order). pool_snapshot_locked() counts boot slots from it and
  // start_vm_locked() holds the same hosts, so the plan and the placement never disagree.
  enum class BootStage { kUnlisted, kNotTaking, kNoImage, kBackingOff, kFull, kReady };
  struct BootHost {
    BootStage stage = BootStage::kReady;
    std::string hold;  // why not, for Fleet::place's message
    int boots_left = 0;
    TimePoint retry_after{};  // kBackingOff
  };
  std::map<std::string, BootHost> boot_hosts_locked(const PoolRuntime& pool, TimePoint now) const
      REQUIRES(mu_);
  // The pool's VMs booting, by host.
  std::map<std::string, int> starting_on_locked(const std::string& pool) const REQUIRES(mu_);
  // The pool's view of its hosts for plan_pool(): the hosts its labels select.
  std::vector<std::string> pool_hosts_locked(const PoolConfig& cfg) const REQUIRES(mu_);
  // Why the pool's image cannot be used: the first selected host whose copy failed ("image 'x'
  // unavailable: ..."), else "image 'x' not resolved yet" if a host has not resolved it; ok
  // when every selected host has it.
  Status pool_image_error_locked(const PoolRuntime& pool) const REQUIRES(mu_);
  // Whether some host the pool selects can ever hold its VMs (else the first host's reason).
  Status pool_fits_locked(const PoolConfig& cfg) const REQUIRES(mu_);
  bool host_takes_vms_locked(const std::string& host) const REQUIRES(mu_);
  HostView host_view_locked(const std::string& name, const EngineHealth::View& calls,
                            const EngineHealth::View& store_health) const REQUIRES(mu_);
  // The host of a record or lease ("" is the first host: from before hosts were recorded);
  // nullptr for a host this engine does not drive (never added, or removed).
  std::shared_ptr<HostIo> host_io(const std::string& host) const EXCLUDES(hosts_mu_);
  // The host a record or lease names ("" is the first host). default_host_ never changes.
  const std::string& host_name(const std::string& host) const {
    return host.empty() ? default_host_ : host;
  }
  // The hosts now, in order (a copy: added and removed ones change it).
  std::vector<std::string> host_names() const EXCLUDES(mu_);
  std::shared_ptr<HostIo> make_host_io(EngineHost& host);
  void set_event_handler(HostIo& io);
  // Starts the host's io workers and its probe loop; stop_host() ends and joins them.
  void start_host(HostIo& io);
  void stop_host(HostIo& io);
  Hypervisor* hypervisor_of(const std::string& host) const;
  // The agent of the host VM `vm_name` is on (guest_agent()'s route).
  Result<GuestAgent*> vm_agent(std::string_view vm_name) EXCLUDES(mu_);
  Status validate_request_locked(const LeaseRequest& request, const PoolRuntime& pool, Seconds ttl)
      REQUIRES(mu_);
  std::string new_id_locked(const char* prefix, int hex_digits) REQUIRES(mu_);
  std::chrono::milliseconds backoff(int failures) const;

  // Strand tasks.
  void boot_step(const std::string& vm_name, TimePoint deadline, bool create);
  void handout(const std::string& vm_name, const std::string& lease_id);
  void destroy(const std::string& vm_name);
  void on_event(const VmEvent& event);
  void vm_gone_locked(Vm& vm, const std::string& why) REQUIRES(mu_);
  void boot_failed(const std::string& vm_name, std::string why, bool host_down);
  void record_phase(const std::string& vm_name, const char* phase,
                    std::chrono::steady_clock::time_point start);

  void arm_timer(boost::asio::steady_timer& timer, std::chrono::milliseconds period,
                 std::function<void()> fn);
  void refresh_images();
  Status recover();
  // Carries out a reconcile plan (lease_engine_reconcile.cc).
  void apply_plan_locked(const std::string& host, const ReconcilePlan& plan,
                         const std::vector<VmInfo>& domains, std::vector<std::string>& to_delete)
      REQUIRES(mu_);
  void adopt_locked(const std::string& host, const VmRecord& record, const VmInfo& domain)
      REQUIRES(mu_);
  // One host's reconcile pass (reconcile() runs it for every host; the timer posts it to the
  // host's io).
  Status reconcile_host(const std::string& host);
  // A new strand for a VM on `host` (its host's io; the engine's for a host not driven here).
  std::shared_ptr<Strand> strand_for(const std::string& host);
  WantedSnapshot wanted_locked() const REQUIRES(mu_);
  void track_op(int delta);
  // Writes queued persistence; call after releasing mu_.
  void flush();
  // Lease lookup through memory, unwritten writes, then the store (never under mu_).
  Result<std::optional<Lease>> find_lease(const std::string& id);

  EngineOptions options_;
  LeaseStore& store_;
  const Clock& clock_;
  Metrics* metrics_;
  VmAgentRouter agent_router_;  // guest_agent(): routes by the VM's host (vm_agent() under mu_)
  // A leaf lock: nothing else is taken while it is held (mu_ may be held when taking it).
  mutable Mutex hosts_mu_;
  std::map<std::string, std::shared_ptr<HostIo>> host_io_ GUARDED_BY(hosts_mu_);
  std::vector<std::shared_ptr<HostIo>> retired_ GUARDED_BY(hosts_mu_);  // removed hosts
  std::string default_host_;  // the first host given; set by the constructor, never changed
  Status setup_error_;        // a bad host list, reported by start()
  EngineHealth health_;       // the database's failures (every host shows them)
  PersistQueue persist_;
  std::shared_ptr<EventGate> gate_;

  // Timers, hypervisor events and what is not a host's run here; VM work on its host's io.
  boost::asio::io_context io_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  boost::asio::steady_timer reaper_timer_;
  boost::asio::steady_timer schedule_timer_;
  boost::asio::steady_timer reconcile_timer_;
  boost::asio::steady_timer usage_timer_;

  mutable Mutex mu_;
  std::condition_variable_any changed_;  // any lease or event change
  Fleet fleet_ GUARDED_BY(mu_);
  // The hosts of fleet_, in order (the first is the default host), each with its sync state.
  // A host is here only while host_io() finds it: added after its HostIo, removed before.
  std::vector<std::string> host_order_ GUARDED_BY(mu_);
  std::map<std::string, HostSync> host_sync_ GUARDED_BY(mu_);
  std::map<std::string, PoolRuntime> pools_ GUARDED_BY(mu_);
  std::map<std::string, Vm> vms_ GUARDED_BY(mu_);
  std::map<std::string, ActiveLease> leases_ GUARDED_BY(mu_);  // non-terminal leases only
  // Records read at start-up that were not adopted (their domain is suspect or could not be
  // adopted yet): the reconciler still sees them as wanted-but-unadopted.
  std::map<std::string, VmRecord> unadopted_ GUARDED_BY(mu_);
  std::deque<Event> events_ GUARDED_BY(mu_);
  std::vector<HealthResult> host_health_ GUARDED_BY(mu_);
  // Each host's admin axis (drain / maintenance) and link axis (unreachable, from its probes)
  // are its tracker in fleet_; HostIo::health counts its calls' failures (degraded).
  std::mutex admin_mu_;  // one set_host_admin at a time (held across the store write, never in mu_)
  uint64_t next_seq_ GUARDED_BY(mu_) = 1;
  int ops_in_flight_ GUARDED_BY(mu_) = 0;
  bool running_ GUARDED_BY(mu_) = false;
  std::mt19937_64 rng_ GUARDED_BY(mu_);
};

}  // namespace armhive
