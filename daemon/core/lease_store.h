#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/core/lease.h"
#include "daemon/core/lease_filter.h"
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

  // Insert or replace; idempotent.
  virtual Status put_vm(const VmRecord& vm) = 0;
  // Deleting a record that does not exist is not an error.
  virtual Status delete_vm(const std::string& name) = 0;
  virtual Result<std::vector<VmRecord>> vms() = 0;
};

}  // namespace armhive
