// LeaseEngine: the public operations (create, renew, release, wait, events) and start/stop.
// The decisions are pure and live in daemon/core (pool_scheduler.h: hand-out, boots, refill;
// reconciler.h: recovery; lease_rules.h: TTL, expiry, renewal; retry_backoff.h); these files
// take snapshots under the lock, carry the plans out and persist after it. Over ~600 lines for
// now: the fleet's host registry (runtime add/remove) is still to come, and splitting before
// that would split it twice.
#include "daemon/engine/lease_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <functional>
#include <future>

#include "daemon/core/lease_rules.h"

// The lease engine is one class in three files: this one (construction, timers, state
// transitions and the LeaseService API), lease_engine_vm.cc (scheduling and the per-VM strand
// work) and lease_engine_reconcile.cc (start-up recovery and reconcile passes).

namespace armhive {
namespace {

std::vector<EngineHost> one_host(std::string name, Hypervisor& hypervisor, CoreAllocator cores,
                                 ImageResolver images) {
  std::vector<EngineHost> hosts;
  hosts.push_back({std::move(name), &hypervisor, std::move(cores), std::move(images), {}});
  return hosts;
}

}  // namespace

LeaseEngine::LeaseEngine(EngineOptions options, Hypervisor& hypervisor, LeaseStore& store,
                         CoreAllocator allocator, ImageResolver images, const Clock& clock,
                         Metrics* metrics, std::string host_name)
    : LeaseEngine(
          std::move(options),
          one_host(std::move(host_name), hypervisor, std::move(allocator), std::move(images)),
          store, clock, metrics) {}

LeaseEngine::LeaseEngine(EngineOptions options, std::vector<EngineHost> hosts, LeaseStore& store,
                         const Clock& clock, Metrics* metrics)
    : options_(std::move(options)),
      store_(store),
      clock_(clock),
      metrics_(metrics),
      agent_router_([this](std::string_view vm) { return vm_agent(vm); }),
      health_(clock, metrics),
      persist_(store, clock, health_),
      gate_(std::make_shared<EventGate>()),
      reaper_timer_(io_),
      schedule_timer_(io_),
      reconcile_timer_(io_),
      usage_timer_(io_),
      rng_(std::random_device{}()) {
  MutexLock lock(mu_);  // nobody else sees the engine yet; taken for the analysis
  if (hosts.empty()) setup_error_ = invalid_argument("hosts", "the engine needs at least one host");
  if (!hosts.empty()) default_host_ = hosts.front().name;
  for (EngineHost& h : hosts) {
    Status added = h.hypervisor == nullptr
                       ? invalid_argument("hypervisor", "host " + h.name + " has no hypervisor")
                       : fleet_.add_host({h.name, h.labels}, std::move(h.cores), clock.now());
    if (!added.is_ok()) {
      if (setup_error_.is_ok()) setup_error_ = added.annotate("host '" + h.name + "'");
      continue;
    }
    std::shared_ptr<HostIo> io = make_host_io(h);
    {
      MutexLock hosts_lock(hosts_mu_);
      host_io_[h.name] = io;
    }
    host_order_.push_back(h.name);
    host_sync_[h.name];
  }
  for (const PoolConfig& p : options_.pools) pools_[p.name] = PoolRuntime{p, {}};
  if (metrics_) {
    metrics_->describe_histogram("armhive_handout_seconds",
                                 "Lease request to ready, by pool and path (warm or cold)");
    metrics_->describe_histogram("armhive_boot_phase_seconds",
                                 "Cold boot phases: create (overlay + define + start), boot (to "
                                 "the guest agent answering), readiness (to an address)");
    metrics_->describe_histogram("armhive_provision_seconds",
                                 "VM create to guest agent answering and address known");
    metrics_->describe_counter("armhive_leases_ended_total", "Leases ended, by final state");
    metrics_->describe_counter("armhive_vm_failures_total", "VMs that failed to boot or crashed");
    // Labels pool (from the configuration) and owner (token names: a set the admin makes).
    metrics_->describe_counter("armhive_usage_cpu_seconds_total",
                               "CPU time leased VMs used (vCPUs and QEMU), by pool and owner");
    metrics_->describe_counter("armhive_usage_wall_seconds_total",
                               "Time leased VMs were measured over, by pool and owner");
    metrics_->describe_counter("armhive_usage_disk_write_bytes_total",
                               "Bytes leased VMs wrote to their disks, by pool and owner");
    metrics_->describe_counter("armhive_usage_net_rx_bytes_total",
                               "Bytes leased VMs received, by pool and owner");
    metrics_->describe_counter("armhive_usage_net_tx_bytes_total",
                               "Bytes leased VMs sent, by pool and owner");
  }
  gate_->engine = this;
  for (const std::string& name : host_order_) set_event_handler(*host_io(name));
}

std::shared_ptr<LeaseEngine::HostIo> LeaseEngine::make_host_io(EngineHost& h) {
  auto io = std::make_shared<HostIo>();
  io->name = h.name;
  io->hypervisor = h.hypervisor;
  io->images = std::move(h.images);
  io->uri = h.uri;
  io->health = std::make_unique<EngineHealth>(clock_, metrics_, h.name);
  io->io = std::make_unique<boost::asio::io_context>();
  io->reconcile_mu = std::make_unique<std::mutex>();
  io->reconcile_queued = std::make_unique<std::atomic<bool>>(false);
  io->usage_mu = std::make_unique<std::mutex>();
  io->usage_queued = std::make_unique<std::atomic<bool>>(false);
  io->probe = std::make_unique<DeadlineWorker>(h.name);
  return io;
}

void LeaseEngine::set_event_handler(HostIo& io) {
  io.hypervisor->set_event_handler([gate = gate_](const VmEvent& e) {
    // Runs on the libvirt event-loop thread: copy and hand over, never block here. The
    // gate's mutex is held while posting so the destructor cannot complete in between.
    std::lock_guard gate_lock(gate->mu);
    LeaseEngine* engine = gate->engine;
    if (engine == nullptr) return;
    boost::asio::post(engine->io_, [engine, e] {
      engine->on_event(e);
      engine->flush();
    });
  });
}

void LeaseEngine::start_host(HostIo& io) {
  io.stopping = false;
  io.work =
      std::make_unique<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
          boost::asio::make_work_guard(*io.io));
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    io.threads.emplace_back([ctx = io.io.get()] { ctx->run(); });
  }
  if (options_.host_probe_period.count() > 0) {
    io.threads.emplace_back([this, host = io.name] { probe_loop(host); });
  }
}

void LeaseEngine::stop_host(HostIo& io) {
  io.stopping = true;
  changed_.notify_all();  // its probe loop waits on it
  io.work.reset();
  io.io->stop();
  for (std::thread& t : io.threads) t.join();
  io.threads.clear();
}

std::vector<std::string> LeaseEngine::host_names() const {
  MutexLock lock(mu_);
  return host_order_;
}

std::shared_ptr<LeaseEngine::HostIo> LeaseEngine::host_io(const std::string& host) const {
  MutexLock lock(hosts_mu_);
  auto it = host_io_.find(host_name(host));
  return it == host_io_.end() ? nullptr : it->second;
}

std::shared_ptr<LeaseEngine::Strand> LeaseEngine::strand_for(const std::string& host) {
  std::shared_ptr<HostIo> io = host_io(host);
  return std::make_shared<Strand>(io == nullptr ? io_.get_executor() : io->io->get_executor());
}

Result<GuestAgent*> LeaseEngine::vm_agent(std::string_view vm_name) {
  std::string host;
  {
    MutexLock lock(mu_);
    auto it = vms_.find(std::string(vm_name));
    if (it == vms_.end()) {
      return not_found("VM " + std::string(vm_name) + " is not one of this armhived's", "vm");
    }
    host = it->second.record.host;
  }
  Hypervisor* hv = hypervisor_of(host);
  if (hv == nullptr) return not_found("VM " + std::string(vm_name) + " is on no host driven here");
  return static_cast<GuestAgent*>(hv);
}

Hypervisor* LeaseEngine::hypervisor_of(const std::string& host) const {
  std::shared_ptr<HostIo> io = host_io(host);
  return io == nullptr ? nullptr : io->hypervisor;
}

LeaseEngine::~LeaseEngine() {
  {
    std::lock_guard lock(gate_->mu);
    gate_->engine = nullptr;
  }
  stop();
  // The hypervisors outlive us; they must not keep our handler (the gate makes a late call
  // harmless either way).
  std::vector<std::shared_ptr<HostIo>> hosts;
  {
    MutexLock hosts_lock(hosts_mu_);
    for (const auto& [name, io] : host_io_) hosts.push_back(io);
  }
  for (const auto& io : hosts) io->hypervisor->set_event_handler([](const VmEvent&) {});
}

Status LeaseEngine::start() {
  if (!setup_error_.is_ok()) return setup_error_;
  {
    MutexLock lock(mu_);
    for (const auto& [name, pool] : pools_) {
      Status fit = pool_fits_locked(pool.config);
      if (!fit.is_ok()) return fit.annotate("pool " + name);
    }
  }
  // The admin's drain outlives a restart: restored before anything is scheduled.
  auto admin = store_.host_admin();
  if (!admin.is_ok()) {
    health_.failed("store.host_admin", admin.status());
    return admin.status().annotate("reading the hosts' drain states");
  }
  for (const auto& [host, state] : *admin) {
    MutexLock lock(mu_);
    HostHealthTracker* tracker = fleet_.health(host);
    if (tracker == nullptr) continue;  // a host no longer configured
    tracker->set_admin(clock_.now(), state);
    spdlog::info("host {}: {} (kept from before the restart)", host, to_string(state));
  }
  refresh_images();
  ARMHIVE_RETURN_IF_ERROR(recover());
  seed_demand();
  flush();
  work_.push_back(boost::asio::make_work_guard(io_));
  {
    MutexLock lock(mu_);
    running_ = true;
    schedule_all_locked();
  }
  flush();
  // The engine's io runs timers and events (their work is short: two threads); each host's
  // runs its VMs' work.
  for (int i = 0; i < std::clamp(options_.threads, 1, 2); ++i) {
    threads_.emplace_back([this] { io_.run(); });
  }
  for (const std::string& host : host_names()) {
    if (std::shared_ptr<HostIo> io = host_io(host)) start_host(*io);
  }
  arm_timer(reaper_timer_, options_.reaper_period, [this] { expire_due_leases(); });
  arm_timer(schedule_timer_, options_.schedule_period, [this] { schedule(); });
  arm_timer(reconcile_timer_, options_.reconcile_period, [this] {
    for (const std::string& host : host_names()) queue_reconcile(host);
  });
  if (options_.usage_period.count() > 0) {
    arm_timer(usage_timer_, options_.usage_period, [this] {
      for (const std::string& host : host_names()) queue_usage(host);
    });
  }
  return Status::ok();
}

// Each host's pass on its own io, and none queued behind one still running (a hung host).
void LeaseEngine::queue_reconcile(const std::string& host) {
  std::shared_ptr<HostIo> io = host_io(host);
  if (io == nullptr || io->reconcile_queued->exchange(true)) return;
  // A weak reference: the handler sits in the HostIo's own io_context, and a strong one would
  // keep both alive for ever when the io stops before it runs (ASan: a leak at shutdown).
  boost::asio::post(*io->io, [this, host, weak = std::weak_ptr<HostIo>(io)] {
    Status s = reconcile_host(host);
    if (std::shared_ptr<HostIo> alive = weak.lock()) alive->reconcile_queued->store(false);
    if (!s.is_ok()) spdlog::warn("reconcile: {}", s.to_string());
    flush();
  });
}

Status LeaseEngine::ping(std::chrono::milliseconds deadline) {
  {
    MutexLock lock(mu_);
    if (!running_) return unavailable("the lease engine is not running", "engine");
  }
  // Shared with the posted task: it may run after this call has given up.
  auto ran = std::make_shared<std::promise<void>>();
  std::future<void> done = ran->get_future();
  boost::asio::post(io_, [ran] { ran->set_value(); });
  if (done.wait_for(deadline) != std::future_status::ready) {
    return unavailable("the lease engine's event loop did not run a task within " +
                           std::to_string(deadline.count()) + " ms",
                       "engine");
  }
  return Status::ok();
}

void LeaseEngine::stop() {
  {
    MutexLock lock(mu_);
    if (!running_ && threads_.empty()) return;
    running_ = false;
  }
  changed_.notify_all();
  work_.clear();
  io_.stop();
  std::vector<std::shared_ptr<HostIo>> hosts;
  {
    MutexLock hosts_lock(hosts_mu_);
    for (const auto& [name, io] : host_io_) hosts.push_back(io);
  }
  for (const std::shared_ptr<HostIo>& io : hosts) io->io->stop();
  for (const std::shared_ptr<HostIo>& io : hosts) stop_host(*io);
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  // Only now, with no thread running io_: a timer's handler re-arms its timer on whichever
  // thread ran it, so a cancel posted to io_ raced with that re-arm on another thread (TSan saw
  // it in the fault suite). The cancelled waits complete with operation_aborted on the next run.
  reaper_timer_.cancel();
  schedule_timer_.cancel();
  reconcile_timer_.cancel();
  usage_timer_.cancel();
  // A last attempt at queued writes, backoff or not; what still fails is redone by the next
  // start()'s recovery from libvirt.
  Status s = persist_.flush(/*force=*/true);
  if (!s.is_ok()) spdlog::warn("stop: writes not saved: {}", s.to_string());
}

void LeaseEngine::arm_timer(boost::asio::steady_timer& timer, std::chrono::milliseconds period,
                            std::function<void()> fn) {
  timer.expires_after(period);
  timer.async_wait([this, &timer, period, fn](const boost::system::error_code& ec) {
    if (ec) return;
    {
      MutexLock lock(mu_);
      if (!running_) return;
    }
    fn();
    flush();
    arm_timer(timer, period, fn);
  });
}

void LeaseEngine::track_op(int delta) {
  if (delta < 0) flush();  // a strand task ended: write what it queued, outside the lock
  {
    MutexLock lock(mu_);
    ops_in_flight_ += delta;
  }
  changed_.notify_all();
}

void LeaseEngine::flush() {
  Status s = persist_.flush();
  if (!s.is_ok()) spdlog::debug("persistence: {}", s.to_string());
}

bool LeaseEngine::wait_idle(std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  return changed_.wait_for(lock, timeout, [this]() REQUIRES(mu_) { return ops_in_flight_ == 0; });
}

std::string LeaseEngine::new_id_locked(const char* prefix, int hex_digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  uint64_t bits = rng_();
  for (int i = 0; i < hex_digits; ++i) {
    id += kHex[bits & 0xf];
    bits >>= 4;
  }
  return id;
}

// ---- state transitions -------------------------------------------------------------------

void LeaseEngine::transition_locked(ActiveLease& al, LeaseState to, std::string reason) {
  Lease& l = al.lease;
  if (!is_valid_transition(l.state, to)) {
    std::fprintf(stderr, "armhive: invalid lease transition %s -> %s for %s\n",
                 std::string(to_string(l.state)).c_str(), std::string(to_string(to)).c_str(),
                 l.id.c_str());
    std::abort();
  }
  TimePoint now = clock_.now();
  bool resumed = l.state == LeaseState::kHostUnreachable;  // keeps its TTL and ready_at
  l.history.push_back({l.state, to, now, reason});
  l.state = to;
  l.reason = std::move(reason);
  if (to == LeaseState::kReady && !resumed) {
    l.ready_at = now;
    l.expires_at = now + l.ttl;  // the TTL counts VM time, not time spent waiting
  }
  if (is_terminal(to)) l.ended_at = now;
  // Its figures stay those of the last sample taken before its VM went.
  if (is_terminal(to) && l.usage) l.usage->final = true;
  persist_.lease(l);
  emit_locked("lease." + std::string(to_string(to)), l, l.reason);
  if (metrics_ && is_terminal(to)) {
    metrics_->inc("armhive_leases_ended_total",
                  {{"pool", l.pool}, {"state", std::string(to_string(to))}});
  }
  changed_.notify_all();
}

// The one way into the event log: numbers the event, bounds the log, wakes the readers.
void LeaseEngine::append_event_locked(Event e) {
  e.seq = next_seq_++;
  events_.push_back(std::move(e));
  while (events_.size() > options_.event_buffer) events_.pop_front();
  changed_.notify_all();
}

void LeaseEngine::emit_locked(std::string type, const Lease& lease, std::string detail) {
  Event e;
  e.at = clock_.now();
  e.type = std::move(type);
  e.lease_id = lease.id;
  e.vm_name = lease.vm_name;
  e.pool = lease.pool;
  e.owner = lease.owner;
  e.state = std::string(to_string(lease.state));
  e.detail = std::move(detail);
  append_event_locked(std::move(e));
}

void LeaseEngine::emit_vm_locked(std::string type, const Vm& vm, std::string detail) {
  Event e;
  e.at = clock_.now();
  e.type = std::move(type);
  e.vm_name = vm.record.name;
  e.pool = vm.record.pool;
  e.lease_id = vm.record.lease_id;
  e.state = std::string(to_string(vm.record.state));
  e.detail = std::move(detail);
  if (!vm.record.lease_id.empty()) {
    auto it = leases_.find(vm.record.lease_id);
    if (it != leases_.end()) e.owner = it->second.lease.owner;
  }
  append_event_locked(std::move(e));
}

void LeaseEngine::persist_vm_locked(const Vm& vm) { persist_.vm(vm.record); }

// ---- LeaseService ------------------------------------------------------------------------

Status LeaseEngine::validate_request_locked(const LeaseRequest& request, const PoolRuntime& pool,
                                            Seconds ttl) {
  ARMHIVE_RETURN_IF_ERROR(check_lease_ttl(ttl, pool.config));
  if (request.ssh_keys.size() > 32) return invalid_argument("ssh_keys", "at most 32 keys");
  for (size_t i = 0; i < request.ssh_keys.size(); ++i) {
    ARMHIVE_RETURN_IF_ERROR(
        validate_ssh_key("ssh_keys[" + std::to_string(i) + "]", request.ssh_keys[i]));
  }
  ARMHIVE_RETURN_IF_ERROR(validate_labels("labels", request.labels));
  if (request.idempotency_key.size() > 128) {
    return invalid_argument("idempotency_key", "must be at most 128 characters");
  }
  Status fit = pool_fits_locked(pool.config);
  if (!fit.is_ok()) return fit.with_field("pool");
  return Status::ok();
}

Status LeaseEngine::pool_fits_locked(const PoolConfig& cfg) const {
  std::vector<std::string> hosts = pool_hosts_locked(cfg);
  if (hosts.empty()) {
    return Status(ErrorCode::kInvalidArgument,
                  "pool " + cfg.name + ": its host_labels match no host", cfg.name, "host_labels");
  }
  std::optional<Status> misfit;
  for (const std::string& host : hosts) {
    Status fit = fleet_.cores(host)->can_ever_fit(cfg.vcpus, cfg.cpu_policy, cfg.overcommit);
    if (fit.is_ok()) return fit;
    if (!misfit) misfit = fit;  // the first host's reason
  }
  return *misfit;
}

Result<Lease> LeaseEngine::create_lease(const LeaseRequest& request) {
  auto requested = std::chrono::steady_clock::now();
  if (!request.idempotency_key.empty()) {
    auto existing = store_.find_by_idempotency_key(request.owner, request.idempotency_key);
    if (!existing.is_ok()) {
      health_.failed("store.find_by_idempotency_key", existing.status());
      return existing.status();
    }
    if (existing->has_value()) {
      if ((*existing)->pool != request.pool) {
        return Status(ErrorCode::kConflict,
                      "idempotency key was used for a lease on pool '" + (*existing)->pool + "'",
                      (*existing)->id, "idempotency_key");
      }
      return find_lease((*existing)->id).value_or(std::nullopt).value_or(**existing);
    }
  }
  ActiveLease al;
  {
    MutexLock lock(mu_);
    if (!running_) return unavailable("the lease engine is not running");
    auto pit = pools_.find(request.pool);
    if (pit == pools_.end()) {
      return Status(ErrorCode::kNotFound, "no pool named '" + request.pool + "'", {}, "pool");
    }
    if (pit->second.removed) {
      return Status(
          ErrorCode::kNotFound,
          "pool '" + request.pool + "' was removed from the configuration: it takes no new leases",
          {}, "pool");
    }
    PoolRuntime& pool = pit->second;
    Seconds ttl = request.ttl.value_or(pool.config.default_ttl);
    ARMHIVE_RETURN_IF_ERROR(validate_request_locked(request, pool, ttl));
    al.requested = requested;
    Lease& l = al.lease;
    l.id = new_id_locked("l-", 12);
    l.pool = request.pool;
    l.owner = request.owner;
    l.purpose = request.purpose;
    l.ssh_keys = request.ssh_keys;
    l.labels = request.labels;
    l.idempotency_key = request.idempotency_key;
    l.state = LeaseState::kPending;
    l.reason = "queued";
    l.ttl = ttl;
    l.created_at = clock_.now();
    l.expires_at = l.created_at + ttl;
    l.history.push_back({LeaseState::kPending, LeaseState::kPending, l.created_at, "requested"});
  }
  // The row exists before the engine knows the lease, so every later write is an update.
  Status s = store_.insert(al.lease);
  if (s.code() == ErrorCode::kConflict && !request.idempotency_key.empty()) {
    // Raced with a retry of the same request: return the winner.
    auto existing = store_.find_by_idempotency_key(request.owner, request.idempotency_key);
    if (existing.is_ok() && existing->has_value()) return **existing;
  }
  if (!s.is_ok()) {
    health_.failed("store.insert", s);
    return s;
  }
  std::string id = al.lease.id;
  {
    MutexLock lock(mu_);
    if (!running_) {
      // Stopped meanwhile: the row stays pending and the next start() queues it.
      return al.lease;
    }
    PoolRuntime& pool = pools_.at(al.lease.pool);
    emit_locked("lease.created", al.lease);
    pool.demand.record_arrival(al.lease.created_at);
    leases_.emplace(id, std::move(al));
    pool.queue.push_back(id);
    schedule_locked(pool);
  }
  flush();
  // A warm hand-out completes in milliseconds: wait for it so the caller gets a ready lease.
  {
    MutexLock lock(mu_);
    changed_.wait_for(lock, options_.handout_wait, [&]() REQUIRES(mu_) {
      auto it = leases_.find(id);
      return it == leases_.end() || it->second.lease.state != LeaseState::kProvisioning ||
             !it->second.lease.warm_handout;
    });
    auto it = leases_.find(id);
    if (it != leases_.end()) return with_queue_locked(it->second);
  }
  return get_lease(id);
}

Result<std::optional<Lease>> LeaseEngine::find_lease(const std::string& id) {
  {
    MutexLock lock(mu_);
    auto it = leases_.find(id);
    if (it != leases_.end()) return std::optional<Lease>(with_queue_locked(it->second));
  }
  // An ended lease may not be written yet: its queued version is the truth.
  if (auto unwritten = persist_.unwritten_lease(id)) return unwritten;
  auto found = store_.find(id);
  if (!found.is_ok()) health_.failed("store.find", found.status());
  return found;
}

Result<Lease> LeaseEngine::get_lease(const std::string& id) {
  ARMHIVE_ASSIGN_OR_RETURN(std::optional<Lease> found, find_lease(id));
  if (!found) return not_found("no lease with id '" + id + "'", id);
  return *found;
}

Result<std::vector<Lease>> LeaseEngine::list_leases(const LeaseFilter& filter) {
  auto listed = store_.list(filter);
  if (!listed.is_ok()) {
    health_.failed("store.list", listed.status());
    return listed.status();
  }
  // The store may lag memory (a waiting lease's reason, writes not yet made): prefer memory
  // for live leases and the queued version for ended ones.
  std::vector<std::string> ended;
  {
    MutexLock lock(mu_);
    std::map<std::string, std::map<std::string, QueueSlot>> slots;  // per pool, computed once
    for (Lease& l : *listed) {
      auto it = leases_.find(l.id);
      if (it != leases_.end()) {
        l = it->second.lease;
        auto pool = pools_.find(l.pool);
        if (pool == pools_.end()) continue;
        auto [ps, fresh] = slots.try_emplace(l.pool);
        if (fresh) ps->second = queue_slots_locked(pool->second);
        if (auto slot = ps->second.find(l.id); slot != ps->second.end()) l.queue = slot->second;
      } else {
        ended.push_back(l.id);
      }
    }
  }
  for (Lease& l : *listed) {
    if (std::find(ended.begin(), ended.end(), l.id) == ended.end()) continue;
    if (auto unwritten = persist_.unwritten_lease(l.id)) l = *unwritten;
  }
  return listed;
}

Result<std::vector<UsageRow>> LeaseEngine::usage(const UsageQuery& q) {
  auto rows = store_.usage(q);
  if (!rows.is_ok()) health_.failed("store.usage", rows.status());
  return rows;
}

// Counted in SQL: the store is written on every transition, so its states are current.
Result<std::map<LeaseState, size_t>> LeaseEngine::count_leases(const LeaseFilter& filter) {
  return store_.count(filter);
}

Result<Lease> LeaseEngine::wait_lease(const std::string& id, std::chrono::milliseconds timeout) {
  {
    MutexLock lock(mu_);
    changed_.wait_for(lock, timeout, [&]() REQUIRES(mu_) {
      auto it = leases_.find(id);
      return it == leases_.end() || it->second.lease.state == LeaseState::kReady || !running_;
    });
    auto it = leases_.find(id);
    if (it != leases_.end()) return with_queue_locked(it->second);
  }
  return get_lease(id);
}

Result<Lease> LeaseEngine::renew_lease(const std::string& id, Seconds ttl) {
  Lease renewed;
  {
    MutexLock lock(mu_);
    auto it = leases_.find(id);
    if (it != leases_.end()) {
      ActiveLease& al = it->second;
      ARMHIVE_RETURN_IF_ERROR(check_renewable(id, al.lease.state));
      ARMHIVE_RETURN_IF_ERROR(check_lease_ttl(ttl, pools_.at(al.lease.pool).config));
      al.lease.ttl = ttl;
      al.lease.expires_at = clock_.now() + ttl;
      persist_.lease(al.lease);
      emit_locked("lease.renewed", al.lease, "expires " + to_rfc3339(al.lease.expires_at));
      renewed = al.lease;
    }
  }
  if (renewed.id.empty()) {
    ARMHIVE_ASSIGN_OR_RETURN(std::optional<Lease> found, find_lease(id));
    if (found) {
      ARMHIVE_RETURN_IF_ERROR(check_renewable(id, found->state));
      // Live in the store but not in memory: only a release in progress looks like that.
      return conflict("lease " + id + " is being released", id);
    }
    return not_found("no lease with id '" + id + "'", id);
  }
  // The new deadline is in force either way; the caller learns whether it is on disk (a
  // failed write stays queued and is retried).
  Status s = persist_.flush(/*force=*/true);
  if (!s.is_ok() && persist_.lease_pending(id)) {
    return s.annotate("lease " + id + " renewed but not yet saved (will retry)");
  }
  return renewed;
}

Result<Lease> LeaseEngine::release_lease(const std::string& id) {
  {
    MutexLock lock(mu_);
    auto it = leases_.find(id);
    if (it != leases_.end()) {
      ActiveLease& al = it->second;
      if (al.lease.state != LeaseState::kReleasing) {
        begin_release_locked(
            al, LeaseState::kReleased,
            "released by " + (al.lease.owner.empty() ? std::string("owner") : al.lease.owner));
      }
      auto again = leases_.find(id);
      if (again != leases_.end()) {
        Lease l = again->second.lease;
        lock.unlock();
        flush();
        return l;
      }
    }
  }
  flush();
  return get_lease(id);  // already ended: releasing again is a no-op
}

void LeaseEngine::expire_due_leases() {
  {
    MutexLock lock(mu_);
    expire_due_locked();
  }
  flush();
}

void LeaseEngine::expire_due_locked() {
  lose_past_grace_locked();
  TimePoint now = clock_.now();
  std::vector<std::string> due;
  for (const auto& [id, al] : leases_) {
    if (expiry_due(al.lease, now)) due.push_back(id);
  }
  for (const std::string& id : due) {
    auto it = leases_.find(id);
    if (it == leases_.end()) continue;
    begin_release_locked(it->second, LeaseState::kExpired, expiry_reason(it->second.lease));
  }
}

Result<LeaseEngine::LeaseVm> LeaseEngine::lease_vm(const std::string& lease_id) {
  {
    MutexLock lock(mu_);
    auto it = leases_.find(lease_id);
    if (it != leases_.end()) {
      if (it->second.lease.state != LeaseState::kReady) {
        return conflict("lease " + lease_id + " is " +
                            std::string(to_string(it->second.lease.state)) + ", not ready",
                        lease_id);
      }
      const CoreAllocator* cores = fleet_.cores(host_name(it->second.lease.host));
      return LeaseVm{it->second.lease, pools_.at(it->second.lease.pool).config,
                     cores == nullptr ? std::vector<int>{} : cores->sets().housekeeping};
    }
  }
  ARMHIVE_ASSIGN_OR_RETURN(std::optional<Lease> found, find_lease(lease_id));
  if (found) return conflict("lease " + lease_id + " has ended", lease_id);
  return not_found("no lease with id '" + lease_id + "'", lease_id);
}

Result<GuestExecResult> LeaseEngine::exec(const std::string& lease_id,
                                          const GuestExecRequest& request) {
  ARMHIVE_ASSIGN_OR_RETURN(LeaseVm target, lease_vm(lease_id));
  if (request.argv.empty()) return invalid_argument("argv", "must name a program");
  Hypervisor* hv = hypervisor_of(target.lease.host);
  if (hv == nullptr) return unavailable("host " + target.lease.host + " is not driven here");
  // Not on the strand: a long command must not hold up release or expiry of the VM (see the
  // class comment for why this overlap is safe).
  return hv->exec(target.lease.vm_name, request);
}

namespace {

// Passes output through; cancelled when the client's sink is, or when `still_ready` (asked at
// most once a second: it takes the engine's lock) says the lease has ended.
class LeaseBoundSink final : public ExecSink {
 public:
  LeaseBoundSink(ExecSink& inner, std::function<bool()> still_ready)
      : inner_(inner), still_ready_(std::move(still_ready)) {}
  void started() override { inner_.started(); }
  void output(ExecOutputStream stream, std::string_view data) override {
    inner_.output(stream, data);
  }
  bool cancelled() override {
    if (inner_.cancelled()) return true;
    auto now = std::chrono::steady_clock::now();
    if (now - last_check_ >= std::chrono::seconds(1)) {
      last_check_ = now;
      ended_ = !still_ready_();
    }
    return ended_;
  }

 private:
  ExecSink& inner_;
  std::function<bool()> still_ready_;
  std::chrono::steady_clock::time_point last_check_ = std::chrono::steady_clock::now();
  bool ended_ = false;
};

}  // namespace

Result<GuestExecResult> LeaseEngine::exec_stream(const std::string& lease_id,
                                                 const GuestExecRequest& request, ExecSink& sink) {
  ARMHIVE_ASSIGN_OR_RETURN(LeaseVm target, lease_vm(lease_id));
  if (request.argv.empty()) return invalid_argument("argv", "must name a program");
  const std::string vm = target.lease.vm_name;
  LeaseBoundSink bound(sink, [this, &lease_id, &vm] {
    MutexLock lock(mu_);
    auto it = leases_.find(lease_id);
    return it != leases_.end() && it->second.lease.state == LeaseState::kReady &&
           it->second.lease.vm_name == vm;
  });
  Hypervisor* hv = hypervisor_of(target.lease.host);
  if (hv == nullptr) return unavailable("host " + target.lease.host + " is not driven here");
  // Off the strand, as exec().
  return hv->exec_stream(vm, request, bound);
}

Result<std::string> LeaseEngine::console(const std::string& lease_id, size_t max_bytes) {
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, get_lease(lease_id));
  if (lease.vm_name.empty()) return conflict("lease " + lease_id + " has no VM yet", lease_id);
  {
    MutexLock lock(mu_);
    if (!vms_.count(lease.vm_name)) {
      return conflict("the VM of lease " + lease_id + " no longer exists", lease_id);
    }
  }
  Hypervisor* hv = hypervisor_of(lease.host);
  if (hv == nullptr) return unavailable("host " + lease.host + " is not driven here");
  return hv->console_log(lease.vm_name, max_bytes);
}

std::vector<PoolStatus> LeaseEngine::pools() {
  MutexLock lock(mu_);
  std::vector<PoolStatus> out;
  for (const auto& [name, pool] : pools_) {
    PoolStatus st;
    st.config = pool.config;
    st.removed = pool.removed;
    for (const auto& [vname, vm] : vms_) {
      if (vm.record.pool != name) continue;
      // A VM of an unreachable host serves nobody now (its lease, if any, shows it).
      if (vm.record.state != VmState::kLeased && host_unreachable_now_locked(vm.record.host)) {
        continue;
      }
      switch (vm.record.state) {
        case VmState::kStarting:
          st.starting++;
          break;
        case VmState::kWarm:
          st.warm++;
          break;
        case VmState::kLeased:
          st.leased++;
          break;
        case VmState::kDestroying:
          break;
      }
    }
    for (const auto& [id, al] : leases_) {
      if (al.lease.pool == name && al.lease.state == LeaseState::kPending) st.pending_leases++;
    }
    if (pool.config.auto_warm) st.warm_target = pool.warm_target;
    out.push_back(std::move(st));
  }
  return out;
}

// An auto pool learns from its lease history of the last four weeks before its first pass,
// so a restart does not forget the weekly profile. The store is read outside mu_; at most
// kSeedRows rows per pool (pages in creation order), a bounded start whatever the history.
void LeaseEngine::seed_demand() {
  constexpr size_t kSeedRows = 200'000;
  std::vector<std::string> names;
  {
    MutexLock lock(mu_);
    for (const auto& [name, pool] : pools_) {
      if (pool.config.auto_warm) names.push_back(name);
    }
  }
  const TimePoint since = clock_.now() - std::chrono::hours(24 * 28);
  for (const std::string& name : names) {
    std::vector<TimePoint> history;
    LeaseFilter f;
    f.pool = name;
    f.limit = kMaxListLimit;
    for (size_t read = 0; read < kSeedRows;) {
      auto page = store_.list(f);
      if (!page.is_ok()) {
        spdlog::warn("pool {}: no lease history to size its warm VMs from: {}", name,
                     page.status().to_string());
        break;
      }
      for (const Lease& l : *page) {
        if (l.created_at >= since) history.push_back(l.created_at);
      }
      read += page->size();
      if (page->size() < kMaxListLimit) break;
      f.after_id = page->back().id;
    }
    std::sort(history.begin(), history.end());
    MutexLock lock(mu_);
    auto it = pools_.find(name);
    if (it == pools_.end()) continue;
    it->second.demand.seed(history);
    spdlog::info("pool {}: min_warm auto, learned from {} lease requests of the last 4 weeks", name,
                 history.size());
  }
}

std::vector<HostView> LeaseEngine::hosts() {
  EngineHealth::View store_health = health_.view();
  std::map<std::string, EngineHealth::View> calls;
  {
    MutexLock hosts_lock(hosts_mu_);
    for (const auto& [name, io] : host_io_) calls[name] = io->health->view();
  }
  MutexLock lock(mu_);
  std::vector<HostView> out;
  for (const std::string& name : host_order_) {
    out.push_back(host_view_locked(name, calls[name], store_health));  // added meanwhile: none
  }
  return out;
}

HostView LeaseEngine::host_view_locked(const std::string& name, const EngineHealth::View& calls,
                                       const EngineHealth::View& store_health) const {
  const CoreAllocator& cores = *fleet_.cores(name);
  HostView view;
  // Its own calls' failures, and the database's (which every host suffers); the newer error
  // is the one shown.
  view.state = store_health.state != HostState::kOk ? store_health.state : calls.state;
  const HostHealthTracker& tracker = fleet_.host(name)->health;
  const EngineHealth::View& newer =
      !store_health.last_error.empty() &&
              (calls.last_error.empty() || store_health.last_error_at > calls.last_error_at)
          ? store_health
          : calls;
  view.last_error = newer.last_error;
  view.last_error_at = newer.last_error_at;
  view.topology = cores.topology();
  view.topology.hostname = name;
  if (std::shared_ptr<HostIo> io = host_io(name)) view.uri = io->uri;
  view.labels = fleet_.host(name)->labels;
  view.fragmentation = cores.fragmentation();
  for (const CpuUsage& u : cores.usage()) {
    CoreUse use;
    use.cpu = u.cpu;
    use.role = std::string(to_string(u.role));
    if (!u.vms.empty()) {
      use.vm_name = u.vms.front();
      auto vit = vms_.find(use.vm_name);
      if (vit != vms_.end()) {
        use.lease_id = vit->second.record.lease_id;
        use.pool = vit->second.record.pool;
      }
    }
    view.cores.push_back(std::move(use));
  }
  // Health benchmarks are per pool: shown on every host for now.
  view.health = host_health_;
  view.admin = tracker.admin();
  for (const HealthResult& r : host_health_) {
    if (r.verdict == "degraded") view.state = HostState::kDegraded;
  }
  if (tracker.unreachable_since()) {
    view.state = HostState::kUnreachable;
    view.unreachable_since = tracker.unreachable_since();
    view.last_error = tracker.last_error();
    view.last_error_at = tracker.last_error_at();
  }
  return view;
}

void LeaseEngine::record_pool_event(const std::string& pool, std::string type, std::string detail) {
  MutexLock lock(mu_);
  Event e;
  e.at = clock_.now();
  e.type = std::move(type);
  e.pool = pool;
  e.detail = std::move(detail);
  append_event_locked(std::move(e));
}

void LeaseEngine::set_host_health(std::vector<HealthResult> latest) {
  MutexLock lock(mu_);
  host_health_ = std::move(latest);
}

Status LeaseEngine::set_host_admin(const std::string& host, HostHealthTracker::Admin admin) {
  if (host.empty() || host_io(host) == nullptr) {
    return Status(ErrorCode::kNotFound, "no host named '" + host + "'", host, "name");
  }
  std::lock_guard admin_lock(admin_mu_);
  {
    MutexLock lock(mu_);
    const FleetHostState* state = fleet_.host(host);
    if (state == nullptr) return not_found("no host named '" + host + "'", host);  // removed
    if (state->health.admin() == admin) return Status::ok();
  }
  // Saved first: a drain the database does not hold would be undone by the next restart.
  Status saved = store_.put_host_admin(host, admin);
  if (!saved.is_ok()) {
    health_.failed("store.put_host_admin", saved);
    return saved.annotate("host " + host + " unchanged");
  }
  {
    MutexLock lock(mu_);
    HostHealthTracker* tracker = fleet_.health(host);
    if (tracker == nullptr) return not_found("no host named '" + host + "'", host);
    tracker->set_admin(clock_.now(), admin);
    Event e;
    e.at = clock_.now();
    switch (admin) {
      case HostHealthTracker::Admin::kDrain:
        e.type = "host.draining";
        e.detail = "host " + host + " draining: no new VMs, leases run to their end";
        break;
      case HostHealthTracker::Admin::kMaintenance:
        e.type = "host.maintenance";
        e.detail = "host " + host + " in maintenance: no new VMs, leases run to their end";
        break;
      case HostHealthTracker::Admin::kNone:
        e.type = "host.undrained";
        e.detail = "host " + host + " takes new VMs again";
        break;
    }
    spdlog::info("{}", e.detail);
    append_event_locked(std::move(e));
    schedule_all_locked();
  }
  flush();
  return Status::ok();
}

void LeaseEngine::record_event(const std::string& lease_id, std::string type, std::string detail) {
  MutexLock lock(mu_);
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  emit_locked(std::move(type), it->second.lease, std::move(detail));
}

std::vector<Event> LeaseEngine::events_since(uint64_t after, std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  changed_.wait_for(lock, timeout, [&]() REQUIRES(mu_) {
    return !running_ || (!events_.empty() && events_.back().seq > after);
  });
  // seq increases along the log: the watcher asks for the newest few after every change, and
  // scanning the whole buffer for them under the engine lock cost every POST (BENCHMARKS.md).
  auto first = std::partition_point(events_.begin(), events_.end(),
                                    [&](const Event& e) { return e.seq <= after; });
  return std::vector<Event>(first, events_.end());
}

}  // namespace armhive
