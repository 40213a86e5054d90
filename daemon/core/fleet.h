#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/core/clock.h"
#include "daemon/core/host_health.h"
#include "daemon/core/lease.h"
#include "daemon/core/placement.h"

namespace armhive {

// Placement across the libvirt hosts of one armhived (the pure scheduler for
// the "which host" half). Pure logic, no I/O: host health, images present and time come in as
// data from the caller (the engine, which learns them from each host's connection and its
// image shipping), decisions go out as values.
//
// Ownership and threading: a Fleet owns one CoreAllocator per host and the record of which VM
// of which pool sits where. It is NOT thread-safe: the engine owns one and calls it under its
// lock (nothing here blocks).
//
// Rules:
// - A pool may use a host when every one of the pool's host labels is among the host's labels
//   (no labels: every host), the host's architecture is the one the pool asks for (empty: any),
//   the host holds the pool's image (verified, see set_image), and the shape can ever fit the
//   host's CPU sets.
// - Only `up` and `degraded` hosts take new VMs, `up` ones first: `draining` lets its VMs
//   finish, `unreachable` and `maintenance` take nothing.
// - Spread across hosts: a VM goes to the usable host holding the fewest VMs of its pool that
//   has room now (ties: more free dedicated CPUs, then the name), so with room everywhere the
//   counts of one pool on any two usable hosts differ by at most one and losing a host loses
//   at most its share (ceil(n / hosts)). Within the host the CoreAllocator places the cores
//   (pack/spread, NUMA, L2 clusters, each host's own topology).

// Host states (HostHealth, takes_new_vms) and how calls and the admin move them:
// daemon/core/host_health.h.

// Whether every label in `wanted` is in `have` with the same value.
bool labels_match(const std::map<std::string, std::string>& wanted,
                  const std::map<std::string, std::string>& have);

struct FleetHostSpec {
  std::string name;
  std::map<std::string, std::string> labels;
};

// What one VM of a pool needs from a host.
struct FleetRequest {
  std::string vm_name;
  std::string pool;
  std::string image;                               // must be present on the host
  std::map<std::string, std::string> host_labels;  // the pool's host selector
  std::string arch;                                // empty: any
  int vcpus = 1;
  CpuPolicy policy = CpuPolicy::kDedicated;
  double overcommit = 1.0;
  PlacementStrategy strategy = PlacementStrategy::kPack;
  // Hosts the caller knows cannot take a VM now, and why (domains not listed yet, so free
  // cores unknown; boots backing off; at max_starting): skipped with that reason.
  std::map<std::string, std::string> held_hosts;
};

// The request for one VM of `pool` (its image, host labels and CPU shape).
FleetRequest fleet_request_for(const PoolConfig& pool, std::string vm_name,
                               PlacementStrategy strategy = PlacementStrategy::kPack);

struct FleetPlacement {
  std::string host;
  Placement placement;
};

// Why a host cannot take a request (for GET /v1/pools and the 422/429 messages).
struct HostVerdict {
  std::string host;
  Status status;  // ok: usable now
};

struct FleetHostState {
  std::string name;
  std::map<std::string, std::string> labels;
  // How the host is doing: the caller reports its calls' outcomes and the admin's drain /
  // maintenance through Fleet::health(); placement reads health.health().
  HostHealthTracker health{TimePoint{}};
  std::set<std::string> images;
  std::map<std::string, std::string> vm_pool;  // VM -> pool, the VMs placed here
};

class Fleet {
 public:
  // kConflict when the name is taken, kInvalidArgument for a bad name.
  Status add_host(const FleetHostSpec& spec, CoreAllocator cores, TimePoint now);
  // kNotFound for an unknown host; kConflict "drain first" while VMs are placed on it.
  Status remove_host(const std::string& name);

  // The host's health tracker, for the caller to report calls' outcomes and the admin's
  // drain / maintenance (daemon/core/host_health.h); nullptr for an unknown host.
  HostHealthTracker* health(const std::string& name);
  // Marks an image as present (verified) or absent on a host. kNotFound for an unknown host.
  Status set_image(const std::string& host, const std::string& image, bool present);

  // Chooses a host and cores by the rules above and records the VM. Errors:
  //   kInvalidArgument   bad request (from CoreAllocator);
  //   kConflict          the VM is already placed;
  //   kUnprocessable     no host of the fleet can ever run it (labels, arch, shape), each
  //                      host's reason listed;
  //   kResourceExhausted no usable host has room now (or lacks the image / is not up), each
  //                      host's reason listed: the lease waits.
  Result<FleetPlacement> place(const FleetRequest& request);
  // Records a VM found running on `host` (restart, host back). Errors as CoreAllocator::adopt,
  // and kNotFound for an unknown host.
  Status adopt(const std::string& host, const std::string& vm_name, const std::string& pool,
               const std::vector<int>& vcpu_pins, CpuPolicy policy);
  // Frees the VM's cores wherever it is. kNotFound if the fleet does not know it.
  Status release(const std::string& vm_name);

  // For each host (by name), whether it can take `request` now and, if not, why.
  std::vector<HostVerdict> verdicts(const FleetRequest& request) const;
  // Hosts a pool could ever use (labels and arch only; health, images and load ignored): the
  // start-up check "a pool whose labels match no host".
  std::vector<std::string> hosts_matching(const std::map<std::string, std::string>& host_labels,
                                          const std::string& arch = {}) const;
  // Unreachable hosts whose unreachable period is longer than `grace` at `now`: their leases
  // end as lost.
  std::vector<std::string> unreachable_past_grace(TimePoint now, Seconds grace) const;

  // VMs of `pool` per host (hosts without any are absent).
  std::map<std::string, int> pool_counts(const std::string& pool) const;
  // The host a VM is placed on, or nullptr.
  const std::string* host_of(const std::string& vm_name) const;
  const FleetHostState* host(const std::string& name) const;
  const CoreAllocator* cores(const std::string& name) const;
  std::vector<std::string> host_names() const;  // sorted

 private:
  struct Slot {
    FleetHostState state;
    CoreAllocator cores;
  };
  // Ok when the host could take the request now; otherwise the reason, with the code place()
  // reports (kUnprocessable: never; kResourceExhausted: not now).
  Status usable(const Slot& slot, const FleetRequest& request) const;

  std::map<std::string, Slot> hosts_;
  std::map<std::string, std::string> vm_host_;  // VM -> host
};

}  // namespace armhive
