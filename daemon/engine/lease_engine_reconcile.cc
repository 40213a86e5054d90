#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include "daemon/engine/lease_engine.h"

// Start-up recovery and reconcile passes of LeaseEngine (see lease_engine.cc): both take a
// snapshot of libvirt, build the wanted state from memory, and carry out plan_reconcile().

namespace armhive {
namespace {

// A host's listing and the failures of its two calls (reported by the caller: the listing may
// run on a DeadlineWorker that outlives it).
struct Listing {
  HostSnapshot host;
  Status domains;
  Status files;
  void report(EngineHealth& health) const {
    health.failed("hypervisor.list_vms", domains);
    health.failed("hypervisor.list_vm_files", files);
  }
};

Listing list_host(const std::string& name, Hypervisor& hypervisor) {
  Listing out;
  out.host.name = name;
  auto domains = hypervisor.list_vms();
  if (domains.is_ok()) {
    out.host.complete = true;
    out.host.domains = std::move(*domains);
  } else {
    out.domains = domains.status();
    out.host.error = domains.status().to_string();
  }
  auto files = hypervisor.list_vm_files();
  if (files.is_ok()) {
    out.host.files_complete = true;
    out.host.files = std::move(*files);
  } else {
    out.files = files.status();
    out.host.files_error = files.status().to_string();
  }
  return out;
}

HostSnapshot take_host_snapshot(const std::string& name, Hypervisor& hypervisor,
                                EngineHealth& health) {
  Listing listing = list_host(name, hypervisor);
  listing.report(health);
  return std::move(listing.host);
}

}  // namespace

WantedSnapshot LeaseEngine::wanted_locked() const {
  WantedSnapshot w;
  w.complete = true;
  TimePoint now = clock_.now();
  for (const auto& [name, vm] : vms_) {
    bool due = vm.record.state == VmState::kDestroying && !vm.destroy_queued &&
               vm.destroy_failures > 0 && now >= vm.destroy_retry_at;
    w.vms.push_back({vm.record, true, due});
  }
  for (const auto& [name, rec] : unadopted_) {
    if (!vms_.count(name)) w.vms.push_back({rec, false, rec.state == VmState::kDestroying});
  }
  for (const auto& [id, al] : leases_) w.leases[id] = al.lease.vm_name;
  return w;
}

// Takes over a running domain the database knows: its cores are re-derived from the live
// <cputune> (the truth of where it runs; a disagreeing record is reported and rewritten).
void LeaseEngine::adopt_locked(const std::string& host, const VmRecord& record, const VmInfo& d) {
  std::shared_ptr<HostIo> io = host_io(host);  // adopted only from a listing of a driven host
  EngineHealth& health = *io->health;
  auto pit = pools_.find(record.pool);
  if (pit == pools_.end()) {
    health.failed("recovery.adopt", conflict("pool '" + record.pool +
                                                 "' is not configured; "
                                                 "the VM is left alone",
                                             record.name));
    return;
  }
  if (!d.vcpu_pins.empty()) {
    Status agree = compare_recorded_pins(d.name, record.cpus, d.vcpu_pins);
    if (!agree.is_ok()) {
      spdlog::warn("recovery: {}", agree.to_string());
      Vm probe;
      probe.record = record;
      emit_vm_locked("vm.pins_mismatch", probe, agree.message());
    }
  }
  std::vector<int> pins = d.vcpu_pins.empty() ? record.cpus : d.vcpu_pins;
  (void)fleet_.release(d.name);  // cores it held as a suspect
  Status s = fleet_.adopt(host, d.name, record.pool, pins, pit->second.config.cpu_policy);
  if (!s.is_ok()) {
    // Not destroyed: it may run someone's job. Reported; the next pass tries again.
    (void)fleet_.release(d.name);
    health.failed("recovery.adopt", s);
    return;
  }
  Vm vm;
  vm.record = record;
  vm.record.host = host;  // records from before hosts were recorded learn theirs
  vm.record.lease_id = d.lease_id.empty() ? record.lease_id : d.lease_id;
  if (const Placement* p = fleet_.cores(host)->find(d.name)) vm.placement = *p;
  vm.record.cpus = vm.placement.cpus();
  auto bound = leases_.find(vm.record.lease_id);
  if (bound != leases_.end() &&
      (bound->second.lease.cpus != vm.record.cpus || bound->second.lease.host != vm.record.host)) {
    bound->second.lease.cpus = vm.record.cpus;
    bound->second.lease.host = vm.record.host;
    persist_.lease(bound->second.lease);
  }
  vm.strand = strand_for(vm.record.host);
  vm.boot_started = clock_.now();
  if (auto img = pit->second.images.find(host);
      img != pit->second.images.end() && img->second.is_ok()) {
    vm.image = *img->second;
  }
  std::string name = d.name;
  bool resume = vm.record.state == VmState::kStarting;
  persist_vm_locked(vm);
  unadopted_.erase(name);
  auto [it, inserted] = vms_.emplace(name, std::move(vm));
  emit_vm_locked("vm.adopted", it->second, std::string(to_string(it->second.record.state)));
  if (resume) {
    TimePoint deadline = clock_.now() + options_.boot_timeout;
    ++ops_in_flight_;
    boost::asio::post(*it->second.strand, [this, name, deadline] {
      boot_step(name, deadline, /*create=*/false);
      track_op(-1);
    });
  }
  // A hand-out that was in flight when armhived stopped: redo it (idempotent).
  if (bound != leases_.end() && bound->second.lease.state == LeaseState::kProvisioning &&
      it->second.record.state == VmState::kLeased) {
    ++ops_in_flight_;
    std::string id = bound->first;
    boost::asio::post(*it->second.strand, [this, name, id] {
      handout(name, id);
      track_op(-1);
    });
  }
}

void LeaseEngine::apply_plan_locked(const std::string& host, const ReconcilePlan& plan,
                                    const std::vector<VmInfo>& domains,
                                    std::vector<std::string>& to_delete) {
  std::map<std::string, const VmInfo*> live;
  for (const VmInfo& d : domains) live[d.name] = &d;
  for (const ReconcileAction& a : plan.actions) {
    auto vit = vms_.find(a.name);
    switch (a.kind) {
      case ReconcileActionKind::kAdopt: {
        auto rit = unadopted_.find(a.name);
        if (rit != unadopted_.end() && live.count(a.name)) {
          VmRecord record = rit->second;
          adopt_locked(host, record, *live.at(a.name));
        }
        break;
      }
      case ReconcileActionKind::kVmGone: {
        if (vit != vms_.end()) {
          vm_gone_locked(vit->second, "vanished (" + a.why + ")");
          break;
        }
        // A VM recorded before a restart that did not survive it: its lease fails (ready) or
        // waits again (provisioning); what is left of it (files, a stopped domain, the record)
        // is destroyed.
        auto rit = unadopted_.find(a.name);
        if (rit == unadopted_.end()) break;
        Vm vm;
        vm.record = rit->second;
        vm.record.state = VmState::kDestroying;
        vm.record.host = host;
        vm.strand = strand_for(vm.record.host);
        std::string lease_id = vm.record.lease_id;
        vm.record.lease_id.clear();
        unadopted_.erase(rit);
        auto [it, inserted] = vms_.emplace(a.name, std::move(vm));
        auto lit = leases_.find(lease_id);
        if (lit != leases_.end() && lit->second.lease.vm_name == a.name) {
          ActiveLease& al = lit->second;
          if (al.lease.state == LeaseState::kReady) {
            transition_locked(al, LeaseState::kFailed,
                              "VM " + a.name + " vanished while armhived was down (" + a.why + ")");
            finish_lease_locked(al);
          } else if (al.lease.state == LeaseState::kReleasing) {
            it->second.record.lease_id = lease_id;  // destroy() ends it
          } else if (al.lease.state == LeaseState::kProvisioning) {
            al.lease.vm_name.clear();
            al.lease.reason = "armhived restarted while provisioning; requeued";
            persist_.lease(al.lease);
            pools_.at(al.lease.pool).queue.push_back(lease_id);
          }
        }
        persist_vm_locked(it->second);
        post_destroy_locked(it->second);
        break;
      }
      case ReconcileActionKind::kRetryDestroy: {
        if (vit != vms_.end()) {
          post_destroy_locked(vit->second);
          break;
        }
        auto rit = unadopted_.find(a.name);
        if (rit == unadopted_.end()) break;
        Vm vm;
        vm.record = rit->second;
        vm.record.host = host;
        vm.strand = strand_for(vm.record.host);
        if (auto d = live.find(a.name); d != live.end() && !d->second->vcpu_pins.empty()) {
          // Hold its cores until it is gone (conflicts just mean they are not held).
          auto pit = pools_.find(vm.record.pool);
          (void)fleet_.adopt(
              host, a.name, vm.record.pool, d->second->vcpu_pins,
              pit == pools_.end() ? CpuPolicy::kDedicated : pit->second.config.cpu_policy);
        }
        unadopted_.erase(rit);
        auto [it, inserted] = vms_.emplace(a.name, std::move(vm));
        post_destroy_locked(it->second);
        break;
      }
      case ReconcileActionKind::kSuspect: {
        spdlog::warn(
            "reconcile: domain {} is not wanted ({}); destroying it if still so on the "
            "next pass",
            a.name, a.why);
        if (vit == vms_.end() && !fleet_.host_of(a.name)) {
          auto d = live.find(a.name);
          if (d != live.end() && !d->second->vcpu_pins.empty()) {
            // Hold its cores meanwhile so they are not given to a new VM.
            (void)fleet_.adopt(host, a.name, "", d->second->vcpu_pins, CpuPolicy::kDedicated);
          }
        }
        Vm probe;
        probe.record.name = a.name;
        emit_vm_locked("vm.suspect", probe, a.why);
        break;
      }
      case ReconcileActionKind::kDestroyDomain:
        spdlog::warn("reconcile: destroying domain {} ({})", a.name, a.why);
        to_delete.push_back(a.name);
        break;
      case ReconcileActionKind::kDeleteFiles:
        spdlog::info("reconcile: deleting stray files of {}", a.name);
        to_delete.push_back(a.name);
        break;
    }
  }
  // This host's suspects that are no longer suspect give back the cores held for them.
  std::set<std::string> held;
  for (const CpuUsage& u : fleet_.cores(host)->usage()) held.insert(u.vms.begin(), u.vms.end());
  for (const std::string& name : held) {
    if (!vms_.count(name) && !plan.memory.unwanted_domains.count(name)) {
      (void)fleet_.release(name);
    }
  }
}

// Start-up: the database says what should exist, libvirt says what does. An unreadable database
// is an error before anything is touched; an unlistable libvirt adopts nothing and destroys
// nothing (the periodic pass adopts once it can list).
Status LeaseEngine::recover() {
  auto records = store_.vms();
  if (!records.is_ok()) {
    health_.failed("store.vms", records.status());
    return records.status().annotate("recovery: cannot read the VM records");
  }
  auto active = store_.active();
  if (!active.is_ok()) {
    health_.failed("store.active", active.status());
    return active.status().annotate("recovery: cannot read the active leases");
  }
  // Each host's listing under the probe's deadline: a host that does not answer holds up start
  // for that long at most, and starts unreachable (its leases show it; nothing is adopted or
  // destroyed there until it answers).
  std::map<std::string, HostSnapshot> snapshots;
  std::map<std::string, std::string> unreachable;
  for (const std::string& h : host_names()) {
    std::shared_ptr<HostIo> io = host_io(h);
    Hypervisor* hv = io->hypervisor;
    auto listed = io->probe->call<Listing>(
        options_.host_probe_timeout, [h, hv]() -> Result<Listing> { return list_host(h, *hv); });
    if (listed.is_ok()) {
      listed->report(*io->health);
      snapshots[h] = std::move(listed->host);
      continue;
    }
    io->health->failed("hypervisor.list_vms", listed.status());
    HostSnapshot none;
    none.name = h;
    none.error = listed.status().to_string();
    snapshots[h] = std::move(none);
    unreachable[h] = listed.status().code() == ErrorCode::kTimeout
                         ? "libvirt did not answer within " +
                               std::to_string(options_.host_probe_timeout.count()) +
                               " ms at start-up"
                         : listed.status().message();
  }
  MutexLock lock(mu_);
  for (Lease& l : *active) {
    ActiveLease al;
    al.lease = std::move(l);
    al.requested = std::chrono::steady_clock::now();
    leases_[al.lease.id] = std::move(al);
  }
  for (VmRecord& r : *records) {
    // From before hosts were recorded: the one host there was is the first host.
    if (r.host.empty()) r.host = default_host_;
    unadopted_[r.name] = std::move(r);
  }
  for (const std::string& h : host_order_) {
    const HostSnapshot& host = snapshots.at(h);
    ReconcilePlan plan = plan_reconcile(wanted_locked(), host, {});
    for (const std::string& p : plan.problems) spdlog::error("recovery: {}", p);
    std::vector<std::string> to_delete;  // none on a first pass: unwanted ones are suspects
    apply_plan_locked(h, plan, host.domains, to_delete);
    host_sync_.at(h).memory = plan.memory;
    host_sync_.at(h).listed = host.complete;
  }
  for (const auto& [h, why] : unreachable) {
    fleet_.health(h)->unreachable(clock_.now(), why);
    host_unreachable_locked(h, why);
  }
  // Leases whose VM is neither managed nor waiting to be adopted.
  std::vector<std::string> ids;
  for (const auto& [id, al] : leases_) ids.push_back(id);
  for (const std::string& id : ids) {
    ActiveLease& al = leases_.at(id);
    Lease& l = al.lease;
    bool managed = !l.vm_name.empty() && vms_.count(l.vm_name);
    bool recorded = !l.vm_name.empty() && unadopted_.count(l.vm_name);
    if (!pools_.count(l.pool)) {
      if (!managed && !recorded) {
        transition_locked(al, LeaseState::kFailed, "pool '" + l.pool + "' no longer configured");
        finish_lease_locked(al);
      }
      continue;
    }
    if (l.state == LeaseState::kPending) {
      pools_.at(l.pool).queue.push_back(id);
      continue;
    }
    auto listed = snapshots.find(host_name(l.host));
    bool host_complete = listed != snapshots.end() && listed->second.complete;
    if (managed || recorded || !host_complete) continue;  // its VM is (or may be) there
    switch (l.state) {
      case LeaseState::kReady:
      case LeaseState::kHostUnreachable:
        transition_locked(al, LeaseState::kFailed,
                          "VM " + l.vm_name + " vanished while armhived was down");
        finish_lease_locked(al);
        break;
      case LeaseState::kReleasing:
        transition_locked(al, al.end_state, l.reason);
        finish_lease_locked(al);
        break;
      case LeaseState::kProvisioning:
        if (l.vm_name.empty() || !vms_.count(l.vm_name)) {
          l.vm_name.clear();
          l.reason = "armhived restarted while provisioning; requeued";
          persist_.lease(l);
          pools_.at(l.pool).queue.push_back(id);
        }
        break;
      default:
        break;
    }
  }
  // Leases left host_unreachable by the last run whose host answered now and whose VM was
  // adopted: ready again (a lease whose VM is gone was failed above).
  for (auto& [id, al] : leases_) {
    if (al.lease.state != LeaseState::kHostUnreachable) continue;
    const std::string& host = host_name(al.lease.host);
    auto listed = snapshots.find(host);
    if (listed == snapshots.end() || !listed->second.complete || unreachable.count(host)) continue;
    if (al.lease.vm_name.empty() || !vms_.count(al.lease.vm_name)) continue;
    transition_locked(al, LeaseState::kReady, "host " + host + " answered at start-up");
  }
  return Status::ok();
}

Status LeaseEngine::reconcile() {
  Status first;
  for (const std::string& host : host_names()) {
    Status s = reconcile_host(host);
    if (!s.is_ok() && first.is_ok()) first = s;
  }
  if (persist_.pending() == 0) health_.healthy();
  return first;
}

Status LeaseEngine::reconcile_host(const std::string& name) {
  std::shared_ptr<HostIo> io = host_io(name);
  if (io == nullptr) return not_found("no host named '" + name + "'", name);  // removed
  std::lock_guard pass(*io->reconcile_mu);
  // libvirt first, then the wanted state: a VM started in between is wanted (its record is in
  // memory before its domain exists), and one destroyed in between is seen unwanted only once.
  HostSnapshot host = take_host_snapshot(name, *io->hypervisor, *io->health);
  std::vector<std::string> to_delete;
  ReconcilePlan plan;
  bool clean = false;
  {
    MutexLock lock(mu_);
    auto sync_it = host_sync_.find(name);
    if (sync_it == host_sync_.end()) return Status::ok();  // removed meanwhile: nothing of it
    HostSync& sync = sync_it->second;
    plan = plan_reconcile(wanted_locked(), host, sync.memory);
    sync.memory = plan.memory;
    apply_plan_locked(name, plan, host.domains, to_delete);
    if (host.complete && !sync.listed) {
      sync.listed = true;
      schedule_all_locked();
    }
    clean = plan.problems.empty();
    for (const auto& [vm_name, rec] : unadopted_) clean = clean && rec.host != name;
    for (const auto& [vm_name, vm] : vms_) {
      clean = clean && (vm.record.host != name || vm.destroy_failures == 0);
    }
  }
  for (const std::string& vm_name : to_delete) {
    Status s = io->hypervisor->destroy_vm(vm_name);
    MutexLock lock(mu_);
    if (!s.is_ok()) {
      io->health->failed("hypervisor.destroy_vm", s);
      clean = false;
      continue;
    }
    if (!vms_.count(vm_name)) (void)fleet_.release(vm_name);
    unadopted_.erase(vm_name);
    persist_.forget_vm(vm_name);
  }
  flush();
  if (clean) io->health->healthy();
  for (const std::string& p : plan.problems) spdlog::warn("reconcile: {}", p);
  if (!host.complete) {
    return unavailable(host.error).annotate("reconcile of host " + name + ": nothing changed");
  }
  return Status::ok();
}

}  // namespace armhive
