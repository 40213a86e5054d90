#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/core/lease_store.h"
#include "daemon/store/database.h"

namespace armhive {

// LeaseStore in the daemon's SQLite database (tables leases, lease_history, lease_usage, vms,
// host_admin).
// Rows that cannot be understood (an unknown state or purpose string, JSON that is not what the
// schema says) are kInternal errors naming the row, never silently coerced to defaults.
// Threading: thread-safe (Database serialises); calls block on disk only, never on libvirt.
class SqliteLeaseStore final : public LeaseStore {
 public:
  static Result<std::unique_ptr<SqliteLeaseStore>> open(Database& db);
  // The schema's migration steps, in order (upgrade tests build older databases from them).
  static const std::vector<std::string>& schema_steps();

  Status insert(const Lease& lease) override;
  Status update(const Lease& lease) override;
  Result<std::optional<Lease>> find(const std::string& id) override;
  Result<std::optional<Lease>> find_by_idempotency_key(const std::string& owner,
                                                       const std::string& key) override;
  Result<std::vector<Lease>> list(const LeaseFilter& filter) override;
  Result<std::map<LeaseState, size_t>> count(const LeaseFilter& filter) override;  // in SQL
  Result<std::vector<Lease>> active() override;
  // In SQL over leases JOIN lease_usage, every value bound.
  Result<std::vector<UsageRow>> usage(const UsageQuery& q) override;
  Status put_vm(const VmRecord& vm) override;
  Status delete_vm(const std::string& name) override;
  Result<std::vector<VmRecord>> vms() override;
  // One transaction: all or nothing.
  Status write_batch(const std::map<std::string, Lease>& leases,
                     const std::map<std::string, std::optional<VmRecord>>& vms) override;
  Result<std::map<std::string, HostHealthTracker::Admin>> host_admin() override;
  Status put_host_admin(const std::string& host, HostHealthTracker::Admin admin) override;

 private:
  explicit SqliteLeaseStore(Database& db) : db_(db) {}
  Result<std::vector<Lease>> load(const std::string& where, const std::vector<SqlValue>& params,
                                  const std::string& tail = "");
  Database& db_;
};

}  // namespace armhive
