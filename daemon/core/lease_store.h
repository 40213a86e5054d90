#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/core/host_health.h"
#include "daemon/core/lease.h"
#include "daemon/core/lease_filter.h"
#include "daemon/core/usage_report.h"
#include "daemon/core/vm_record.h"

namespace armhive {

// What the lease engine asks of persistence: leases with their transition history, and VM
// records. The SQLite implementation is SqliteLeaseStore (daemon/store); tests wrap it to
// inject faults.
//
// Errors: kConflict from insert() on a duplicate id or (owner, idempotency key); kInternal when
// a stored row cannot be understood (an unknown state string is an error, never a default);
// kUnavailable when the database cannot be reached.
//
// Threading: implementations are thread-safe. Calls block on disk: never call them with an
// engine lock held.
class LeaseStore {
 public:
  virtual ~LeaseStore() = default;

  // Inserts a new lease with its history.
  virtual Status insert(const Lease& lease) = 0;
  // Rewrites the lease row and appends history entries not yet stored (history is
  // append-only: entries beyond the stored count are new). Idempotent.
  virtual Status update(const Lease& lease) = 0;

  virtual Result<std::optional<Lease>> find(const std::string& id) = 0;
  virtual Result<std::optional<Lease>> find_by_idempotency_key(const std::string& owner,
                                                               const std::string& key) = 0;
  // In creation order, at most effective_limit(filter) leases.
  virtual Result<std::vector<Lease>> list(const LeaseFilter& filter) = 0;
  virtual Result<std::vector<Lease>> active() = 0;  // every non-terminal lease
  // Leases matching `filter` (its limit and cursor ignored), by state. The default pages
  // through list(); SqliteLeaseStore counts in SQL.
  virtual Result<std::map<LeaseState, size_t>> count(const LeaseFilter& filter) {
    LeaseFilter page = filter;
    page.limit = kMaxListLimit;
    page.after_id.clear();
    std::map<LeaseState, size_t> counts;
    for (;;) {
      auto listed = list(page);
      if (!listed.is_ok()) return listed.status();
      for (const Lease& l : *listed) ++counts[l.state];
      if (listed->size() < page.limit || listed->empty()) return counts;
      page.after_id = listed->back().id;
    }
  }

  // The usage report over the leases created in q's window (daemon/core/usage_report.h;
  // update() stores a lease's usage with it). The default pages through list() and
  // aggregates in memory; SqliteLeaseStore sums in SQL.
  virtual Result<std::vector<UsageRow>> usage(const UsageQuery& q) {
    return usage_by_paging(q, [this](const LeaseFilter& f) { return list(f); });
  }

  // Insert or replace; idempotent.
  virtual Status put_vm(const VmRecord& vm) = 0;
  // Deleting a record that does not exist is not an error.
  virtual Status delete_vm(const std::string& name) = 0;
  virtual Result<std::vector<VmRecord>> vms() = 0;

  // Writes lease updates and VM records (nullopt: delete that VM) as one unit: either all of
  // them landed or none did, and the caller retries the whole batch (each write is an
  // idempotent rewrite, so retrying what landed is harmless). The engine's persistence queue
  // flushes through it: one commit per flush instead of one per row, which is what a POST
  // waits for. The default writes them one by one and stops at the first failure (so "none"
  // becomes "some": still safe to retry); SqliteLeaseStore makes it one transaction.
  // Keyed by lease id and VM name, as the persistence queue coalesces them.
  virtual Status write_batch(const std::map<std::string, Lease>& leases,
                             const std::map<std::string, std::optional<VmRecord>>& vms) {
    for (const auto& [id, l] : leases) ARMHIVE_RETURN_IF_ERROR(update(l));
    for (const auto& [name, rec] : vms) {
      ARMHIVE_RETURN_IF_ERROR(rec ? put_vm(*rec) : delete_vm(name));
    }
    return Status::ok();
  }

  // The admin state (drain, maintenance) of every host that has one, by host name; a host
  // missing from the map has none. put_host_admin(host, kNone) forgets the host; idempotent.
  virtual Result<std::map<std::string, HostHealthTracker::Admin>> host_admin() = 0;
  virtual Status put_host_admin(const std::string& host, HostHealthTracker::Admin admin) = 0;
};

}  // namespace armhive
