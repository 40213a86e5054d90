#include "daemon/engine/persist_queue.h"

#include <algorithm>
#include <utility>

#include "daemon/core/retry_backoff.h"

namespace armhive {

PersistQueue::PersistQueue(LeaseStore& store, const Clock& clock, EngineHealth& health)
    : store_(store), clock_(clock), health_(health) {}

void PersistQueue::lease(const Lease& lease) {
  MutexLock lock(mu_);
  leases_[lease.id] = lease;
}

void PersistQueue::vm(const VmRecord& record) {
  MutexLock lock(mu_);
  vms_[record.name] = record;
}

void PersistQueue::forget_vm(const std::string& name) {
  MutexLock lock(mu_);
  vms_[name] = std::nullopt;
}

Status PersistQueue::flush(bool force) {
  std::lock_guard writer(flush_mu_);
  std::map<std::string, Lease> leases;
  std::map<std::string, std::optional<VmRecord>> vms;
  {
    MutexLock lock(mu_);
    if (leases_.empty() && vms_.empty()) return Status::ok();
    if (!force && failures_ > 0 && clock_.now() < retry_after_) {
      return unavailable("persistence is backing off after a failed write");
    }
    leases.swap(leases_);
    vms.swap(vms_);
    writing_ = leases;
  }
  Status first;
  std::map<std::string, Lease> failed_leases;
  std::map<std::string, std::optional<VmRecord>> failed_vms;
  // One batch (one commit) first; if it fails, row by row, so that one row the store refuses
  // delays only itself and the rest land.
  if (!store_.write_batch(leases, vms).is_ok()) {
    for (auto& [id, l] : leases) {
      Status s = store_.update(l);
      if (s.is_ok()) continue;
      health_.failed("store.update", s);
      if (first.is_ok()) first = s;
      failed_leases.emplace(id, std::move(l));
    }
    for (auto& [name, rec] : vms) {
      Status s = rec ? store_.put_vm(*rec) : store_.delete_vm(name);
      if (s.is_ok()) continue;
      health_.failed(rec ? "store.put_vm" : "store.delete_vm", s);
      if (first.is_ok()) first = s;
      failed_vms.emplace(name, std::move(rec));
    }
  }
  MutexLock lock(mu_);
  writing_.clear();
  // Requeue what failed unless a newer version arrived while we wrote.
  for (auto& [id, l] : failed_leases) leases_.try_emplace(id, std::move(l));
  for (auto& [name, rec] : failed_vms) vms_.try_emplace(name, std::move(rec));
  if (first.is_ok()) {
    failures_ = 0;
  } else {
    failures_ = std::min(failures_ + 1, 16);
    retry_after_ = clock_.now() + retry_backoff(std::chrono::milliseconds(100),
                                                std::chrono::seconds(30), failures_);
  }
  return first;
}

bool PersistQueue::lease_pending(const std::string& id) const {
  MutexLock lock(mu_);
  return leases_.count(id) > 0;
}

std::optional<Lease> PersistQueue::unwritten_lease(const std::string& id) const {
  MutexLock lock(mu_);
  if (auto it = leases_.find(id); it != leases_.end()) return it->second;
  if (auto it = writing_.find(id); it != writing_.end()) return it->second;
  return std::nullopt;
}

bool PersistQueue::vm_pending(const std::string& name) const {
  MutexLock lock(mu_);
  return vms_.count(name) > 0;
}

size_t PersistQueue::pending() const {
  MutexLock lock(mu_);
  return leases_.size() + vms_.size();
}

}  // namespace armhive
