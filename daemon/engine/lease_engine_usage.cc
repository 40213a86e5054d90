// LeaseEngine's usage sampling (issue 32 item 5): what a lease's VM used, from its host's
// cumulative counters (VmMeter), with the arithmetic in daemon/core/usage_meter.h.
//
// Three kinds of sample, all applied under mu_ and persisted with the lease:
//   - the baseline, read at hand-out (handout() in lease_engine_vm.cc): the lease starts there;
//   - the periodic sample, every usage_period per host: ONE vm_counters call for all the host's
//     ready leases (sample_host_usage), on the host's own workers;
//   - the final sample, on the VM's strand just before destroy() destroys it while its lease is
//     being released (final_usage_sample); the lease's end makes its usage final
//     (transition_locked).
// The periodic and the final sample of a host hold its usage_mu across the read and the
// apply, so a VM's samples are applied in the order they were read.
#include <boost/asio/post.hpp>

#include "daemon/engine/lease_engine.h"

namespace armhive {

std::optional<UsageCounters> LeaseEngine::vm_counters_of(HostIo& io, const std::string& vm_name) {
  auto read = io.hypervisor->vm_counters({vm_name});
  if (!read.is_ok()) {
    io.health->failed("hypervisor.vm_counters", read.status());
    return std::nullopt;
  }
  for (VmCounters& c : *read) {
    if (c.name == vm_name) return std::move(c.counters);
  }
  return std::nullopt;
}

void LeaseEngine::sample_usage() {
  for (const std::string& host : host_names()) sample_host_usage(host);
  flush();
}

void LeaseEngine::queue_usage(const std::string& host) {
  std::shared_ptr<HostIo> io = host_io(host);
  if (io == nullptr || io->usage_queued->exchange(true)) return;
  // A weak reference, as queue_reconcile's: the handler sits in the HostIo's own io_context.
  boost::asio::post(*io->io, [this, host, weak = std::weak_ptr<HostIo>(io)] {
    sample_host_usage(host);
    if (std::shared_ptr<HostIo> alive = weak.lock()) alive->usage_queued->store(false);
    flush();
  });
}

void LeaseEngine::sample_host_usage(const std::string& host) {
  std::shared_ptr<HostIo> io = host_io(host);
  if (io == nullptr) return;
  std::lock_guard usage_lock(*io->usage_mu);
  std::vector<std::string> names;
  {
    MutexLock lock(mu_);
    if (!running_ || host_unreachable_now_locked(io->name)) return;
    for (const auto& [id, al] : leases_) {
      if (al.lease.state != LeaseState::kReady || host_name(al.lease.host) != io->name ||
          al.lease.vm_name.empty() || vms_.count(al.lease.vm_name) == 0) {
        continue;
      }
      names.push_back(al.lease.vm_name);
    }
  }
  if (names.empty()) return;
  auto read = io->hypervisor->vm_counters(names);
  if (!read.is_ok()) {
    io->health->failed("hypervisor.vm_counters", read.status());
    return;
  }
  MutexLock lock(mu_);
  apply_counters_locked(*read);
}

void LeaseEngine::final_usage_sample(HostIo& io, const std::string& vm_name) {
  std::lock_guard usage_lock(*io.usage_mu);
  std::optional<UsageCounters> last = vm_counters_of(io, vm_name);
  if (!last) return;  // figures stay those of the last periodic sample
  MutexLock lock(mu_);
  apply_counters_locked({{vm_name, *last}});
}

void LeaseEngine::apply_counters_locked(const std::vector<VmCounters>& counters) {
  const TimePoint now = clock_.now();
  for (const VmCounters& c : counters) {
    auto vit = vms_.find(c.name);
    if (vit == vms_.end() || vit->second.record.lease_id.empty()) continue;
    auto lit = leases_.find(vit->second.record.lease_id);
    if (lit == leases_.end()) continue;
    Lease& l = lit->second.lease;
    if (l.vm_name != c.name ||
        (l.state != LeaseState::kReady && l.state != LeaseState::kReleasing)) {
      continue;
    }
    if (!l.usage) {
      // Ready before usage was measured (recovered from an older armhived): from now on.
      l.usage = start_usage(c.counters, now);
      persist_.lease(l);
      continue;
    }
    UsageIncrement inc = apply_usage_sample(*l.usage, c.counters, now);
    persist_.lease(l);
    if (metrics_ == nullptr) continue;
    const Metrics::Labels labels{{"pool", l.pool}, {"owner", l.owner}};
    metrics_->inc("armhive_usage_cpu_seconds_total", labels, static_cast<double>(inc.cpu_ns) / 1e9);
    metrics_->inc("armhive_usage_wall_seconds_total", labels, inc.wall_seconds);
    metrics_->inc("armhive_usage_disk_write_bytes_total", labels,
                  static_cast<double>(inc.disk_write_bytes));
    metrics_->inc("armhive_usage_net_rx_bytes_total", labels,
                  static_cast<double>(inc.net_rx_bytes));
    metrics_->inc("armhive_usage_net_tx_bytes_total", labels,
                  static_cast<double>(inc.net_tx_bytes));
  }
}

}  // namespace armhive
