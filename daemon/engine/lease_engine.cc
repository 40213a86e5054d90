#include "daemon/engine/lease_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <cstdio>

namespace armhive {
namespace {

constexpr int kMaxHandoutAttempts = 3;
constexpr auto kMaxTtl = std::chrono::hours(24 * 30);

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string join_cpus(const std::vector<int>& cpus) {
  std::string out;
  for (int c : cpus) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

}  // namespace

LeaseEngine::LeaseEngine(EngineOptions options, Hypervisor& hypervisor, LeaseStore& store,
                         CoreAllocator allocator, ImageResolver images, const Clock& clock,
                         Metrics* metrics, std::string host_name)
    : options_(std::move(options)),
      hypervisor_(hypervisor),
      store_(store),
      images_(std::move(images)),
      clock_(clock),
      metrics_(metrics),
      host_name_(std::move(host_name)),
      reaper_timer_(io_),
      schedule_timer_(io_),
      reconcile_timer_(io_),
      allocator_(std::move(allocator)),
      rng_(std::random_device{}()) {
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
  }
  hypervisor_.set_event_handler([this](const VmEvent& e) {
    // Runs on the libvirt event-loop thread: copy and hand over, never block here.
    boost::asio::post(io_, [this, e] { on_event(e); });
  });
}

LeaseEngine::~LeaseEngine() {
  stop();
  // The hypervisor outlives us; it must not call back into a destroyed engine.
  hypervisor_.set_event_handler([](const VmEvent&) {});
}

Status LeaseEngine::start() {
  for (const auto& [name, pool] : pools_) {
    Status fit =
        allocator_.can_ever_fit(pool.config.vcpus, pool.config.cpu_policy, pool.config.overcommit);
    if (!fit.is_ok()) return fit.annotate("pool " + name);
  }
  recover();
  work_ =
      std::make_unique<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>(
          io_.get_executor());
  {
    std::lock_guard lock(mu_);
    running_ = true;
    schedule_all_locked();
  }
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    threads_.emplace_back([this] { io_.run(); });
  }
  arm_timer(reaper_timer_, options_.reaper_period, [this] { expire_due_leases(); });
  arm_timer(schedule_timer_, options_.schedule_period, [this] {
    std::lock_guard lock(mu_);
    schedule_all_locked();
  });
  arm_timer(reconcile_timer_, options_.reconcile_period, [this] {
    Status s = reconcile();
    if (!s.is_ok()) spdlog::warn("reconcile: {}", s.to_string());
  });
  return Status::ok();
}

void LeaseEngine::stop() {
  {
    std::lock_guard lock(mu_);
    if (!running_ && threads_.empty()) return;
    running_ = false;
  }
  changed_.notify_all();
  boost::asio::post(io_, [this] {
    reaper_timer_.cancel();
    schedule_timer_.cancel();
    reconcile_timer_.cancel();
  });
  work_.reset();
  io_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void LeaseEngine::arm_timer(boost::asio::steady_timer& timer, std::chrono::milliseconds period,
                            std::function<void()> fn) {
  timer.expires_after(period);
  timer.async_wait([this, &timer, period, fn](const boost::system::error_code& ec) {
    if (ec) return;
    {
      std::lock_guard lock(mu_);
      if (!running_) return;
    }
    fn();
    arm_timer(timer, period, fn);
  });
}

void LeaseEngine::track_op(int delta) {
  {
    std::lock_guard lock(mu_);
    ops_in_flight_ += delta;
  }
  changed_.notify_all();
}

bool LeaseEngine::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout, [this] { return ops_in_flight_ == 0; });
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
  l.history.push_back({l.state, to, now, reason});
  l.state = to;
  l.reason = std::move(reason);
  if (to == LeaseState::kReady) {
    l.ready_at = now;
    l.expires_at = now + l.ttl;  // the TTL counts VM time, not time spent waiting
  }
  if (is_terminal(to)) l.ended_at = now;
  Status s = store_.update(l);
  if (!s.is_ok())
    spdlog::error("lease {}: cannot persist {}: {}", l.id, to_string(to), s.to_string());
  emit_locked("lease." + std::string(to_string(to)), l, l.reason);
  if (metrics_ && is_terminal(to)) {
    metrics_->inc("armhive_leases_ended_total",
                  {{"pool", l.pool}, {"state", std::string(to_string(to))}});
  }
  changed_.notify_all();
}

void LeaseEngine::emit_locked(std::string type, const Lease& lease, std::string detail) {
  Event e;
  e.seq = next_seq_++;
  e.at = clock_.now();
  e.type = std::move(type);
  e.lease_id = lease.id;
  e.vm_name = lease.vm_name;
  e.pool = lease.pool;
  e.owner = lease.owner;
  e.state = std::string(to_string(lease.state));
  e.detail = std::move(detail);
  events_.push_back(std::move(e));
  while (events_.size() > options_.event_buffer) events_.pop_front();
  changed_.notify_all();
}

void LeaseEngine::emit_vm_locked(std::string type, const Vm& vm, std::string detail) {
  Event e;
  e.seq = next_seq_++;
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
  events_.push_back(std::move(e));
  while (events_.size() > options_.event_buffer) events_.pop_front();
  changed_.notify_all();
}

void LeaseEngine::persist_vm_locked(const Vm& vm) {
  Status s = store_.put_vm(vm.record);
  if (!s.is_ok()) spdlog::error("vm {}: cannot persist: {}", vm.record.name, s.to_string());
}

// ---- scheduling --------------------------------------------------------------------------

void LeaseEngine::schedule_all_locked() {
  for (auto& [name, pool] : pools_) schedule_locked(pool);
}

// Decides what a pool needs now: hand warm VMs to waiting leases in FIFO order, boot VMs for
// leases that cannot be served warm, then refill the warm pool to min_warm. Only posts work.
void LeaseEngine::schedule_locked(PoolRuntime& pool) {
  if (!running_) return;
  const PoolConfig& cfg = pool.config;
  auto count = [&](VmState state, bool bound) {
    int n = 0;
    for (const auto& [name, vm] : vms_) {
      if (vm.record.pool == cfg.name && vm.record.state == state &&
          (!bound || !vm.record.lease_id.empty())) {
        ++n;
      }
    }
    return n;
  };
  auto find_warm = [&]() -> Vm* {
    for (auto& [name, vm] : vms_) {
      if (vm.record.pool == cfg.name && vm.record.state == VmState::kWarm &&
          vm.record.lease_id.empty() && !vm.cancelled) {
        return &vm;
      }
    }
    return nullptr;
  };
  auto total = [&] {
    int n = 0;
    for (const auto& [name, vm] : vms_) n += vm.record.pool == cfg.name ? 1 : 0;
    return n;
  };

  while (!pool.queue.empty()) {
    std::string lease_id = pool.queue.front();
    auto it = leases_.find(lease_id);
    if (it == leases_.end() || is_terminal(it->second.lease.state) ||
        it->second.lease.state == LeaseState::kReleasing) {
      pool.queue.pop_front();
      continue;
    }
    ActiveLease& al = it->second;
    if (Vm* warm = find_warm()) {
      pool.queue.pop_front();
      begin_handout_locked(*warm, al);
      continue;
    }
    // A warm VM that is still booting unbound will serve this lease when it is up: do not
    // start a second one for it unless the pool has room.
    int starting_unbound = count(VmState::kStarting, false) - count(VmState::kStarting, true);
    int waiting_ahead = 0;
    for (const std::string& id : pool.queue) {
      if (id == lease_id) break;
      ++waiting_ahead;
    }
    if (starting_unbound > waiting_ahead) {
      if (al.lease.reason != "waiting for a warm VM that is booting") {
        al.lease.reason = "waiting for a warm VM that is booting";
        changed_.notify_all();
      }
      break;
    }
    std::string why;
    if (std::chrono::steady_clock::now() < pool.retry_after) {
      why = "pool '" + cfg.name + "' is backing off after " + std::to_string(pool.failures) +
            " failed boot(s): " + pool.last_failure;
    } else if (total() >= cfg.max) {
      why = "pool '" + cfg.name + "' is at max (" + std::to_string(cfg.max) + " VMs)";
    } else if (count(VmState::kStarting, false) >= cfg.max_starting) {
      why = "pool '" + cfg.name + "' has max_starting (" + std::to_string(cfg.max_starting) +
            ") VMs booting";
    } else {
      auto started = start_vm_locked(pool, lease_id);
      if (started.is_ok()) {
        pool.queue.pop_front();
        al.lease.vm_name = *started;
        if (al.lease.state == LeaseState::kPending) {
          transition_locked(al, LeaseState::kProvisioning, "booting VM " + *started);
        }
        continue;
      }
      why = started.status().message();
    }
    if (al.lease.reason != why) {
      al.lease.reason = why;
      (void)store_.update(al.lease);
      emit_locked("lease.waiting", al.lease, why);
    }
    break;  // FIFO: later leases do not overtake the head
  }

  // Refill: warm + unbound-starting VMs up to min_warm, within max and max_starting.
  while (pool.queue.empty() && std::chrono::steady_clock::now() >= pool.retry_after) {
    int warm = count(VmState::kWarm, false);
    int starting_unbound = count(VmState::kStarting, false) - count(VmState::kStarting, true);
    if (warm + starting_unbound >= cfg.min_warm) break;
    if (total() >= cfg.max || count(VmState::kStarting, false) >= cfg.max_starting) break;
    auto started = start_vm_locked(pool, "");
    if (!started.is_ok()) {
      spdlog::debug("pool {}: refill deferred: {}", cfg.name, started.status().message());
      break;
    }
  }
}

// Reserves cores and posts the boot of a new VM (for a lease, or warm when lease_id is empty).
// Returns the VM name, or why it cannot start now.
Result<std::string> LeaseEngine::start_vm_locked(PoolRuntime& pool, const std::string& lease_id) {
  const PoolConfig& cfg = pool.config;
  auto image = images_(cfg.image);
  if (!image.is_ok()) {
    return Status(image.status().code(),
                  "image '" + cfg.image + "' unavailable: " + image.status().message());
  }
  std::string vm_id = new_id_locked("vm-", 8);
  std::string name = "armhive-" + vm_id;
  auto placement = allocator_.allocate({.vm_name = name,
                                        .vcpus = cfg.vcpus,
                                        .policy = cfg.cpu_policy,
                                        .overcommit = cfg.overcommit,
                                        .strategy = options_.strategy});
  if (!placement.is_ok()) return placement.status();

  Vm vm;
  vm.record.name = name;
  vm.record.vm_id = vm_id;
  vm.record.pool = cfg.name;
  vm.record.state = VmState::kStarting;
  vm.record.lease_id = lease_id;
  vm.record.cpus = placement->cpus();
  vm.record.created_at = clock_.now();
  vm.placement = *placement;
  vm.strand = std::make_shared<Strand>(io_.get_executor());
  vm.boot_started = clock_.now();
  persist_vm_locked(vm);
  emit_vm_locked("vm.starting", vm, placement->note);
  auto [it, inserted] = vms_.emplace(name, std::move(vm));
  TimePoint deadline = clock_.now() + options_.boot_timeout;
  ++ops_in_flight_;
  boost::asio::post(*it->second.strand, [this, name, deadline] {
    boot_step(name, deadline, /*create=*/true);
    track_op(-1);
  });
  return name;
}

// ---- VM work (on the VM's strand) ------------------------------------------------------

void LeaseEngine::boot_step(const std::string& vm_name, TimePoint deadline, bool create) {
  VmSpec spec;
  bool cancelled = false;
  std::string image_error;
  {
    std::lock_guard lock(mu_);
    auto it = vms_.find(vm_name);
    if (it == vms_.end() || !running_) return;
    Vm& vm = it->second;
    cancelled = vm.cancelled;
    if (create && !cancelled) {
      const PoolConfig& cfg = pools_.at(vm.record.pool).config;
      auto image = images_(cfg.image);
      if (!image.is_ok()) {
        image_error = "image '" + cfg.image + "' unavailable: " + image.status().message();
      } else {
        spec.name = vm.record.name;
        spec.vm_id = vm.record.vm_id;
        spec.pool = cfg.name;
        spec.base_disk = image->base_disk;
        spec.kernel = image->kernel;
        spec.initrd = image->initrd;
        spec.cmdline = image->cmdline + " armhive.hostname=" + vm.record.name;
        spec.vcpus = cfg.vcpus;
        spec.memory_mib = cfg.memory_mib;
        spec.disk_gib = cfg.disk_gib;
        spec.network = cfg.network;
        spec.mtu = cfg.mtu;
        spec.net_queues = std::min(cfg.vcpus, 4);
        spec.vcpu_pins = vm.placement.vcpu_pins;
        spec.emulator_cpus = vm.placement.emulator_cpus;
        spec.numa_node = vm.placement.numa_node;
        spec.labels = cfg.labels;
      }
    }
  }
  if (cancelled || !image_error.empty()) {
    boot_failed(vm_name, cancelled ? "cancelled" : image_error, false);
    return;
  }
  if (create) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = hypervisor_.create_vm(spec);
    if (!s.is_ok()) {
      boot_failed(vm_name, "cannot create VM: " + s.message(), s.code() == ErrorCode::kUnavailable);
      return;
    }
    record_phase(vm_name, "create", t0);  // overlay + define + start
  }
  // Ready means: the guest agent answers and the guest has an address.
  Status ping = hypervisor_.ping_agent(vm_name, options_.agent_timeout);
  std::string address;
  if (ping.is_ok()) {
    record_phase(vm_name, "boot", {});  // started -> guest agent answers
    auto addr = hypervisor_.guest_address(vm_name);
    if (addr.is_ok()) {
      address = *addr;
      record_phase(vm_name, "readiness", {});  // agent -> address known
    }
  }
  if (address.empty()) {
    if (clock_.now() >= deadline) {
      std::string tail;
      auto log = hypervisor_.console_log(vm_name, 300);
      if (log.is_ok()) tail = *log;
      boot_failed(
          vm_name,
          "guest not ready within " +
              std::to_string(std::chrono::duration_cast<Seconds>(options_.boot_timeout).count()) +
              "s (agent " + (ping.is_ok() ? "answers, no address" : ping.message()) + ")" +
              (tail.empty() ? "" : "; console tail: " + tail),
          false);
      return;
    }
    std::lock_guard lock(mu_);
    auto it = vms_.find(vm_name);
    if (it == vms_.end() || !running_) return;
    auto timer = std::make_shared<boost::asio::steady_timer>(io_, options_.agent_poll);
    ++ops_in_flight_;
    timer->async_wait(boost::asio::bind_executor(
        *it->second.strand, [this, timer, vm_name, deadline](const boost::system::error_code&) {
          boot_step(vm_name, deadline, /*create=*/false);
          track_op(-1);
        }));
    return;
  }

  std::string lease_id;
  {
    std::lock_guard lock(mu_);
    auto it = vms_.find(vm_name);
    if (it == vms_.end()) return;
    Vm& vm = it->second;
    if (vm.cancelled) {
      // Cancelled while we were polling: fall through to destroy below.
    } else {
      vm.record.address = address;
      if (metrics_) {
        metrics_->observe("armhive_provision_seconds", {{"pool", vm.record.pool}},
                          std::chrono::duration<double>(clock_.now() - vm.boot_started).count());
      }
      lease_id = vm.record.lease_id;
      pools_.at(vm.record.pool).failures = 0;
      if (lease_id.empty()) {
        vm.record.state = VmState::kWarm;
        persist_vm_locked(vm);
        emit_vm_locked("vm.warm", vm, address);
        schedule_locked(pools_.at(vm.record.pool));
        return;
      }
    }
  }
  if (lease_id.empty()) {
    boot_failed(vm_name, "cancelled", false);
    return;
  }
  handout(vm_name, lease_id);
}

// Boot phase timings (steady clock) for armhive_boot_phase_seconds{phase}: each phase runs
// from the end of the previous one; `start` is given for the first. Recorded once per VM.
void LeaseEngine::record_phase(const std::string& vm_name, const char* phase,
                               std::chrono::steady_clock::time_point start) {
  std::lock_guard lock(mu_);
  auto it = vms_.find(vm_name);
  if (it == vms_.end()) return;
  Vm& vm = it->second;
  auto now = std::chrono::steady_clock::now();
  if (start == std::chrono::steady_clock::time_point{}) start = vm.phase_mark;
  if (start == std::chrono::steady_clock::time_point{} || !vm.phases_seen.insert(phase).second) {
    return;  // resumed after a restart (no start known), or already recorded
  }
  vm.phase_mark = now;
  if (metrics_) {
    metrics_->observe("armhive_boot_phase_seconds", {{"pool", vm.record.pool}, {"phase", phase}},
                      std::chrono::duration<double>(now - start).count());
  }
}

void LeaseEngine::boot_failed(const std::string& vm_name, std::string why, bool host_down) {
  spdlog::warn("vm {}: {}", vm_name, why);
  {
    std::lock_guard lock(mu_);
    auto it = vms_.find(vm_name);
    // Shutting down: leave the VM for the next start() to adopt or clean up.
    if (it == vms_.end() || !running_) return;
    Vm& vm = it->second;
    bool was_cancel = vm.cancelled;
    if (was_cancel && !vm.failure.empty()) why = vm.failure;
    if (!was_cancel) {
      if (metrics_) metrics_->inc("armhive_vm_failures_total", {{"pool", vm.record.pool}});
      PoolRuntime& pool = pools_.at(vm.record.pool);
      pool.failures = std::min(pool.failures + 1, 16);
      pool.last_failure = why;
      pool.retry_after = std::chrono::steady_clock::now() +
                         std::min<std::chrono::milliseconds>(
                             options_.retry_backoff * (1 << std::min(pool.failures - 1, 10)),
                             options_.max_retry_backoff);
    }
    emit_vm_locked(was_cancel ? "vm.cancelled" : "vm.failed", vm, why);
    if (!vm.record.lease_id.empty()) {
      auto lit = leases_.find(vm.record.lease_id);
      if (lit != leases_.end()) {
        ActiveLease& al = lit->second;
        if (al.lease.state == LeaseState::kReleasing) {
          // Cancelled by its owner: destroy() below ends it.
        } else if (host_down) {
          // Not the lease's fault: it waits for the host to come back.
          al.lease.vm_name.clear();
          al.lease.reason = "host down: " + why;
          vm.record.lease_id.clear();
          pools_.at(al.lease.pool).queue.push_front(al.lease.id);
        } else {
          vm.record.lease_id.clear();
          transition_locked(al, LeaseState::kFailed, "VM " + vm_name + " failed: " + why);
          finish_lease_locked(al);
        }
      }
    }
    vm.record.state = VmState::kDestroying;
    persist_vm_locked(vm);
  }
  destroy(vm_name);
}

void LeaseEngine::begin_handout_locked(Vm& vm, ActiveLease& al) {
  vm.record.lease_id = al.lease.id;
  vm.record.state = VmState::kLeased;
  persist_vm_locked(vm);
  al.lease.vm_name = vm.record.name;
  if (al.lease.state == LeaseState::kPending) {
    transition_locked(al, LeaseState::kProvisioning, "handing out warm VM " + vm.record.name);
  }
  al.lease.warm_handout = true;
  ++ops_in_flight_;
  std::string name = vm.record.name, id = al.lease.id;
  boost::asio::post(*vm.strand, [this, name, id] {
    handout(name, id);
    track_op(-1);
  });
}

// Installs the lease's keys and records the lease in the domain, then marks it ready.
void LeaseEngine::handout(const std::string& vm_name, const std::string& lease_id) {
  std::vector<std::string> keys;
  std::string user;
  {
    std::lock_guard lock(mu_);
    auto vit = vms_.find(vm_name);
    auto lit = leases_.find(lease_id);
    if (vit == vms_.end()) return;
    if (lit == leases_.end() || lit->second.lease.state == LeaseState::kReleasing ||
        vit->second.cancelled) {
      vit->second.record.state = VmState::kDestroying;
      persist_vm_locked(vit->second);
    } else {
      keys = lit->second.lease.ssh_keys;
      auto image = images_(pools_.at(vit->second.record.pool).config.image);
      user = image.is_ok() ? image->login_user : "root";
      vit->second.record.state = VmState::kLeased;
      vit->second.record.lease_id = lease_id;
      persist_vm_locked(vit->second);
    }
  }
  if (user.empty()) {  // released meanwhile
    destroy(vm_name);
    return;
  }
  Status s = Status::ok();
  if (!keys.empty()) s = hypervisor_.set_authorized_keys(vm_name, user, keys);
  if (s.is_ok()) s = hypervisor_.set_lease(vm_name, lease_id);
  bool destroy_vm = false;
  {
    std::lock_guard lock(mu_);
    auto vit = vms_.find(vm_name);
    auto lit = leases_.find(lease_id);
    if (vit == vms_.end()) return;
    Vm& vm = vit->second;
    if (lit == leases_.end() || lit->second.lease.state == LeaseState::kReleasing) {
      destroy_vm = true;
      vm.record.state = VmState::kDestroying;
    } else if (!s.is_ok()) {
      ActiveLease& al = lit->second;
      destroy_vm = true;
      vm.record.state = VmState::kDestroying;
      vm.record.lease_id.clear();
      emit_vm_locked("vm.failed", vm, "hand-out failed: " + s.message());
      al.lease.vm_name.clear();
      if (++al.handout_attempts < kMaxHandoutAttempts) {
        al.lease.reason = "hand-out failed, retrying: " + s.message();
        pools_.at(al.lease.pool).queue.push_front(al.lease.id);
      } else {
        transition_locked(al, LeaseState::kFailed, "hand-out failed: " + s.message());
        finish_lease_locked(al);
      }
    } else {
      ActiveLease& al = lit->second;
      al.lease.address = vm.record.address;
      al.lease.cpus = vm.record.cpus;
      al.lease.login_user = user;  // the user whose keys were just installed
      transition_locked(al, LeaseState::kReady,
                        (al.lease.warm_handout ? "warm VM " : "VM ") + vm_name + " at " +
                            vm.record.address + " on cores " + join_cpus(vm.record.cpus));
      if (metrics_) {
        metrics_->observe(
            "armhive_handout_seconds",
            {{"pool", al.lease.pool}, {"path", al.lease.warm_handout ? "warm" : "cold"}},
            seconds_between(al.requested, std::chrono::steady_clock::now()));
      }
    }
    persist_vm_locked(vm);
    if (!destroy_vm) {
      schedule_locked(pools_.at(vm.record.pool));
      return;
    }
  }
  destroy(vm_name);
}

// Destroys the VM (domain, overlay, per-VM files), frees its cores, ends a releasing lease and
// refills the pool. Runs on the VM's strand.
void LeaseEngine::destroy(const std::string& vm_name) {
  {
    std::lock_guard lock(mu_);
    auto it = vms_.find(vm_name);
    if (it == vms_.end()) return;
    it->second.record.state = VmState::kDestroying;
    persist_vm_locked(it->second);
  }
  Status s = hypervisor_.destroy_vm(vm_name);
  std::lock_guard lock(mu_);
  auto it = vms_.find(vm_name);
  if (it == vms_.end()) return;
  if (!s.is_ok()) {
    // Keep the record (and its cores): reconcile retries, nothing is silently leaked.
    spdlog::error("vm {}: destroy failed: {}", vm_name, s.to_string());
    emit_vm_locked("vm.destroy_failed", it->second, s.message());
    return;
  }
  Vm vm = std::move(it->second);
  vms_.erase(it);
  (void)allocator_.release(vm_name);
  Status del = store_.delete_vm(vm_name);
  if (!del.is_ok()) spdlog::error("vm {}: cannot delete record: {}", vm_name, del.to_string());
  emit_vm_locked("vm.destroyed", vm);
  if (!vm.record.lease_id.empty()) {
    auto lit = leases_.find(vm.record.lease_id);
    if (lit != leases_.end() && lit->second.lease.state == LeaseState::kReleasing) {
      ActiveLease& al = lit->second;
      transition_locked(al, al.end_state, al.lease.reason);
      finish_lease_locked(al);
    }
  }
  if (running_) schedule_all_locked();  // freed cores may serve any pool
}

void LeaseEngine::destroy_vm_locked(Vm& vm, std::string reason) {
  vm.cancelled = true;
  if (vm.failure.empty()) vm.failure = std::move(reason);
  if (vm.record.state == VmState::kStarting) return;  // its boot task notices and destroys
  vm.record.state = VmState::kDestroying;
  persist_vm_locked(vm);
  ++ops_in_flight_;
  std::string name = vm.record.name;
  boost::asio::post(*vm.strand, [this, name] {
    destroy(name);
    track_op(-1);
  });
}

void LeaseEngine::finish_lease_locked(ActiveLease& al) {
  std::string id = al.lease.id;
  for (auto& [name, pool] : pools_) {
    pool.queue.erase(std::remove(pool.queue.begin(), pool.queue.end(), id), pool.queue.end());
  }
  leases_.erase(id);
}

void LeaseEngine::begin_release_locked(ActiveLease& al, LeaseState end_state, std::string reason) {
  Lease& l = al.lease;
  al.end_state = end_state;
  if (l.vm_name.empty() || !vms_.count(l.vm_name)) {
    // No VM yet (pending, or waiting for a retry): end it at once.
    transition_locked(al, LeaseState::kReleasing, reason);
    transition_locked(al, end_state, reason);
    finish_lease_locked(al);
    return;
  }
  transition_locked(al, LeaseState::kReleasing, reason);
  destroy_vm_locked(vms_.at(l.vm_name), reason);
}

// ---- LeaseService ------------------------------------------------------------------------

Status LeaseEngine::validate_request_locked(const LeaseRequest& request, const PoolRuntime& pool,
                                            Seconds ttl) {
  if (ttl.count() <= 0) return invalid_argument("ttl", "must be a positive duration");
  if (ttl > kMaxTtl) return invalid_argument("ttl", "must be at most 30 days");
  if (ttl > pool.config.max_ttl) {
    return Status(ErrorCode::kUnprocessable,
                  "ttl " + std::to_string(ttl.count()) + "s exceeds pool '" + pool.config.name +
                      "' max_ttl of " + std::to_string(pool.config.max_ttl.count()) + "s",
                  {}, "ttl");
  }
  if (request.ssh_keys.size() > 32) return invalid_argument("ssh_keys", "at most 32 keys");
  for (size_t i = 0; i < request.ssh_keys.size(); ++i) {
    ARMHIVE_RETURN_IF_ERROR(
        validate_ssh_key("ssh_keys[" + std::to_string(i) + "]", request.ssh_keys[i]));
  }
  ARMHIVE_RETURN_IF_ERROR(validate_labels("labels", request.labels));
  if (request.idempotency_key.size() > 128) {
    return invalid_argument("idempotency_key", "must be at most 128 characters");
  }
  Status fit =
      allocator_.can_ever_fit(pool.config.vcpus, pool.config.cpu_policy, pool.config.overcommit);
  if (!fit.is_ok()) return fit.with_field("pool");
  return Status::ok();
}

Result<Lease> LeaseEngine::create_lease(const LeaseRequest& request) {
  auto requested = std::chrono::steady_clock::now();
  if (!request.idempotency_key.empty()) {
    auto existing = store_.find_by_idempotency_key(request.owner, request.idempotency_key);
    if (!existing.is_ok()) return existing.status();
    if (existing->has_value()) {
      if ((*existing)->pool != request.pool) {
        return Status(ErrorCode::kConflict,
                      "idempotency key was used for a lease on pool '" + (*existing)->pool + "'",
                      (*existing)->id, "idempotency_key");
      }
      return **existing;
    }
  }
  std::string id;
  {
    std::lock_guard lock(mu_);
    if (!running_) return unavailable("the lease engine is not running");
    auto pit = pools_.find(request.pool);
    if (pit == pools_.end()) {
      return Status(ErrorCode::kNotFound, "no pool named '" + request.pool + "'", {}, "pool");
    }
    PoolRuntime& pool = pit->second;
    Seconds ttl = request.ttl.value_or(pool.config.default_ttl);
    ARMHIVE_RETURN_IF_ERROR(validate_request_locked(request, pool, ttl));

    ActiveLease al;
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
    Status s = store_.insert(l);
    if (s.code() == ErrorCode::kConflict && !request.idempotency_key.empty()) {
      // Raced with a retry of the same request: return the winner.
      auto existing = store_.find_by_idempotency_key(request.owner, request.idempotency_key);
      if (existing.is_ok() && existing->has_value()) return **existing;
    }
    ARMHIVE_RETURN_IF_ERROR(s);
    id = l.id;
    emit_locked("lease.created", l);
    leases_.emplace(id, std::move(al));
    pool.queue.push_back(id);
    schedule_locked(pool);
  }
  // A warm hand-out completes in milliseconds: wait for it so the caller gets a ready lease.
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, options_.handout_wait, [&] {
    auto it = leases_.find(id);
    return it == leases_.end() || it->second.lease.state != LeaseState::kProvisioning ||
           !it->second.lease.warm_handout;
  });
  auto it = leases_.find(id);
  if (it != leases_.end()) return it->second.lease;
  lock.unlock();
  return get_lease(id);
}

Result<Lease> LeaseEngine::get_lease(const std::string& id) {
  {
    std::lock_guard lock(mu_);
    auto it = leases_.find(id);
    if (it != leases_.end()) return it->second.lease;
  }
  auto found = store_.find(id);
  if (!found.is_ok()) return found.status();
  if (!found->has_value()) return not_found("no lease with id '" + id + "'", id);
  return **found;
}

Result<std::vector<Lease>> LeaseEngine::list_leases(const LeaseFilter& filter) {
  auto listed = store_.list(filter);
  if (!listed.is_ok()) return listed.status();
  // The store may lag the in-memory reason of a waiting lease; prefer memory for live ones.
  std::lock_guard lock(mu_);
  for (Lease& l : *listed) {
    auto it = leases_.find(l.id);
    if (it != leases_.end()) l = it->second.lease;
  }
  return listed;
}

// Counted in SQL: the store is written on every transition, so its states are current.
Result<std::map<LeaseState, size_t>> LeaseEngine::count_leases(const LeaseFilter& filter) {
  return store_.count(filter);
}

Result<Lease> LeaseEngine::wait_lease(const std::string& id, std::chrono::milliseconds timeout) {
  {
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, timeout, [&] {
      auto it = leases_.find(id);
      return it == leases_.end() || it->second.lease.state == LeaseState::kReady || !running_;
    });
    auto it = leases_.find(id);
    if (it != leases_.end()) return it->second.lease;
  }
  return get_lease(id);
}

Result<Lease> LeaseEngine::renew_lease(const std::string& id, Seconds ttl) {
  std::lock_guard lock(mu_);
  auto it = leases_.find(id);
  if (it == leases_.end()) {
    auto found = store_.find(id);
    if (found.is_ok() && found->has_value()) {
      return conflict("lease " + id + " has ended (" + std::string(to_string((*found)->state)) +
                          "); it cannot be renewed",
                      id);
    }
    return not_found("no lease with id '" + id + "'", id);
  }
  ActiveLease& al = it->second;
  if (al.lease.state == LeaseState::kReleasing) {
    return conflict("lease " + id + " is being released", id);
  }
  const PoolConfig& cfg = pools_.at(al.lease.pool).config;
  if (ttl.count() <= 0) return invalid_argument("ttl", "must be a positive duration");
  if (ttl > cfg.max_ttl) {
    return Status(ErrorCode::kUnprocessable,
                  "ttl " + std::to_string(ttl.count()) + "s exceeds pool '" + cfg.name +
                      "' max_ttl of " + std::to_string(cfg.max_ttl.count()) + "s",
                  {}, "ttl");
  }
  al.lease.ttl = ttl;
  al.lease.expires_at = clock_.now() + ttl;
  Status s = store_.update(al.lease);
  if (!s.is_ok()) return s;
  emit_locked("lease.renewed", al.lease, "expires " + to_rfc3339(al.lease.expires_at));
  return al.lease;
}

Result<Lease> LeaseEngine::release_lease(const std::string& id) {
  {
    std::lock_guard lock(mu_);
    auto it = leases_.find(id);
    if (it != leases_.end()) {
      ActiveLease& al = it->second;
      if (al.lease.state != LeaseState::kReleasing) {
        begin_release_locked(
            al, LeaseState::kReleased,
            "released by " + (al.lease.owner.empty() ? std::string("owner") : al.lease.owner));
      }
      auto again = leases_.find(id);
      if (again != leases_.end()) return again->second.lease;
    }
  }
  return get_lease(id);  // already ended: releasing again is a no-op
}

void LeaseEngine::expire_due_leases() {
  std::lock_guard lock(mu_);
  TimePoint now = clock_.now();
  std::vector<std::string> due;
  for (const auto& [id, al] : leases_) {
    if (al.lease.state != LeaseState::kReleasing && al.lease.expires_at <= now) due.push_back(id);
  }
  for (const std::string& id : due) {
    auto it = leases_.find(id);
    if (it == leases_.end()) continue;
    begin_release_locked(it->second, LeaseState::kExpired,
                         "TTL of " + std::to_string(it->second.lease.ttl.count()) + "s ran out");
  }
}

Result<LeaseEngine::LeaseVm> LeaseEngine::lease_vm(const std::string& lease_id) {
  std::lock_guard lock(mu_);
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) {
    auto found = store_.find(lease_id);
    if (found.is_ok() && found->has_value()) {
      return conflict("lease " + lease_id + " has ended", lease_id);
    }
    return not_found("no lease with id '" + lease_id + "'", lease_id);
  }
  if (it->second.lease.state != LeaseState::kReady) {
    return conflict("lease " + lease_id + " is " + std::string(to_string(it->second.lease.state)) +
                        ", not ready",
                    lease_id);
  }
  return LeaseVm{it->second.lease, pools_.at(it->second.lease.pool).config,
                 allocator_.sets().housekeeping};
}

Result<GuestExecResult> LeaseEngine::exec(const std::string& lease_id,
                                          const GuestExecRequest& request) {
  ARMHIVE_ASSIGN_OR_RETURN(LeaseVm target, lease_vm(lease_id));
  if (request.argv.empty()) return invalid_argument("argv", "must name a program");
  // Not on the strand: a long command must not hold up release or expiry of the VM.
  return hypervisor_.exec(target.lease.vm_name, request);
}

Result<std::string> LeaseEngine::console(const std::string& lease_id, size_t max_bytes) {
  ARMHIVE_ASSIGN_OR_RETURN(Lease lease, get_lease(lease_id));
  if (lease.vm_name.empty()) return conflict("lease " + lease_id + " has no VM yet", lease_id);
  {
    std::lock_guard lock(mu_);
    if (!vms_.count(lease.vm_name)) {
      return conflict("the VM of lease " + lease_id + " no longer exists", lease_id);
    }
  }
  return hypervisor_.console_log(lease.vm_name, max_bytes);
}

std::vector<PoolStatus> LeaseEngine::pools() {
  std::lock_guard lock(mu_);
  std::vector<PoolStatus> out;
  for (const auto& [name, pool] : pools_) {
    PoolStatus st;
    st.config = pool.config;
    for (const auto& [vname, vm] : vms_) {
      if (vm.record.pool != name) continue;
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
    out.push_back(std::move(st));
  }
  return out;
}

std::vector<HostView> LeaseEngine::hosts() {
  std::lock_guard lock(mu_);
  HostView view;
  view.topology = allocator_.topology();
  view.topology.hostname = host_name_;
  view.fragmentation = allocator_.fragmentation();
  for (const CpuUsage& u : allocator_.usage()) {
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
  return {view};
}

std::vector<Event> LeaseEngine::events_since(uint64_t after, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, timeout,
                    [&] { return !running_ || (!events_.empty() && events_.back().seq > after); });
  std::vector<Event> out;
  for (const Event& e : events_) {
    if (e.seq > after) out.push_back(e);
  }
  return out;
}

// ---- events and recovery -----------------------------------------------------------------

void LeaseEngine::on_event(const VmEvent& event) {
  if (event.kind != VmEventKind::kStopped && event.kind != VmEventKind::kCrashed) return;
  std::lock_guard lock(mu_);
  auto it = vms_.find(event.name);
  if (it == vms_.end() || !running_) return;
  vm_gone_locked(it->second,
                 std::string(event.kind == VmEventKind::kCrashed ? "crashed" : "stopped") +
                     (event.detail.empty() ? "" : " (" + event.detail + ")"));
}

// A VM died or vanished without us destroying it: fail its lease, clean up, refill.
void LeaseEngine::vm_gone_locked(Vm& vm, const std::string& why) {
  if (vm.record.state == VmState::kDestroying || vm.cancelled) return;  // our own destroy
  spdlog::warn("vm {}: {}", vm.record.name, why);
  if (metrics_) metrics_->inc("armhive_vm_failures_total", {{"pool", vm.record.pool}});
  emit_vm_locked("vm.crashed", vm, why);
  if (!vm.record.lease_id.empty()) {
    auto lit = leases_.find(vm.record.lease_id);
    if (lit != leases_.end() && lit->second.lease.state != LeaseState::kReleasing) {
      transition_locked(lit->second, LeaseState::kFailed, "VM " + vm.record.name + " " + why);
      finish_lease_locked(lit->second);
    }
  }
  destroy_vm_locked(vm, "VM " + why);
}

// Startup convergence: the database says what should exist, libvirt says what does.
void LeaseEngine::recover() {
  auto records = store_.vms();
  auto active = store_.active();
  auto domains = hypervisor_.list_vms();
  if (!records.is_ok() || !active.is_ok()) {
    spdlog::error("recovery: cannot read the database: {}",
                  (!records.is_ok() ? records.status() : active.status()).to_string());
    return;
  }
  std::map<std::string, VmRecord> by_name;
  for (VmRecord& r : *records) by_name[r.name] = std::move(r);
  std::unique_lock lock(mu_);
  for (Lease& l : *active) {
    ActiveLease al;
    al.lease = std::move(l);
    al.requested = std::chrono::steady_clock::now();
    leases_[al.lease.id] = std::move(al);
  }
  std::set<std::string> alive;
  std::vector<std::string> to_destroy;
  if (!domains.is_ok()) {
    spdlog::error("recovery: cannot list domains: {}", domains.status().to_string());
  } else {
    for (const VmInfo& d : *domains) {
      alive.insert(d.name);
      auto rit = by_name.find(d.name);
      auto pit = rit == by_name.end() ? pools_.end() : pools_.find(rit->second.pool);
      bool adopt = rit != by_name.end() && pit != pools_.end() && d.running &&
                   rit->second.state != VmState::kDestroying;
      if (adopt && !d.lease_id.empty()) {
        auto lit = leases_.find(d.lease_id);
        adopt = lit != leases_.end() && lit->second.lease.vm_name == d.name;
      }
      if (adopt && !d.vcpu_pins.empty()) {
        // The running domain is the truth of where it runs; a database that disagrees is
        // reported, and rewritten when the VM is adopted below.
        Status agree = compare_recorded_pins(d.name, rit->second.cpus, d.vcpu_pins);
        if (!agree.is_ok()) {
          spdlog::warn("recovery: {}", agree.to_string());
          Vm probe;
          probe.record = rit->second;
          emit_vm_locked("vm.pins_mismatch", probe, agree.message());
        }
      }
      if (adopt) {
        std::vector<int> pins = d.vcpu_pins.empty() ? rit->second.cpus : d.vcpu_pins;
        Status s = allocator_.adopt(d.name, pins, pit->second.config.cpu_policy);
        if (!s.is_ok()) {
          spdlog::warn("recovery: {}: {}; destroying it", d.name, s.to_string());
          (void)allocator_.release(d.name);
          adopt = false;
        }
      }
      if (!adopt) {
        spdlog::info("recovery: destroying orphan or unadoptable domain {}", d.name);
        to_destroy.push_back(d.name);
        continue;
      }
      Vm vm;
      vm.record = rit->second;
      vm.record.lease_id = d.lease_id.empty() ? rit->second.lease_id : d.lease_id;
      if (const Placement* p = allocator_.find(d.name)) vm.placement = *p;
      vm.record.cpus = vm.placement.cpus();
      auto bound = leases_.find(vm.record.lease_id);
      if (bound != leases_.end() && bound->second.lease.cpus != vm.record.cpus) {
        bound->second.lease.cpus = vm.record.cpus;
        (void)store_.update(bound->second.lease);
      }
      vm.strand = std::make_shared<Strand>(io_.get_executor());
      vm.boot_started = clock_.now();
      std::string name = d.name;
      bool resume = vm.record.state == VmState::kStarting;
      persist_vm_locked(vm);
      vms_.emplace(name, std::move(vm));
      emit_vm_locked("vm.adopted", vms_.at(name),
                     std::string(to_string(vms_.at(name).record.state)));
      if (resume) {
        TimePoint deadline = clock_.now() + options_.boot_timeout;
        ++ops_in_flight_;
        boost::asio::post(*vms_.at(name).strand, [this, name, deadline] {
          boot_step(name, deadline, /*create=*/false);
          track_op(-1);
        });
      }
    }
  }
  // Records whose domain is gone.
  for (const auto& [name, rec] : by_name) {
    if (!vms_.count(name)) (void)store_.delete_vm(name);
  }
  // Leases whose VM did not survive.
  std::vector<std::string> ids;
  for (const auto& [id, al] : leases_) ids.push_back(id);
  for (const std::string& id : ids) {
    ActiveLease& al = leases_.at(id);
    Lease& l = al.lease;
    bool has_vm = !l.vm_name.empty() && vms_.count(l.vm_name);
    switch (l.state) {
      case LeaseState::kReady:
        if (!has_vm) {
          transition_locked(al, LeaseState::kFailed,
                            "VM " + l.vm_name + " vanished while armhived was down");
          finish_lease_locked(al);
        }
        break;
      case LeaseState::kReleasing:
        if (has_vm) {
          al.end_state = LeaseState::kReleased;
          destroy_vm_locked(vms_.at(l.vm_name), l.reason);
        } else {
          transition_locked(al, LeaseState::kReleased, l.reason);
          finish_lease_locked(al);
        }
        break;
      case LeaseState::kProvisioning:
        if (!has_vm) {
          l.vm_name.clear();
          l.reason = "armhived restarted while provisioning; requeued";
          if (pools_.count(l.pool)) pools_.at(l.pool).queue.push_back(id);
        } else if (vms_.at(l.vm_name).record.state == VmState::kLeased) {
          // Hand-out was in flight: redo it (keys and metadata are idempotent).
          ++ops_in_flight_;
          std::string name = l.vm_name;
          boost::asio::post(*vms_.at(name).strand, [this, name, id] {
            handout(name, id);
            track_op(-1);
          });
        }
        break;
      case LeaseState::kPending:
        if (pools_.count(l.pool)) pools_.at(l.pool).queue.push_back(id);
        break;
      default:
        break;
    }
    if (leases_.count(id) && !pools_.count(leases_.at(id).lease.pool)) {
      transition_locked(leases_.at(id), LeaseState::kFailed,
                        "pool '" + leases_.at(id).lease.pool + "' no longer configured");
      finish_lease_locked(leases_.at(id));
    }
  }
  std::set<std::string> keep;
  for (const auto& [name, vm] : vms_) keep.insert(name);
  // Orphans are destroyed synchronously (no worker runs yet), without the lock.
  lock.unlock();
  for (const std::string& name : to_destroy) {
    Status s = hypervisor_.destroy_vm(name);
    if (!s.is_ok()) spdlog::error("recovery: cannot destroy {}: {}", name, s.to_string());
  }
  auto files = hypervisor_.list_vm_files();
  if (!files.is_ok()) return;
  for (const std::string& name : *files) {
    if (keep.count(name)) continue;
    spdlog::info("recovery: deleting stray files of {}", name);
    Status s = hypervisor_.destroy_vm(name);  // idempotent: deletes the stray files
    if (!s.is_ok()) spdlog::error("recovery: cannot delete files of {}: {}", name, s.to_string());
  }
}

Status LeaseEngine::reconcile() {
  std::set<std::string> known_before;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, vm] : vms_) known_before.insert(name);
  }
  auto domains = hypervisor_.list_vms();
  if (!domains.is_ok()) return domains.status().annotate("reconcile");
  std::set<std::string> alive;
  std::vector<std::string> orphans;
  {
    std::lock_guard lock(mu_);
    for (const VmInfo& d : *domains) {
      alive.insert(d.name);
      if (!vms_.count(d.name) && !known_before.count(d.name)) orphans.push_back(d.name);
    }
    for (const std::string& name : known_before) {
      auto it = vms_.find(name);
      if (it == vms_.end() || alive.count(name)) continue;
      Vm& vm = it->second;
      if (vm.record.state == VmState::kWarm || vm.record.state == VmState::kLeased) {
        vm_gone_locked(vm, "vanished (domain no longer exists)");
      }
    }
  }
  for (const std::string& name : orphans) {
    spdlog::warn("reconcile: destroying orphan domain {}", name);
    Status s = hypervisor_.destroy_vm(name);
    if (!s.is_ok()) spdlog::error("reconcile: {}: {}", name, s.to_string());
  }
  return Status::ok();
}

}  // namespace armhive
