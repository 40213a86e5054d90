// LeaseEngine's scheduling passes (plan_pool()'s plan carried out) and per-VM work on each VM's
// strand: create, readiness, hand-out, destroy and retry. ~600 lines for the reason given at
// the top of lease_engine.cc (the fleet recomposition).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include "daemon/core/host_keys.h"
#include "daemon/core/lease_rules.h"
#include "daemon/core/retry_backoff.h"
#include "daemon/engine/lease_engine.h"

namespace armhive {
namespace {

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void dequeue(std::deque<std::string>& queue, const std::string& lease_id) {
  queue.erase(std::remove(queue.begin(), queue.end(), lease_id), queue.end());
}

// The VM's SSH host keys through the guest agent (kHostKeysScript). An error says why there
// are none yet: the agent's failure, the guest's malformed output, or no key at all (its sshd
// has not written them yet); the caller asks again until its deadline.
Result<std::vector<std::string>> read_host_keys(GuestAgent& agent, const std::string& vm_name,
                                                std::chrono::milliseconds timeout) {
  GuestExecRequest req;
  req.argv = {"sh", "-c", kHostKeysScript};
  req.timeout = timeout;
  auto r = agent.exec(vm_name, req);
  if (!r.is_ok()) return r.status();
  if (r->timed_out)
    return Status(ErrorCode::kTimeout, "the guest's key listing timed out", vm_name);
  if (r->exit_code != 0) {
    return unavailable("the guest's key listing exited " + std::to_string(r->exit_code) + ": " +
                           r->err.substr(0, 200),
                       vm_name);
  }
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<std::string> keys, parse_host_keys(r->out));
  if (keys.empty()) return unavailable("no SSH host keys in the guest yet (sshd not up)", vm_name);
  return keys;
}

std::string join_cpus(const std::vector<int>& cpus) {
  std::string out;
  for (int c : cpus) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

}  // namespace

// ---- scheduling --------------------------------------------------------------------------

std::chrono::milliseconds LeaseEngine::backoff(int failures) const {
  return retry_backoff(options_.retry_backoff, options_.max_retry_backoff, failures);
}

// Resolves every pool's image on each host it selects without the lock (resolution may hash
// files, or wait for a host's copy), then caches it and tells the fleet where it is.
void LeaseEngine::refresh_images() {
  struct Want {
    std::string pool, image, host;
  };
  std::vector<Want> wanted;
  {
    MutexLock lock(mu_);
    for (const auto& [name, pool] : pools_) {
      for (const std::string& host : pool_hosts_locked(pool.config)) {
        wanted.push_back({name, pool.config.image, host});
      }
    }
  }
  std::vector<Result<BootImage>> resolved;
  resolved.reserve(wanted.size());
  for (const Want& w : wanted) {
    std::shared_ptr<HostIo> io = host_io(w.host);
    resolved.push_back(io ? io->images(w.image)
                          : Result<BootImage>(not_found("host " + w.host + " was removed")));
  }
  MutexLock lock(mu_);
  for (size_t i = 0; i < wanted.size(); ++i) {
    const Want& w = wanted[i];
    if (fleet_.host(w.host) == nullptr) continue;  // removed meanwhile
    (void)fleet_.set_image(w.host, w.image, resolved[i].is_ok());
    auto pool = pools_.find(w.pool);  // a reload may have dropped it meanwhile
    if (pool != pools_.end()) pool->second.images.insert_or_assign(w.host, std::move(resolved[i]));
  }
}

std::vector<std::string> LeaseEngine::pool_hosts_locked(const PoolConfig& cfg) const {
  std::vector<std::string> out;
  for (const std::string& host : host_order_) {
    if (labels_match(cfg.host_labels, fleet_.host(host)->labels)) out.push_back(host);
  }
  return out;
}

bool LeaseEngine::host_takes_vms_locked(const std::string& host) const {
  const FleetHostState* state = fleet_.host(host);
  return state != nullptr && takes_new_vms(state->health.health());
}

Status LeaseEngine::pool_image_error_locked(const PoolRuntime& pool) const {
  const std::string& image = pool.config.image;
  std::optional<Status> unresolved;
  for (const std::string& host : pool_hosts_locked(pool.config)) {
    auto it = pool.images.find(host);
    if (it == pool.images.end()) {
      if (!unresolved) unresolved = unavailable("image '" + image + "' not resolved yet");
      continue;
    }
    if (it->second.is_ok()) continue;
    const Status& st = it->second.status();
    std::string where = host_order_.size() > 1 ? " (host " + host + ")" : "";
    return Status(st.code(), "image '" + image + "' unavailable: " + st.message() + where,
                  st.context());
  }
  return unresolved ? *unresolved : Status::ok();
}

void LeaseEngine::schedule() {
  refresh_images();
  {
    MutexLock lock(mu_);
    schedule_all_locked();
    drop_removed_pools_locked();
  }
  flush();
}

void LeaseEngine::schedule_all_locked() {
  for (auto& [name, pool] : pools_) schedule_locked(pool);
}

// The live leases of the pool's queue, in order: ended or releasing ones are never served.
bool LeaseEngine::queued_live_locked(const std::string& id) const {
  auto it = leases_.find(id);
  return it != leases_.end() && !is_terminal(it->second.lease.state) &&
         it->second.lease.state != LeaseState::kReleasing;
}

std::vector<std::string> LeaseEngine::live_queue_locked(const PoolRuntime& pool) const {
  std::vector<std::string> out;
  for (const std::string& id : pool.queue) {
    if (queued_live_locked(id)) out.push_back(id);
  }
  return out;
}

std::vector<std::string> LeaseEngine::take_live_head_locked(PoolRuntime& pool, size_t max) {
  std::vector<std::string> out;
  for (auto it = pool.queue.begin(); it != pool.queue.end() && out.size() < max;) {
    if (queued_live_locked(*it)) {
      out.push_back(*it++);
    } else {
      it = pool.queue.erase(it);
    }
  }
  return out;
}

// min_warm = "auto": this pass's min_warm from the pool's demand. Leases waiting beyond the
// free warm VMs are demand the rates have not caught up with yet.
void LeaseEngine::size_auto_pool_locked(PoolRuntime& pool) {
  int free_warm = 0;
  for (const auto& [name, vm] : vms_) {
    if (vm.record.pool == pool.config.name && vm.record.state == VmState::kWarm &&
        vm.record.lease_id.empty() && !vm.cancelled) {
      ++free_warm;
    }
  }
  // Counted only as far as it can matter: past free_warm + auto_max the target is auto_max
  // whatever the rest, and a pass (run by every POST /v1/leases) stays O(pool), not O(queue).
  const int enough = free_warm + pool.config.auto_warm->auto_max;
  int queued = 0;
  auto it = pool.queue.begin();
  for (; it != pool.queue.end() && queued < enough; ++it) {
    queued += queued_live_locked(*it) ? 1 : 0;
  }
  bool more = false;  // one more live lease behind the count is enough to say "at least"
  for (; it != pool.queue.end() && !more; ++it) more = queued_live_locked(*it);
  WarmTarget t = pool.demand.target(clock_.now(), std::max(queued - free_warm, 0),
                                    *pool.config.auto_warm, more);
  if (!pool.warm_target || pool.warm_target->target != t.target) {
    spdlog::info("pool {}: {} warm ({})", pool.config.name, t.target, t.reason);
  }
  pool.config.min_warm = t.target;
  pool.warm_target = std::move(t);
}

// The pool as plan_pool() sees it now. VMs in name order (vms_ is a map): warm ones are handed
// out in that order.
PoolSnapshot LeaseEngine::pool_snapshot_locked(const PoolRuntime& pool) const {
  const PoolConfig& cfg = pool.config;
  PoolSnapshot snap;
  snap.limits = {.min_warm = cfg.min_warm, .max = cfg.max, .max_starting = cfg.max_starting};
  // An auto pool's target goes down as well as up: its surplus is retired like a reload's.
  snap.shrinking = pool.shrinking || cfg.auto_warm.has_value();
  for (const auto& [name, vm] : vms_) {
    if (vm.record.pool != cfg.name) continue;
    // A VM of an unreachable host has left the pool: not handed out, not retired (it may run
    // a job), not counted, so the pool refills on its other hosts.
    if (host_unreachable_now_locked(vm.record.host)) continue;
    snap.vms.push_back({.name = name,
                        .state = vm.record.state,
                        .bound = !vm.record.lease_id.empty(),
                        .cancelled = vm.cancelled,
                        .host_draining = !host_takes_vms_locked(vm.record.host)});
  }
  snap.now = clock_.now();
  // The pool's hosts as one: listed if any is, draining if every listed one is, the image
  // ready if a listed host taking VMs has it. Boots go only to such hosts that are not backing
  // off: their boot slots (max_starting each) and the core slots among those are summed; when
  // every one of them backs off, the pool backs off until the first is done.
  snap.host_listed = false;
  snap.host_draining = true;
  snap.image_ready = false;
  snap.boot_slots = 0;
  bool can_boot = false;
  TimePoint first_retry{};
  for (const auto& [host, b] : boot_hosts_locked(pool, snap.now)) {
    if (b.stage == BootStage::kUnlisted) continue;
    snap.host_listed = true;
    if (b.stage == BootStage::kNotTaking) continue;
    snap.host_draining = false;
    if (b.stage == BootStage::kNoImage) continue;
    snap.image_ready = true;
    if (b.stage == BootStage::kBackingOff) {
      if (first_retry == TimePoint{} || b.retry_after < first_retry) first_retry = b.retry_after;
      continue;
    }
    can_boot = true;
    const CoreAllocator& cores = *fleet_.cores(host);
    int boots = b.boots_left;
    int fits = vm_slots(cfg.vcpus, cfg.cpu_policy == CpuPolicy::kDedicated, cores.free_dedicated(),
                        static_cast<int>(cores.sets().shared.size()), cores.shared_vcpus_in_use(),
                        cfg.overcommit);
    snap.boot_slots += boots;
    snap.free_core_slots += std::min(boots, fits);
  }
  if (!snap.host_listed) snap.host_draining = false;
  if (!can_boot) snap.retry_after = first_retry;
  return snap;
}

std::map<std::string, LeaseEngine::BootHost> LeaseEngine::boot_hosts_locked(const PoolRuntime& pool,
                                                                            TimePoint now) const {
  const PoolConfig& cfg = pool.config;
  std::map<std::string, int> starting = starting_on_locked(cfg.name);
  std::map<std::string, BootHost> out;
  for (const std::string& host : pool_hosts_locked(cfg)) {
    BootHost& b = out[host];
    b.boots_left = std::max(0, cfg.max_starting - starting[host]);
    auto image = pool.images.find(host);
    auto backoff = pool.backoff.find(host);
    if (!host_sync_.at(host).listed) {
      b.stage = BootStage::kUnlisted;
      b.hold = "its domains are not listed yet";
    } else if (!host_takes_vms_locked(host)) {
      b.stage = BootStage::kNotTaking;
      b.hold = "host is " + std::string(to_string(fleet_.host(host)->health.health()));
    } else if (image == pool.images.end() || !image->second.is_ok()) {
      b.stage = BootStage::kNoImage;
      b.hold = "image " + cfg.image + " not on the host yet";
    } else if (backoff != pool.backoff.end() && now < backoff->second.retry_after) {
      b.stage = BootStage::kBackingOff;
      b.retry_after = backoff->second.retry_after;
      b.hold =
          "boots backing off after " + std::to_string(backoff->second.failures) + " failure(s)";
    } else if (b.boots_left == 0) {
      b.stage = BootStage::kFull;
      b.hold = "max_starting (" + std::to_string(cfg.max_starting) + ") VMs booting";
    }
  }
  return out;
}

std::map<std::string, int> LeaseEngine::starting_on_locked(const std::string& pool) const {
  std::map<std::string, int> out;
  for (const auto& [name, vm] : vms_) {
    if (vm.record.pool == pool && vm.record.state == VmState::kStarting) ++out[vm.record.host];
  }
  return out;
}

// The lease's `reason` for what plan_pool() says holds it, with the details the plan leaves
// out (counts, the last failure, the image's error).
std::string LeaseEngine::wait_text_locked(const PoolRuntime& pool, QueueReason reason) const {
  const PoolConfig& cfg = pool.config;
  switch (reason) {
    case QueueReason::kWarmVmBooting:
      return "waiting for a warm VM that is booting";
    case QueueReason::kHostUnavailable:
      return "waiting for libvirt to be listed (the host is degraded)";
    case QueueReason::kHostDraining: {
      std::vector<std::string> hosts = pool_hosts_locked(cfg);
      if (hosts.size() != 1) {
        std::string states;
        for (const std::string& h : hosts) {
          states += (states.empty() ? "" : ", ") + h + " " +
                    std::string(to_string(fleet_.host(h)->health.health()));
        }
        return "no host of pool '" + cfg.name + "' takes new VMs (" + states +
               "): waiting until one does";
      }
      if (host_unreachable_now_locked(hosts.front())) {
        return "host '" + hosts.front() +
               "' is unreachable: " + fleet_.host(hosts.front())->health.last_error();
      }
      return "host '" + hosts.front() + "' is " +
             (fleet_.host(hosts.front())->health.admin() == HostHealthTracker::Admin::kMaintenance
                  ? "in maintenance"
                  : "draining") +
             ": no new VMs until it is undrained";
    }
    case QueueReason::kImageUnavailable: {
      Status error = pool_image_error_locked(pool);
      if (error.is_ok()) return "image '" + cfg.image + "' is on no host that takes VMs now";
      return error.message();
    }
    case QueueReason::kBackingOff: {
      // The host whose backoff ends first: the pool waits for it.
      const PoolRuntime::Backoff* first = nullptr;
      std::string host;
      for (const auto& [name, b] : pool.backoff) {
        if (b.failures > 0 && (first == nullptr || b.retry_after < first->retry_after)) {
          first = &b;
          host = name;
        }
      }
      if (first == nullptr) return "pool '" + cfg.name + "' is backing off";
      return "pool '" + cfg.name + "' is backing off after " + std::to_string(first->failures) +
             " failed boot(s)" + (host_order_.size() > 1 ? " on host " + host : "") + ": " +
             first->last_failure;
    }
    case QueueReason::kAtPoolMax:
      return "pool '" + cfg.name + "' is at max (" + std::to_string(cfg.max) + " VMs)";
    case QueueReason::kAtMaxStarting:
      return "pool '" + cfg.name + "' has max_starting (" + std::to_string(cfg.max_starting) +
             ") VMs booting";
    case QueueReason::kNoFreeCores:
      return "no free cores for a VM of pool '" + cfg.name + "' (" + std::to_string(cfg.vcpus) +
             (cfg.cpu_policy == CpuPolicy::kDedicated ? " dedicated" : " shared") + " vCPUs)";
    case QueueReason::kWarmVmFree:
    case QueueReason::kScheduling:
      break;
  }
  return "queued";
}

void LeaseEngine::set_waiting_locked(ActiveLease& al, const std::string& why) {
  if (al.lease.reason == why) return;
  al.lease.reason = why;
  persist_.lease(al.lease);
  emit_locked("lease.waiting", al.lease, why);
}

// One scheduling pass over a pool: plan_pool() decides, this carries the plan out (it only
// changes memory and posts strand work). A boot that cannot start ends the pass: the limits the
// rest was planned under no longer hold, and the error is the lease's reason.
void LeaseEngine::schedule_locked(PoolRuntime& pool) {
  if (!running_) return;
  if (pool.config.auto_warm && !pool.removed) size_auto_pool_locked(pool);
  PoolSnapshot snap = pool_snapshot_locked(pool);
  // A pass serves at most one waiting lease per VM of the pool (warm, or booting for no lease)
  // plus max_starting new boots; the lease after those waits for a new VM, and so does every
  // lease behind it (plan_pool lets none overtake one waiting for a new VM). Planning only that
  // prefix keeps a pass, which every POST /v1/leases runs, O(pool) however many leases wait;
  // the leases behind it keep their last reason, and their `queue` is computed when read.
  size_t horizon = snap.vms.size() + static_cast<size_t>(std::max(pool.config.max_starting, 0)) + 1;
  snap.queue = take_live_head_locked(pool, horizon);
  PoolPlan plan = plan_pool(snap);
  bool retires_surplus = false;
  for (const PoolAction& a : plan.actions) {
    retires_surplus = retires_surplus ||
                      (a.kind == PoolActionKind::kRetire && a.reason != QueueReason::kHostDraining);
  }
  bool waits = false;
  for (const PoolAction& a : plan.actions) waits = waits || a.kind == PoolActionKind::kWait;
  // Shrunk once no surplus is left to retire (a lease waiting may still need the VMs).
  if (!retires_surplus && !waits) pool.shrinking = false;
  for (const PoolAction& action : plan.actions) {
    switch (action.kind) {
      case PoolActionKind::kHandOut:
        dequeue(pool.queue, action.lease_id);
        begin_handout_locked(vms_.at(action.vm_name), leases_.at(action.lease_id));
        break;
      case PoolActionKind::kBootForLease: {
        ActiveLease& al = leases_.at(action.lease_id);
        auto started = start_vm_locked(pool, action.lease_id);
        if (!started.is_ok()) {
          set_waiting_locked(al, started.status().message());
          return;
        }
        dequeue(pool.queue, action.lease_id);
        al.lease.vm_name = *started;
        al.lease.host = vms_.at(*started).record.host;
        if (al.lease.state == LeaseState::kPending) {
          transition_locked(al, LeaseState::kProvisioning, "booting VM " + *started);
        }
        break;
      }
      case PoolActionKind::kBootWarm: {
        auto started = start_vm_locked(pool, "");
        if (!started.is_ok()) {
          spdlog::debug("pool {}: refill deferred: {}", pool.config.name,
                        started.status().message());
          return;
        }
        break;
      }
      case PoolActionKind::kWait:
        set_waiting_locked(leases_.at(action.lease_id), wait_text_locked(pool, action.reason));
        break;
      case PoolActionKind::kRetire: {
        Vm& vm = vms_.at(action.vm_name);
        destroy_vm_locked(vm, action.reason == QueueReason::kHostDraining
                                  ? "host " + vm.record.host + " is draining"
                                  : "pool " + pool.config.name + " keeps " +
                                        std::to_string(pool.config.min_warm) + " warm");
        break;
      }
    }
  }
}

std::map<std::string, QueueSlot> LeaseEngine::queue_slots_locked(const PoolRuntime& pool) const {
  PoolSnapshot snap = pool_snapshot_locked(pool);
  snap.queue = live_queue_locked(pool);
  PoolPlan plan = plan_pool(snap);
  std::map<std::string, QueueSlot> out;
  for (size_t i = 0; i < snap.queue.size(); ++i) out.emplace(snap.queue[i], plan.slots[i]);
  return out;
}

Lease LeaseEngine::with_queue_locked(const ActiveLease& al) const {
  Lease l = al.lease;
  l.queue.reset();
  // Only pending and provisioning leases can be queued. Everything else (a ready lease that a
  // CI job polls, above all) must not pay for the queue: with thousands of leases waiting, a
  // plan of the whole queue made every GET of a ready lease cost milliseconds.
  if (l.state != LeaseState::kPending && l.state != LeaseState::kProvisioning) return l;
  auto pool = pools_.find(l.pool);
  if (pool == pools_.end()) return l;
  // A slot depends only on how many leases are ahead (plan_slot), and the queue holds live
  // leases only (finish_lease_locked erases an ended one at once), so the lease's index is all
  // it takes. The search runs from the back, where a POST's new lease is: planning the whole
  // prefix made POST cost O(queue) and its p99 grow with the queue (BENCHMARKS.md).
  const std::deque<std::string>& queue = pool->second.queue;
  auto it = std::find(queue.rbegin(), queue.rend(), l.id);
  if (it == queue.rend()) return l;  // provisioning with its VM booting: not queued
  size_t index = static_cast<size_t>(std::distance(it, queue.rend())) - 1;
  l.queue = plan_slot(pool_snapshot_locked(pool->second), index);
  return l;
}

// Reserves cores and posts the boot of a new VM (for a lease, or warm when lease_id is empty).
// Returns the VM name, or why it cannot start now.
Result<std::string> LeaseEngine::start_vm_locked(PoolRuntime& pool, const std::string& lease_id) {
  const PoolConfig& cfg = pool.config;
  bool any_image = false;
  for (const auto& [host, image] : pool.images) any_image = any_image || image.is_ok();
  if (!any_image) {
    Status error = pool_image_error_locked(pool);
    return error.is_ok() ? unavailable("image '" + cfg.image + "' not resolved yet") : error;
  }
  std::string vm_id = new_id_locked("vm-", 8);
  std::string name = "armhive-" + vm_id;
  FleetRequest request = fleet_request_for(cfg, name, options_.strategy);
  // The hosts the snapshot counted no boot slot on (the same function decides both).
  for (const auto& [host, b] : boot_hosts_locked(pool, clock_.now())) {
    if (b.stage != BootStage::kReady) request.held_hosts[host] = b.hold;
  }
  auto placed = fleet_.place(request);
  if (!placed.is_ok()) return placed.status();
  auto image = pool.images.find(placed->host);
  if (image == pool.images.end() || !image->second.is_ok()) {
    (void)fleet_.release(name);  // the fleet holds the image, the pool's cache not (yet)
    return unavailable("image '" + cfg.image + "' not resolved on host " + placed->host + " yet");
  }
  const Placement* placement = &placed->placement;

  Vm vm;
  vm.record.name = name;
  vm.record.vm_id = vm_id;
  vm.record.pool = cfg.name;
  vm.record.host = placed->host;
  vm.record.state = VmState::kStarting;
  vm.record.lease_id = lease_id;
  vm.record.cpus = placement->cpus();
  vm.record.created_at = clock_.now();
  vm.placement = *placement;
  vm.strand = strand_for(vm.record.host);
  vm.image = *image->second;
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
  std::string host;
  {
    MutexLock lock(mu_);
    auto it = vms_.find(vm_name);
    if (it == vms_.end() || !running_) return;
    Vm& vm = it->second;
    cancelled = vm.cancelled;
    host = vm.record.host;
    if (create && !cancelled) {
      const PoolConfig& cfg = pools_.at(vm.record.pool).config;
      const BootImage* image = &vm.image;
      {
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
  if (cancelled) {
    boot_failed(vm_name, "cancelled", false);
    return;
  }
  std::shared_ptr<HostIo> io = host_io(host);
  if (io == nullptr) {
    boot_failed(vm_name, "host " + host + " is not driven by this armhived", false);
    return;
  }
  Hypervisor& hypervisor = *io->hypervisor;
  if (create) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = hypervisor.create_vm(spec);
    if (!s.is_ok()) {
      io->health->failed("hypervisor.create_vm", s);
      // A host that is down or did not answer in time is the host's fault, not the lease's:
      // the lease waits for another VM (on any host) rather than fail.
      boot_failed(vm_name, "cannot create VM: " + s.to_string(),
                  s.code() == ErrorCode::kUnavailable || s.code() == ErrorCode::kTimeout);
      return;
    }
    record_phase(vm_name, "create", t0);  // overlay + define + start
  }
  // Ready means: the guest agent answers, the guest has an address and, in a pool with sshd,
  // its SSH host keys have been read (a client handed the VM can verify it at once). Each step
  // is asked again at the next poll until it answers; an address once known is kept.
  std::string address;
  bool want_keys = true;
  {
    MutexLock lock(mu_);
    auto it = vms_.find(vm_name);
    if (it == vms_.end()) return;
    address = it->second.boot_address;
    want_keys = pools_.at(it->second.record.pool).config.ssh;
  }
  Status ping = Status::ok();
  if (address.empty()) {
    ping = hypervisor.ping_agent(vm_name, options_.agent_timeout);
    if (ping.is_ok()) {
      record_phase(vm_name, "boot", {});  // started -> guest agent answers
      auto addr = hypervisor.guest_address(vm_name);
      if (addr.is_ok()) {
        address = *addr;
        record_phase(vm_name, "readiness", {});  // agent -> address known
        MutexLock lock(mu_);
        if (auto it = vms_.find(vm_name); it != vms_.end()) it->second.boot_address = address;
      }
    }
  }
  std::vector<std::string> host_keys;
  std::string keys_problem;
  if (!address.empty() && want_keys) {
    auto keys = read_host_keys(hypervisor, vm_name, options_.host_keys_timeout);
    if (keys.is_ok()) {
      host_keys = std::move(keys).value();
      record_phase(vm_name, "host_keys", {});  // address -> SSH host keys read
    } else {
      keys_problem = keys.status().message();
    }
  }
  const bool ready = !address.empty() && (!want_keys || !host_keys.empty());
  if (!ready) {
    if (clock_.now() >= deadline) {
      std::string tail;
      auto log = hypervisor.console_log(vm_name, 300);
      if (log.is_ok()) tail = *log;
      std::string state =
          address.empty()
              ? (ping.is_ok() ? "agent answers, no address" : ping.to_string())
              : "agent answers, address " + address + ", SSH host keys not read: " + keys_problem;
      boot_failed(
          vm_name,
          "guest not ready within " +
              std::to_string(std::chrono::duration_cast<Seconds>(options_.boot_timeout).count()) +
              "s (" + state + ")" + (tail.empty() ? "" : "; console tail: " + tail),
          false);
      return;
    }
    MutexLock lock(mu_);
    auto it = vms_.find(vm_name);
    if (it == vms_.end() || !running_) return;
    // On the VM's host io, like the strand its handler runs on: a wait still pending when the
    // engine is destroyed is then dropped with that io, never after the io its timer uses.
    auto timer =
        std::make_shared<boost::asio::steady_timer>(*it->second.strand, options_.agent_poll);
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
    MutexLock lock(mu_);
    auto it = vms_.find(vm_name);
    if (it == vms_.end()) return;
    Vm& vm = it->second;
    if (vm.cancelled) {
      // Cancelled while we were polling: fall through to destroy below.
    } else {
      vm.record.address = address;
      vm.record.host_keys = host_keys;
      if (metrics_) {
        metrics_->observe("armhive_provision_seconds",
                          {{"pool", vm.record.pool}, {"host", vm.record.host}},
                          std::chrono::duration<double>(clock_.now() - vm.boot_started).count());
      }
      lease_id = vm.record.lease_id;
      pools_.at(vm.record.pool).backoff.erase(vm.record.host);
      pools_.at(vm.record.pool)
          .demand.record_boot(std::chrono::duration_cast<Millis>(clock_.now() - vm.boot_started));
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
  MutexLock lock(mu_);
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
    metrics_->observe("armhive_boot_phase_seconds",
                      {{"pool", vm.record.pool}, {"host", vm.record.host}, {"phase", phase}},
                      std::chrono::duration<double>(now - start).count());
  }
}

void LeaseEngine::boot_failed(const std::string& vm_name, std::string why, bool host_down) {
  spdlog::warn("vm {}: {}", vm_name, why);
  {
    MutexLock lock(mu_);
    auto it = vms_.find(vm_name);
    // Shutting down: leave the VM for the next start() to adopt or clean up.
    if (it == vms_.end() || !running_) return;
    Vm& vm = it->second;
    bool was_cancel = vm.cancelled;
    if (was_cancel && !vm.failure.empty()) why = vm.failure;
    if (!was_cancel) {
      if (metrics_) {
        metrics_->inc("armhive_vm_failures_total",
                      {{"pool", vm.record.pool}, {"host", vm.record.host}});
      }
      PoolRuntime::Backoff& b = pools_.at(vm.record.pool).backoff[vm.record.host];
      b.failures = std::min(b.failures + 1, 16);
      b.last_failure = why;
      b.retry_after = clock_.now() + backoff(b.failures);
    }
    emit_vm_locked(was_cancel ? "vm.cancelled" : "vm.failed", vm, why);
    if (!vm.record.lease_id.empty()) {
      auto lit = leases_.find(vm.record.lease_id);
      if (lit != leases_.end()) {
        ActiveLease& al = lit->second;
        switch (after_boot_failure(al.lease.state, host_down)) {
          case LostVmOutcome::kEndedByRelease:  // cancelled by its owner: destroy() ends it
            break;
          case LostVmOutcome::kRequeue:  // it waits for the host to come back
            al.lease.vm_name.clear();
            al.lease.reason = "host down: " + why;
            vm.record.lease_id.clear();
            pools_.at(al.lease.pool).queue.push_front(al.lease.id);
            break;
          case LostVmOutcome::kFail:
            vm.record.lease_id.clear();
            transition_locked(al, LeaseState::kFailed, "VM " + vm_name + " failed: " + why);
            finish_lease_locked(al);
            break;
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
  al.lease.host = vm.record.host;
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
  std::string host;
  bool read_keys = false;  // a warm VM recorded before host keys were (an upgrade)
  {
    MutexLock lock(mu_);
    auto vit = vms_.find(vm_name);
    auto lit = leases_.find(lease_id);
    if (vit == vms_.end()) return;
    host = vit->second.record.host;
    read_keys =
        vit->second.record.host_keys.empty() && pools_.at(vit->second.record.pool).config.ssh;
    if (lit == leases_.end() || lit->second.lease.state == LeaseState::kReleasing ||
        vit->second.cancelled) {
      vit->second.record.state = VmState::kDestroying;
      persist_vm_locked(vit->second);
    } else {
      keys = lit->second.lease.ssh_keys;
      user = vit->second.image.login_user.empty() ? "root" : vit->second.image.login_user;
      vit->second.record.state = VmState::kLeased;
      vit->second.record.lease_id = lease_id;
      persist_vm_locked(vit->second);
      // The VM no longer counts against max_starting: let the next waiting lease's boot start
      // now rather than after the keys are installed (a guest-agent round trip; under TCG
      // hundreds of ms in a burst, during which a boot slot stood idle).
      schedule_locked(pools_.at(vit->second.record.pool));
    }
  }
  if (user.empty()) {  // released meanwhile
    destroy(vm_name);
    return;
  }
  std::shared_ptr<HostIo> io = host_io(host);
  Status s = io == nullptr ? unavailable("host " + host + " is not driven by this armhived")
                           : Status::ok();
  std::vector<std::string> host_keys;
  if (s.is_ok() && read_keys) {
    auto read = read_host_keys(*io->hypervisor, vm_name, options_.host_keys_timeout);
    if (read.is_ok()) {
      host_keys = std::move(read).value();
    } else {
      s = read.status().annotate("reading the VM's SSH host keys");
    }
  }
  if (s.is_ok() && !keys.empty()) {
    s = io->hypervisor->set_authorized_keys(vm_name, user, keys);
    io->health->failed("hypervisor.set_authorized_keys", s);
  }
  if (s.is_ok()) {
    s = io->hypervisor->set_lease(vm_name, lease_id);
    io->health->failed("hypervisor.set_lease", s);
  }
  // The lease's usage counts from here: what the VM used while warm is not the lease's.
  std::optional<UsageCounters> baseline;
  if (s.is_ok()) baseline = vm_counters_of(*io, vm_name);
  bool destroy_vm = false;
  {
    MutexLock lock(mu_);
    auto vit = vms_.find(vm_name);
    auto lit = leases_.find(lease_id);
    if (vit == vms_.end()) return;
    Vm& vm = vit->second;
    if (lit == leases_.end() || lit->second.lease.state == LeaseState::kReleasing) {
      destroy_vm = true;
      vm.record.state = VmState::kDestroying;
    } else if (vm.cancelled || lit->second.lease.vm_name != vm_name) {
      // The lease left this VM meanwhile (its host went unreachable): the lease is not ours.
      destroy_vm = true;
      vm.record.state = VmState::kDestroying;
      vm.record.lease_id.clear();
    } else if (!s.is_ok()) {
      ActiveLease& al = lit->second;
      destroy_vm = true;
      vm.record.state = VmState::kDestroying;
      vm.record.lease_id.clear();
      emit_vm_locked("vm.failed", vm, "hand-out failed: " + s.to_string());
      al.lease.vm_name.clear();
      if (after_handout_failure(al.lease.state, ++al.handout_attempts) == LostVmOutcome::kRequeue) {
        al.lease.reason = "hand-out failed, retrying: " + s.to_string();
        persist_.lease(al.lease);
        pools_.at(al.lease.pool).queue.push_front(al.lease.id);
      } else {
        transition_locked(al, LeaseState::kFailed, "hand-out failed: " + s.to_string());
        finish_lease_locked(al);
      }
    } else {
      ActiveLease& al = lit->second;
      if (!host_keys.empty()) vm.record.host_keys = host_keys;
      al.lease.address = vm.record.address;
      al.lease.host_keys = vm.record.host_keys;
      al.lease.cpus = vm.record.cpus;
      al.lease.login_user = user;  // the user whose keys were just installed
      if (!al.lease.usage) {
        al.lease.usage = start_usage(baseline, clock_.now());
      } else {
        // Measured on another VM before: this one's counters are the new base.
        al.lease.usage->last = baseline.value_or(UsageCounters{});
      }
      transition_locked(al, LeaseState::kReady,
                        (al.lease.warm_handout ? "warm VM " : "VM ") + vm_name + " at " +
                            vm.record.address + " on cores " + join_cpus(vm.record.cpus));
      if (metrics_) {
        metrics_->observe("armhive_handout_seconds",
                          {{"pool", al.lease.pool},
                           {"host", vm.record.host},
                           {"path", al.lease.warm_handout ? "warm" : "cold"}},
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
  std::string host;
  bool metered = false;  // its lease is being released: its usage takes a last sample
  {
    MutexLock lock(mu_);
    auto it = vms_.find(vm_name);
    if (it == vms_.end()) return;
    it->second.record.state = VmState::kDestroying;
    host = it->second.record.host;
    persist_vm_locked(it->second);
    auto lit = leases_.find(it->second.record.lease_id);
    metered = lit != leases_.end() && lit->second.lease.state == LeaseState::kReleasing &&
              lit->second.lease.vm_name == vm_name && lit->second.lease.usage &&
              !lit->second.lease.usage->final;
  }
  std::shared_ptr<HostIo> io = host_io(host);
  if (io != nullptr && metered) final_usage_sample(*io, vm_name);
  Status s = io == nullptr ? unavailable("host " + host + " is not driven by this armhived")
                           : io->hypervisor->destroy_vm(vm_name);
  MutexLock lock(mu_);
  auto it = vms_.find(vm_name);
  if (it == vms_.end()) return;
  it->second.destroy_queued = false;
  if (!s.is_ok()) {
    // Keep the record (and its cores): reconcile passes retry it with backoff.
    if (io != nullptr) io->health->failed("hypervisor.destroy_vm", s);
    if (io == nullptr) health_.failed("hypervisor.destroy_vm", s);
    Vm& vm = it->second;
    ++vm.destroy_failures;
    vm.destroy_retry_at = clock_.now() + backoff(vm.destroy_failures);
    emit_vm_locked("vm.destroy_failed", vm,
                   s.to_string() + "; retry " + std::to_string(vm.destroy_failures) + " at " +
                       to_rfc3339(vm.destroy_retry_at));
    return;
  }
  Vm vm = std::move(it->second);
  vms_.erase(it);
  (void)fleet_.release(vm_name);
  persist_.forget_vm(vm_name);
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
  post_destroy_locked(vm);
}

// Posts destroy() on the VM's strand unless one is already queued.
void LeaseEngine::post_destroy_locked(Vm& vm) {
  if (vm.destroy_queued) return;
  vm.destroy_queued = true;
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
  if (l.state == LeaseState::kHostUnreachable) {
    // Its host does not answer: the lease ends now rather than wait on it, and its VM is
    // destroyed once the host answers (a destroy that fails is retried by reconcile passes).
    std::string vm_name = l.vm_name;
    transition_locked(al, LeaseState::kReleasing, reason);
    transition_locked(al, end_state, reason);
    finish_lease_locked(al);
    auto vit = vms_.find(vm_name);
    if (vit != vms_.end()) {
      vit->second.record.lease_id.clear();
      destroy_vm_locked(vit->second, reason);
    }
    return;
  }
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

// ---- events and recovery -----------------------------------------------------------------

void LeaseEngine::on_event(const VmEvent& event) {
  if (event.kind != VmEventKind::kStopped && event.kind != VmEventKind::kCrashed) return;
  MutexLock lock(mu_);
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
  if (metrics_) {
    metrics_->inc("armhive_vm_failures_total",
                  {{"pool", vm.record.pool}, {"host", vm.record.host}});
  }
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

}  // namespace armhive
