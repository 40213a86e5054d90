// LeaseEngine: the pools of a configuration reload (SIGHUP), applied to the running engine.
// The Daemon logs each change; the engine logs only a removed pool leaving.
#include <spdlog/spdlog.h>

#include "daemon/engine/lease_engine.h"

namespace armhive {

std::vector<std::string> LeaseEngine::reload_pools(const PoolReload& plan) {
  std::vector<std::string> refused;
  {
    MutexLock lock(mu_);
    for (const PoolChange& change : plan.changes) {
      const std::string& name = change.config.name;
      switch (change.kind) {
        case PoolChange::Kind::kUpdate: {
          auto it = pools_.find(name);
          if (it == pools_.end()) break;
          if (change.config.min_warm < it->second.config.min_warm) it->second.shrinking = true;
          it->second.config = change.config;
          break;
        }
        case PoolChange::Kind::kAdd: {
          auto it = pools_.find(name);
          if (it != pools_.end() && it->second.removed) {
            // Removed, not yet empty, and back: it serves again with the file's values.
            it->second.config = change.config;
            it->second.removed = false;
            spdlog::info("pool {}: back in the configuration", name);
            break;
          }
          if (Status fit = pool_fits_locked(change.config); !fit.is_ok()) {
            refused.push_back("pool " + name + " not added: " + fit.message());
            break;
          }
          pools_[name] = PoolRuntime{change.config, {}};
          break;
        }
        case PoolChange::Kind::kRemove: {
          auto it = pools_.find(name);
          if (it == pools_.end()) break;
          it->second.removed = true;
          it->second.config.min_warm = 0;  // its free VMs are retired by the next pass
          it->second.shrinking = true;
          break;
        }
      }
    }
  }
  // Resolves the added pools' images (outside the lock), plans every pool under its new
  // limits, drops removed pools already empty, and writes what that changed.
  schedule();
  changed_.notify_all();
  return refused;
}

void LeaseEngine::drop_removed_pools_locked() {
  for (auto it = pools_.begin(); it != pools_.end();) {
    // Every scheduling pass runs this under mu_: a pool still configured costs nothing.
    if (!it->second.removed) {
      ++it;
      continue;
    }
    const std::string& name = it->first;
    bool in_use = false;
    for (const auto& [vname, vm] : vms_) in_use = in_use || vm.record.pool == name;
    for (const auto& [id, al] : leases_) in_use = in_use || al.lease.pool == name;
    if (in_use) {
      ++it;
      continue;
    }
    spdlog::info("pool {}: removed (no VM or lease of it is left)", name);
    it = pools_.erase(it);
  }
}

}  // namespace armhive
