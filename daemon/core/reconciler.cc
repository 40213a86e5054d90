#include "daemon/core/reconciler.h"

#include <algorithm>

namespace armhive {
namespace {

// Why a wanted VM's domain is not, or no longer, wanted (empty: it is wanted).
std::string unwanted_lease(const WantedVm& w, const VmInfo& d,
                           const std::map<std::string, std::string>& leases) {
  std::string lease = !d.lease_id.empty() ? d.lease_id : w.record.lease_id;
  if (lease.empty()) return {};
  auto it = leases.find(lease);
  if (it == leases.end()) return "its lease " + lease + " has ended";
  if (!it->second.empty() && it->second != d.name) {
    return "its lease " + lease + " is served by " + it->second;
  }
  return {};
}

}  // namespace

std::string_view to_string(ReconcileActionKind kind) {
  switch (kind) {
    case ReconcileActionKind::kAdopt:
      return "adopt";
    case ReconcileActionKind::kVmGone:
      return "vm-gone";
    case ReconcileActionKind::kRetryDestroy:
      return "retry-destroy";
    case ReconcileActionKind::kSuspect:
      return "suspect";
    case ReconcileActionKind::kDestroyDomain:
      return "destroy-domain";
    case ReconcileActionKind::kDeleteFiles:
      return "delete-files";
  }
  return "adopt";
}

bool on_host(const std::string& record_host, const std::string& snapshot_host) {
  return record_host.empty() || snapshot_host.empty() || record_host == snapshot_host;
}

ReconcilePlan plan_reconcile(const WantedSnapshot& wanted, const HostSnapshot& host,
                             const ReconcileMemory& previous) {
  ReconcilePlan plan;
  if (!wanted.complete) plan.problems.push_back("database unreadable: " + wanted.error);
  if (!host.complete) plan.problems.push_back("cannot list domains: " + host.error);
  if (!wanted.complete || !host.complete) return plan;  // nothing, and memory starts over

  std::map<std::string, const WantedVm*> by_name;
  for (const WantedVm& w : wanted.vms) by_name[w.record.name] = &w;
  std::map<std::string, const VmInfo*> domains;
  for (const VmInfo& d : host.domains) domains[d.name] = &d;

  // Wanted VMs against their domains.
  for (const auto& [name, w] : by_name) {
    if (!on_host(w->record.host, host.name)) continue;  // its domain is on another host
    auto dit = domains.find(name);
    const VmInfo* d = dit == domains.end() ? nullptr : dit->second;
    VmState state = w->record.state;
    if (state == VmState::kDestroying) {
      if (w->destroy_due) plan.actions.push_back({ReconcileActionKind::kRetryDestroy, name, ""});
      continue;
    }
    if (d == nullptr || !d->running) {
      // A starting VM the engine manages may not have its domain yet: its boot task (which
      // has a deadline) decides. Anything else without a running domain is gone.
      if (state == VmState::kStarting && w->adopted) continue;
      plan.actions.push_back({ReconcileActionKind::kVmGone, name,
                              d == nullptr ? "domain no longer exists" : "domain is not running"});
      continue;
    }
    if (w->adopted) continue;
    std::string why = unwanted_lease(*w, *d, wanted.leases);
    if (why.empty()) plan.actions.push_back({ReconcileActionKind::kAdopt, name, ""});
  }

  // Domains nobody wants.
  for (const auto& [name, d] : domains) {
    if (d->vm_id.empty()) continue;  // not positively ours: never touched
    auto wit = by_name.find(name);
    std::string why;
    if (wit == by_name.end()) {
      why = "no VM record";
    } else if (!on_host(wit->second->record.host, host.name)) {
      plan.problems.push_back("domain " + name + " runs on " + host.name +
                              " but its record names host " + wit->second->record.host);
      continue;
    } else if (!wit->second->adopted && wit->second->record.state != VmState::kDestroying &&
               d->running) {
      why = unwanted_lease(*wit->second, *d, wanted.leases);
    }
    if (why.empty()) continue;
    plan.memory.unwanted_domains.insert(name);
    bool confirmed = previous.unwanted_domains.count(name) > 0;
    plan.actions.push_back(
        {confirmed ? ReconcileActionKind::kDestroyDomain : ReconcileActionKind::kSuspect, name,
         why});
  }

  // Files of no domain and no record.
  if (!host.files_complete) {
    plan.problems.push_back("cannot list VM files: " + host.files_error);
  } else {
    std::set<std::string> files(host.files.begin(), host.files.end());
    for (const std::string& name : files) {
      if (domains.count(name) || by_name.count(name)) continue;
      plan.memory.stray_files.insert(name);
      if (previous.stray_files.count(name)) {
        plan.actions.push_back({ReconcileActionKind::kDeleteFiles, name, "stray files"});
      }
    }
  }
  std::stable_sort(
      plan.actions.begin(), plan.actions.end(),
      [](const ReconcileAction& a, const ReconcileAction& b) { return a.kind < b.kind; });
  return plan;
}

}  // namespace armhive
