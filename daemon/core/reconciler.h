#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "daemon/core/hypervisor.h"
#include "daemon/core/vm_record.h"

namespace armhive {

// The reconciler: one pure function from what the engine wants (its VM records and live
// leases, of which the database is the persisted copy) and what the host has (libvirt's
// armhive domains and the per-VM files on disk) to a plan of actions. Startup recovery and the
// periodic pass both use it; the engine carries out the plan.
//
// Safety rules, in order:
// - An incomplete snapshot (the database or libvirt could not be read) yields no action at all,
//   only a problem to report: a failed listing never looks like "everything vanished".
// - A domain is destroyed on inference only when its metadata positively marks it armhive's
//   (a vm_id) AND the wanted state positively says it is not wanted (no record, or its lease has
//   ended), seen so on two consecutive complete passes. Stray files likewise.
// - A snapshot speaks for its own host only: a wanted VM recorded on another host is neither
//   adopted nor reported gone because this host lacks its domain, a domain here whose record
//   names another host is a problem to report and is never destroyed, and files named after
//   another host's VM are not strays. (An empty host on either side matches: records and
//   snapshots from before hosts were recorded.)
// - A VM the engine itself decided to destroy (state destroying) is retried when its backoff
//   is due: that continues a decision, it infers nothing.
// Pure: no I/O, no clock (the caller says which destroys are due), no locks.

struct WantedVm {
  VmRecord record;
  bool adopted = false;      // the engine manages it (false during startup recovery)
  bool destroy_due = false;  // destroying, and its retry backoff has elapsed
};

struct WantedSnapshot {
  bool complete = false;
  std::string error;  // why not, when incomplete
  std::vector<WantedVm> vms;
  std::map<std::string, std::string> leases;  // every non-terminal lease: id -> its vm_name
};

struct HostSnapshot {
  std::string name;       // the host it describes (VmRecord::host)
  bool complete = false;  // list_vms succeeded
  std::string error;
  std::vector<VmInfo> domains;
  bool files_complete = false;  // list_vm_files succeeded
  std::string files_error;
  std::vector<std::string> files;  // domain names with an overlay or per-VM files
};

// Whether a VM recorded on `record_host` lives on the host `snapshot_host` (empty matches).
bool on_host(const std::string& record_host, const std::string& snapshot_host);

// What one pass remembers for the next: names seen unwanted on it (one memory per host).
struct ReconcileMemory {
  std::set<std::string> unwanted_domains;
  std::set<std::string> stray_files;
  bool operator==(const ReconcileMemory&) const = default;
};

enum class ReconcileActionKind {
  kAdopt,          // a wanted VM whose domain runs and the engine does not manage yet
  kVmGone,         // a wanted VM whose domain is gone or not running (fail/requeue its lease)
  kRetryDestroy,   // a destroying VM whose backoff is due
  kSuspect,        // ours and unwanted, first pass: hold its cores, destroy next time if still so
  kDestroyDomain,  // ours and unwanted on two consecutive passes
  kDeleteFiles,    // stray files (no domain, no record) on two consecutive passes
};
std::string_view to_string(ReconcileActionKind kind);

struct ReconcileAction {
  ReconcileActionKind kind = ReconcileActionKind::kAdopt;
  std::string name;
  std::string why;
  bool operator==(const ReconcileAction&) const = default;
};

struct ReconcilePlan {
  std::vector<ReconcileAction> actions;  // in name order within each kind, kinds in enum order
  ReconcileMemory memory;                // pass it to the next plan_reconcile
  std::vector<std::string> problems;     // incomplete snapshots: the host is degraded
};

ReconcilePlan plan_reconcile(const WantedSnapshot& wanted, const HostSnapshot& host,
                             const ReconcileMemory& previous);

}  // namespace armhive
