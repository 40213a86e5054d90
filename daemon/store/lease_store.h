#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/core/lease.h"
#include "daemon/engine/lease_service.h"
#include "daemon/store/database.h"

namespace armhive {

// What the engine intends a VM to be. Persisted so a restarted daemon knows which running
// domains it may adopt (warm or leased) and which were mid-boot and must go.
enum class VmState { kStarting, kWarm, kLeased, kDestroying };
std::string_view to_string(VmState s);
std::optional<VmState> vm_state_from_string(std::string_view s);

struct VmRecord {
  std::string name;
  std::string vm_id;
  std::string pool;
  VmState state = VmState::kStarting;
  std::string lease_id;  // the lease it boots for (cold) or serves; empty when warm
  std::string address;
  std::vector<int> cpus;
  TimePoint created_at;
};

// Leases, their transition history, and VM records, in the daemon's SQLite database.
// Threading: thread-safe (Database serialises); calls block on disk only, never on libvirt.
class LeaseStore {
 public:
  static Result<std::unique_ptr<LeaseStore>> open(Database& db);

  // Inserts a new lease with its history. kConflict if the id or (owner, idempotency key)
  // already exists.
  Status insert(const Lease& lease);
  // Rewrites the lease row and appends history entries not yet stored (the store keeps
  // history append-only: entries beyond the stored count are new).
  Status update(const Lease& lease);

  Result<std::optional<Lease>> find(const std::string& id);
  Result<std::optional<Lease>> find_by_idempotency_key(const std::string& owner,
                                                       const std::string& key);
  // Newest first is not what CI wants when paging: ids come in creation order.
  Result<std::vector<Lease>> list(const LeaseFilter& filter);
  // Leases matching `filter` (limit and cursor ignored) by state, counted in SQL.
  Result<std::map<LeaseState, size_t>> count(const LeaseFilter& filter);
  Result<std::vector<Lease>> active();  // every non-terminal lease

  Status put_vm(const VmRecord& vm);
  Status delete_vm(const std::string& name);
  Result<std::vector<VmRecord>> vms();

 private:
  explicit LeaseStore(Database& db) : db_(db) {}
  Result<std::vector<Lease>> load(const std::string& where, const std::vector<SqlValue>& params,
                                  const std::string& tail = "");
  Database& db_;
};

}  // namespace armhive
