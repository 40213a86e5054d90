#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "base/thread_annotations.h"
#include "daemon/core/clock.h"
#include "daemon/core/lease_store.h"
#include "daemon/engine/engine_health.h"

namespace armhive {

// The engine's writes to its LeaseStore, queued under the engine lock and written after it is
// released, so no engine lock is ever held across SQLite. Writes are coalesced per lease and per
// VM (each is a full, idempotent rewrite, so only the newest version matters), and one flush is
// one LeaseStore::write_batch (one commit); when the batch fails it is retried row by row, so
// a row the store refuses holds back only itself. A write that
// fails stays queued (unless a newer version replaced it meanwhile), is counted through
// EngineHealth, and is retried by later flushes after a backoff (100 ms doubling to 30 s, on
// the injected Clock).
//
// Threading: every method is thread-safe. lease()/vm()/forget_vm() take only a leaf mutex and
// may be called with the engine lock held; flush() blocks on SQLite and must not be. Flushes are
// serialised (one writer at a time), which keeps each key's writes in order.
class PersistQueue {
 public:
  PersistQueue(LeaseStore& store, const Clock& clock, EngineHealth& health);

  void lease(const Lease& lease);
  void vm(const VmRecord& record);
  void forget_vm(const std::string& name);

  // Writes what is queued. `force` ignores the retry backoff (a caller that must know whether
  // its own write landed). Returns the first failure of this flush.
  Status flush(bool force = false);
  // Whether a write of this lease / VM is still waiting (it failed and will be retried).
  bool lease_pending(const std::string& id) const;
  // The newest not-yet-written version of a lease (queued or being written): readers must
  // prefer it to the store, which may lag.
  std::optional<Lease> unwritten_lease(const std::string& id) const;
  bool vm_pending(const std::string& name) const;
  size_t pending() const;

 private:
  LeaseStore& store_;
  const Clock& clock_;
  EngineHealth& health_;
  std::mutex flush_mu_;  // held across SQLite; never taken with mu_ held
  mutable Mutex mu_;
  std::map<std::string, Lease> leases_ GUARDED_BY(mu_);
  std::map<std::string, std::optional<VmRecord>> vms_ GUARDED_BY(mu_);  // nullopt: delete it
  std::map<std::string, Lease> writing_ GUARDED_BY(mu_);  // taken by the flush in progress
  int failures_ GUARDED_BY(mu_) = 0;
  TimePoint retry_after_ GUARDED_BY(mu_){};
};

}  // namespace armhive
