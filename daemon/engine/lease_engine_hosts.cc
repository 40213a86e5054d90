// LeaseEngine: whether each host answers (issue 13 item 4). A probe per host, on the host's own
// DeadlineWorker, decides: a host that misses the probe's deadline, or whose connection stays
// gone for two probes, is unreachable. Nothing is destroyed on that knowledge alone: its VMs may
// still run someone's job. Its ready leases show host_unreachable, leases still being provisioned
// there wait for a VM on another host, its free VMs leave the pools (which refill elsewhere).
// When it answers again within the grace period its leases are ready again; past the grace they
// end as lost and their VMs are destroyed once the host answers.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/engine/lease_engine.h"

namespace armhive {
namespace {

// "300s", or "200ms" below a second.
std::string seconds_text(std::chrono::milliseconds d) {
  if (d < std::chrono::seconds(1)) return std::to_string(d.count()) + "ms";
  return std::to_string(std::chrono::duration_cast<Seconds>(d).count()) + "s";
}

}  // namespace

std::vector<std::string> LeaseEngine::leases_on_locked(const std::string& host,
                                                       std::optional<LeaseState> state) const {
  std::vector<std::string> out;
  for (const auto& [id, al] : leases_) {
    if (host_name(al.lease.host) == host && (!state || al.lease.state == *state)) {
      out.push_back(id);
    }
  }
  return out;
}

bool LeaseEngine::host_unreachable_now_locked(const std::string& host) const {
  const FleetHostState* state = fleet_.host(host_name(host));
  return state != nullptr && state->health.unreachable_since().has_value();
}

std::vector<std::string> LeaseEngine::probe_hosts() {
  std::vector<std::string> unreachable;
  for (const std::string& host : host_names()) {
    if (!probe_host(host)) unreachable.push_back(host);
  }
  flush();
  return unreachable;
}

void LeaseEngine::probe_loop(const std::string& host) {
  std::shared_ptr<HostIo> io = host_io(host);
  if (io == nullptr) return;
  for (;;) {
    {
      MutexLock lock(mu_);
      changed_.wait_for(lock, options_.host_probe_period,
                        [this, &io]() REQUIRES(mu_) { return !running_ || io->stopping; });
      if (!running_ || io->stopping) return;
    }
    probe_host(host);
    flush();
  }
}

bool LeaseEngine::probe_host(const std::string& host) {
  std::shared_ptr<HostIo> io = host_io(host);
  if (io == nullptr) return true;  // removed meanwhile
  Hypervisor* hv = io->hypervisor;
  // A domain listing: the call every pass needs anyway, and one that goes to libvirtd (a
  // stopped libvirtd never answers it; a closed connection fails it).
  Result<size_t> listed =
      io->probe->call<size_t>(options_.host_probe_timeout, [hv]() -> Result<size_t> {
        auto domains = hv->list_vms();
        if (!domains.is_ok()) return domains.status();
        return domains->size();
      });
  bool back = false;
  bool reachable = true;
  bool repeated = false;  // a failure while already unreachable: counted once per outage
  {
    MutexLock lock(mu_);
    auto sync_it = host_sync_.find(host);
    if (sync_it == host_sync_.end() || fleet_.health(host) == nullptr) return true;  // removed
    HostHealthTracker& tracker = *fleet_.health(host);
    HostSync& sync = sync_it->second;
    TimePoint now = clock_.now();
    bool was_unreachable = tracker.unreachable_since().has_value();
    if (listed.is_ok()) {
      sync.failed_probes = 0;
      tracker.call_succeeded(now);
      // Leases left host_unreachable resume too when the host was never seen away by this
      // process (a restart while it was).
      bool stuck = !leases_on_locked(host, LeaseState::kHostUnreachable).empty();
      if (was_unreachable || stuck) {
        host_back_locked(host);
        back = true;
      }
    } else {
      const Status& st = listed.status();
      ++sync.failed_probes;
      // A missed deadline is unreachable at once; a refused or lost connection when it
      // persists (one kUnavailable is often libvirt reconnecting).
      bool down = st.code() == ErrorCode::kTimeout ||
                  (st.code() == ErrorCode::kUnavailable && sync.failed_probes >= 2);
      std::string why =
          st.code() == ErrorCode::kTimeout
              ? "libvirt did not answer within " + seconds_text(options_.host_probe_timeout)
              : st.message();
      if (was_unreachable) {
        // Still away: the first error stays shown (a later probe mostly finds the worker
        // still stuck in the first one, which says less).
        reachable = false;
        repeated = true;
      } else if (down) {
        reachable = false;
        tracker.unreachable(now, why);
        host_unreachable_locked(host, why);
      } else {
        tracker.call_failed(now, why);
      }
    }
  }
  if (!listed.is_ok() && !repeated) io->health->failed("hypervisor.probe", listed.status());
  if (back) queue_reconcile(host);
  return reachable;
}

void LeaseEngine::host_unreachable_locked(const std::string& host, const std::string& why) {
  spdlog::warn("host {} unreachable: {}", host, why);
  Event e;
  e.at = clock_.now();
  e.type = "host.unreachable";
  e.detail = "host " + host + " unreachable: " + why + "; its VMs may still run: their leases " +
             "end as lost if it does not answer within " + seconds_text(options_.unreachable_grace);
  append_event_locked(std::move(e));
  std::vector<std::string> ids = leases_on_locked(host, std::nullopt);
  // When its leases are lost unless it answers: what their owners want to know.
  const std::optional<TimePoint> since = fleet_.host(host)->health.unreachable_since();
  const std::string lost_at = to_rfc3339(since.value_or(clock_.now()) + options_.unreachable_grace);
  for (const std::string& id : ids) {
    ActiveLease& al = leases_.at(id);
    if (al.lease.state == LeaseState::kReady) {
      transition_locked(al, LeaseState::kHostUnreachable,
                        "host " + host + " unreachable: " + why +
                            "; the VM may still run; the lease ends as lost at " + lost_at +
                            " unless the host answers");
    } else if (al.lease.state == LeaseState::kProvisioning && !al.lease.vm_name.empty()) {
      // Not handed out yet: nobody uses the VM, so the lease takes one on another host. Its
      // VM is destroyed once the host answers (its boot or hand-out task sees it cancelled).
      auto vit = vms_.find(al.lease.vm_name);
      if (vit != vms_.end()) {
        vit->second.record.lease_id.clear();
        destroy_vm_locked(vit->second, "host " + host + " unreachable while provisioning");
      }
      al.lease.vm_name.clear();
      al.lease.host.clear();
      al.lease.warm_handout = false;
      al.lease.reason = "host " + host + " unreachable: waiting for a VM on another host";
      persist_.lease(al.lease);
      emit_locked("lease.waiting", al.lease, al.lease.reason);
      pools_.at(al.lease.pool).queue.push_front(id);
    }
  }
  schedule_all_locked();
}

void LeaseEngine::host_back_locked(const std::string& host) {
  std::vector<std::string> ids = leases_on_locked(host, LeaseState::kHostUnreachable);
  spdlog::info("host {} answers again; {} lease(s) resume", host, ids.size());
  Event e;
  e.at = clock_.now();
  e.type = "host.reachable";
  e.detail = "host " + host + " answers again; " + std::to_string(ids.size()) + " lease(s) resume";
  append_event_locked(std::move(e));
  for (const std::string& id : ids) {
    ActiveLease& al = leases_.at(id);
    // Its VM must still be ours: one found gone is failed by the reconcile pass queued next.
    transition_locked(al, LeaseState::kReady, "host " + host + " answers again");
  }
  schedule_all_locked();
}

void LeaseEngine::lose_past_grace_locked() {
  TimePoint now = clock_.now();
  auto grace = std::chrono::duration_cast<Seconds>(options_.unreachable_grace);
  for (const std::string& host : host_order_) {
    const HostHealthTracker& tracker = fleet_.host(host)->health;
    if (!tracker.past_grace(now, grace)) continue;
    std::string why = "host " + host + " unreachable since " +
                      to_rfc3339(*tracker.unreachable_since()) + ", longer than the grace of " +
                      seconds_text(options_.unreachable_grace) + " (" + tracker.last_error() + ")";
    std::vector<std::string> ids = leases_on_locked(host, LeaseState::kHostUnreachable);
    for (const std::string& id : ids) {
      ActiveLease& al = leases_.at(id);
      std::string vm_name = al.lease.vm_name;
      transition_locked(al, LeaseState::kLost, why);
      finish_lease_locked(al);
      auto vit = vms_.find(vm_name);
      if (vit != vms_.end()) {
        vit->second.record.lease_id.clear();
        destroy_vm_locked(vit->second, why);
      }
    }
    // Its free VMs too: the pools have refilled elsewhere, and nothing may come back to a
    // host that has been away this long without a reconcile pass first.
    for (auto& [name, vm] : vms_) {
      if (vm.record.host != host || vm.cancelled || vm.record.state == VmState::kDestroying) {
        continue;
      }
      if (!vm.record.lease_id.empty() && leases_.count(vm.record.lease_id)) continue;
      destroy_vm_locked(vm, why);
    }
  }
}

}  // namespace armhive

namespace armhive {

Status LeaseEngine::add_host(EngineHost h) {
  if (h.hypervisor == nullptr) {
    return invalid_argument("hypervisor", "host " + h.name + " has no hypervisor");
  }
  {
    MutexLock lock(mu_);
    if (fleet_.host(h.name) != nullptr) {
      return Status(ErrorCode::kConflict, "host '" + h.name + "' is already driven", h.name,
                    "name");
    }
  }
  const std::string name = h.name;
  const std::map<std::string, std::string> labels = h.labels;
  std::shared_ptr<HostIo> io = make_host_io(h);
  {
    MutexLock hosts_lock(hosts_mu_);
    if (host_io_.count(name)) {
      return Status(ErrorCode::kConflict, "host '" + name + "' is being added", name, "name");
    }
    host_io_[name] = io;
  }
  bool running = false;
  {
    MutexLock lock(mu_);
    Status added = fleet_.add_host({name, labels}, std::move(h.cores), clock_.now());
    if (!added.is_ok()) {
      MutexLock hosts_lock(hosts_mu_);
      host_io_.erase(name);
      return added.annotate("host '" + name + "'");
    }
    host_order_.push_back(name);
    host_sync_[name];
    running = running_;
    Event e;
    e.at = clock_.now();
    e.type = "host.added";
    e.detail = "host " + name + " (" + io->uri +
               ") added: listed, then offered to the pools "
               "its labels match once it holds their images";
    append_event_locked(std::move(e));
  }
  spdlog::info("host {} ({}) added", name, io->uri);
  set_event_handler(*io);
  if (running) start_host(*io);
  // Its images (a remote host's are shipped from now on) and its first listing: until that
  // pass, nothing is placed there (its running domains' cores are unknown).
  refresh_images();
  queue_reconcile(name);
  return Status::ok();
}

Status LeaseEngine::remove_host(const std::string& name) {
  std::shared_ptr<HostIo> io;
  {
    MutexLock lock(mu_);
    if (name.empty() || fleet_.host(name) == nullptr) {
      return Status(ErrorCode::kNotFound, "no host named '" + name + "'", name, "name");
    }
    if (name == default_host_) {
      return Status(ErrorCode::kConflict,
                    "host '" + name +
                        "' is the first host: it holds the records from before hosts were "
                        "recorded, and cannot be removed while armhived runs",
                    name, "name");
    }
    int vms = 0;
    for (const auto& [vm_name, vm] : vms_) vms += host_name(vm.record.host) == name ? 1 : 0;
    for (const auto& [vm_name, rec] : unadopted_) vms += host_name(rec.host) == name ? 1 : 0;
    size_t leases = leases_on_locked(name, std::nullopt).size();
    if (vms > 0 || leases > 0) {
      return Status(ErrorCode::kConflict,
                    "host '" + name + "' still has " + std::to_string(leases) + " lease(s) and " +
                        std::to_string(vms) + " VM(s): drain it first (armhive hosts drain " +
                        name + "), let its leases end, then remove it",
                    name, "name");
    }
    ARMHIVE_RETURN_IF_ERROR(fleet_.remove_host(name));
    host_order_.erase(std::find(host_order_.begin(), host_order_.end(), name));
    host_sync_.erase(name);
    for (auto& [pool_name, pool] : pools_) {
      pool.images.erase(name);
      pool.backoff.erase(name);
    }
    Event e;
    e.at = clock_.now();
    e.type = "host.removed";
    e.detail = "host " + name + " removed: no VM is placed there any more";
    append_event_locked(std::move(e));
    schedule_all_locked();
  }
  {
    MutexLock hosts_lock(hosts_mu_);
    auto it = host_io_.find(name);
    io = it->second;
    host_io_.erase(it);
    retired_.push_back(io);  // a strand or a stuck probe call may still hold it
  }
  stop_host(*io);
  io->hypervisor->set_event_handler([](const VmEvent&) {});
  // A host added again later starts undrained.
  Status forgot = store_.put_host_admin(name, HostHealthTracker::Admin::kNone);
  if (!forgot.is_ok()) health_.failed("store.put_host_admin", forgot);
  spdlog::info("host {} removed", name);
  flush();
  return Status::ok();
}

}  // namespace armhive
