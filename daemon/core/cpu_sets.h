#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/core/topology.h"

namespace armhive {

// The split of a host's CPUs into the sets armhive pins things to:
//   housekeeping  the host itself, NIC interrupts, QEMU emulator and I/O threads (CPU 0 takes
//                 the NIC interrupts on the HoneyComb, so it is never given to a guest);
//   dedicated     pinned 1:1 to vCPUs of dedicated pools, never shared by two VMs;
//   shared        optional, for overcommitted pools.
// CPUs in no set are left alone (e.g. isolated for something else).
//
// Plain data: built once at start-up, then read from any thread.

// A list of host CPU ids, sorted ascending, without duplicates.
using CpuList = std::vector<int>;

// Parses Linux cpuset list syntax ("0-3,8,10-11"; whitespace around items and a trailing
// newline are tolerated; "" is the empty set). Overlapping items are merged. Errors are
// kInvalidArgument naming `field` and quoting the bad item.
Result<CpuList> parse_cpu_list(std::string_view field, std::string_view text);
// The canonical form of a list: ascending, ranges collapsed: {0,1,2,3,8} -> "0-3,8"; {} -> "".
// Accepts unsorted input with duplicates.
std::string format_cpu_list(const std::vector<int>& cpus);

struct CpuSets {
  CpuList housekeeping;
  CpuList dedicated;
  CpuList shared;

  bool is_housekeeping(int cpu) const;
  bool is_dedicated(int cpu) const;
  bool is_shared(int cpu) const;
};

// Configuration overrides, each in cpuset syntax. An absent set takes its default:
//   housekeeping  CPU 0 (the lowest id) on a single-node host; the first CPU of every NUMA node
//                 on a multi-node host (each node's emulator threads stay local);
//   shared        empty;
//   dedicated     every CPU of the host not in housekeeping or shared.
struct CpuSetsConfig {
  std::optional<std::string> housekeeping;
  std::optional<std::string> dedicated;
  std::optional<std::string> shared;
  // What the configured pools need: validation fails when a needed set is empty.
  bool dedicated_pools = true;
  bool shared_pools = false;
  // Prefix of the field names in error messages: "cpus." gives "cpus.dedicated".
  std::string field_prefix = "cpus.";
};

// The defaults described above, for discovery without configuration.
CpuSets default_cpu_sets(const HostTopology& topology);

// Builds and validates the sets: parse errors and validation failures are kInvalidArgument
// naming the field ("cpus.dedicated").
Result<CpuSets> make_cpu_sets(const HostTopology& topology, const CpuSetsConfig& config);

// Checks that every CPU exists on the host, the sets are pairwise disjoint, housekeeping is not
// empty (emulator threads need a home), and dedicated/shared are not empty when pools need them.
Status validate_cpu_sets(const HostTopology& topology, const CpuSets& sets,
                         const CpuSetsConfig& config);

}  // namespace armhive
