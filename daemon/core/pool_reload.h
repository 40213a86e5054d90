#pragma once

#include <string>
#include <vector>

#include "daemon/core/lease.h"

namespace armhive {

// What re-reading the configuration (SIGHUP) does to the pools, decided from the running
// pools and the file's, without I/O.
//
// A pool's sizes, TTLs and limits change in place: min_warm, max, max_starting, default_ttl,
// max_ttl, labels, access_ports, max_extra_ports, files, ssh_permissions. Its shape does not:
// image, vcpus, memory_mib, disk_gib, network, mtu, cpu_policy, overcommit, host_labels, ssh
// and health describe the VMs already running (and the health schedule started with them), so
// a change there keeps the running value and is named as needing a restart. A new pool is
// added; a pool gone from the file is removed once empty (no new leases; its free VMs go, its
// leases run to their end).
struct PoolChange {
  enum class Kind { kUpdate, kAdd, kRemove };
  Kind kind = Kind::kUpdate;
  // kUpdate: the running pool with the new in-place values; kAdd: the new pool; kRemove: the
  // running one.
  PoolConfig config;
  std::vector<std::string> changed;  // kUpdate: the keys that change, e.g. "min_warm"
};

struct PoolReload {
  std::vector<PoolChange> changes;  // pools that change, are added or removed; none: nothing to do
  // One line per shape change: "pool ci: vcpus 2 -> 4 needs a restart (...)".
  std::vector<std::string> restart_needed;
};

PoolReload plan_pool_reload(const std::vector<PoolConfig>& running,
                            const std::vector<PoolConfig>& next);

}  // namespace armhive
