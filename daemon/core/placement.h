#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/core/cpu_sets.h"
#include "daemon/core/lease.h"
#include "daemon/core/topology.h"

namespace armhive {

// Topology-aware choice of host CPUs for VMs. Pure logic, no I/O.
//
// Ownership and threading: a CoreAllocator owns copies of the topology and the CPU sets and
// the allocation state of one host. It is NOT thread-safe: the lease engine owns one per host
// and calls it only under the engine's lock (it never blocks, so holding the lock is cheap).
//
// Rules:
// - Dedicated VMs get one host CPU per vCPU from the dedicated set (1:1 vcpupin); a CPU is never
//   held by two VMs.
// - A VM stays inside one NUMA node whenever some node has enough free dedicated CPUs; only if
//   none does it spans nodes (fewest nodes, largest free first), numa_node is then nullopt and
//   the note says so.
// - L2 clusters (CpuSets' dedicated CPUs grouped by HostCpu::cluster; the whole NUMA node when
//   the cluster is unknown) are filled together. `kPack` (default) is best fit: the cluster /
//   node with the fewest free CPUs that still fits, broken clusters before whole ones, so whole
//   clusters and nodes stay free for large VMs; on the LX2160A a 2-vCPU VM gets both cores of
//   one cluster and an odd one goes to a half-used cluster. `kSpread` picks the node with the
//   most free CPUs and puts consecutive vCPUs on different clusters (more L2 per vCPU, VMs
//   spread over nodes).
// - Shared VMs: each vCPU is pinned to one CPU of the shared set, chosen round-robin over the
//   least-loaded shared CPUs (distinct CPUs within one VM). One CPU per vCPU because that is what
//   VmSpec/VmInfo carry, and it keeps per-core load visible and even. At most
//   floor(overcommit × |shared|) vCPUs in total, checked with the requesting pool's ratio.
// - Emulator threads go to the housekeeping CPUs of the VM's NUMA node (all housekeeping CPUs
//   if that node has none or the VM spans nodes); they never overlap guest CPUs because the
//   sets are disjoint.

enum class PlacementStrategy { kPack, kSpread };
std::string_view to_string(PlacementStrategy s);
std::optional<PlacementStrategy> placement_strategy_from_string(std::string_view s);

struct PlacementRequest {
  std::string vm_name;
  int vcpus = 1;
  CpuPolicy policy = CpuPolicy::kDedicated;
  double overcommit = 1.0;  // shared only: vCPUs per shared CPU
  PlacementStrategy strategy = PlacementStrategy::kPack;
};

// Where a VM runs; fields mirror VmSpec.
struct Placement {
  std::string vm_name;
  CpuPolicy policy = CpuPolicy::kDedicated;
  std::vector<int> vcpu_pins;    // host CPU of vCPU i
  CpuList emulator_cpus;         // housekeeping CPUs for QEMU's own threads
  std::optional<int> numa_node;  // strict memory binding; nullopt when the CPUs span nodes
  std::string note;              // for humans: "NUMA node 0, L2 clusters 3" / "spans NUMA ..."

  CpuList cpus() const;  // the distinct CPUs of vcpu_pins, sorted
};

// Restart check: compares the CPUs the database recorded for a VM (Lease::cpus) with the pins
// of its running domain (VmInfo::vcpu_pins). Ok when they name the same CPUs; otherwise
// kConflict (context: the VM) naming the CPUs found on only one side, so the engine can report
// the disagreement and fix it (the running domain is the truth for adopt(); the record is
// rewritten or the VM destroyed).
Status compare_recorded_pins(const std::string& vm_name, const std::vector<int>& recorded,
                             const std::vector<int>& running);

enum class CpuRole { kHousekeeping, kDedicated, kShared, kUnassigned };
// "housekeeping", "dedicated", "shared", "unassigned" (the strings of CoreUse::role).
std::string_view to_string(CpuRole r);

struct CpuUsage {
  int cpu = 0;
  CpuRole role = CpuRole::kUnassigned;
  std::vector<std::string> vms;  // holders: at most one for dedicated, sorted; empty when free
  int vcpus = 0;                 // vCPUs pinned here (shared CPUs may carry several)
};

class CoreAllocator {
 public:
  // Validates the sets against the topology (see validate_cpu_sets; empty dedicated/shared sets
  // are allowed here: requests for them are then kUnprocessable).
  static Result<CoreAllocator> create(HostTopology topology, CpuSets sets);

  // Chooses CPUs and records them for request.vm_name. Errors:
  //   kInvalidArgument   vcpus < 1, empty name, overcommit not > 0 (field named);
  //   kConflict          the VM already holds CPUs;
  //   kUnprocessable     can never fit on this host (see can_ever_fit);
  //   kResourceExhausted not now: "no free dedicated cores: 14 of 15 in use, 2 needed".
  Result<Placement> allocate(const PlacementRequest& request);

  // Frees everything the VM holds. kNotFound if it holds nothing.
  Status release(const std::string& vm_name);

  // Records a running VM's pins (from the domain's <cputune>) when rebuilding state on restart.
  // Returns kConflict listing every problem: a CPU already held by another VM (or twice by this
  // one, for dedicated), a CPU outside the policy's set, an unknown CPU. The VM is recorded
  // anyway with the CPUs it could claim, so nothing else is placed on them; the caller must fix
  // the VM (re-pin or destroy it) and then release() it. kConflict without recording if the VM
  // is already known; kInvalidArgument for an empty name or empty pins.
  Status adopt(const std::string& vm_name, const std::vector<int>& vcpu_pins, CpuPolicy policy);

  // Ok, or kUnprocessable with the reason a VM of this shape can never fit on this host, even
  // when it is empty (so the API answers 422 instead of letting a lease wait forever).
  Status can_ever_fit(int vcpus, CpuPolicy policy, double overcommit = 1.0) const;

  // One entry per host CPU, sorted by CPU id.
  std::vector<CpuUsage> usage() const;
  // 0 when the free dedicated CPUs form whole clusters (whole nodes where clusters are unknown),
  // 1 when every free dedicated CPU sits in a partly used cluster; 0 when none is free.
  double fragmentation() const;

  const Placement* find(const std::string& vm_name) const;  // nullptr if unknown
  int free_dedicated() const;
  int shared_vcpus_in_use() const;
  const HostTopology& topology() const { return topology_; }
  const CpuSets& sets() const { return sets_; }

 private:
  struct Group {  // dedicated CPUs sharing an L2 cluster (or a node, if unknown)
    int node = 0;
    int cluster = 0;
    CpuList cpus;
  };

  CoreAllocator(HostTopology topology, CpuSets sets);
  int node_of(int cpu) const;
  int free_in(const Group& g) const;
  Result<Placement> allocate_dedicated(const PlacementRequest& request);
  Result<Placement> allocate_shared(const PlacementRequest& request);
  // Picks `count` free CPUs from the groups of `node` (count <= free CPUs there).
  std::vector<int> pick_in_node(int node, int count, PlacementStrategy strategy) const;
  CpuList emulator_cpus_for(const std::vector<int>& cpus) const;

  HostTopology topology_;
  CpuSets sets_;
  std::vector<Group> groups_;
  std::map<int, int> node_of_cpu_;
  std::map<int, std::string> dedicated_owner_;             // cpu -> VM
  std::map<int, std::map<std::string, int>> shared_load_;  // cpu -> VM -> vCPUs
  std::map<std::string, Placement> vms_;
};

}  // namespace armhive
