#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/core/topology.h"
#include "daemon/virt/connection.h"

namespace armhive {

// Where the parts of a HostTopology that capabilities do not carry come from.
struct DiscoveryOptions {
  // L2 clusters: explicit lists (configuration of a remote host, tests) win; otherwise they are
  // read from <sysfs_root>/devices/system/cpu/cpuN/cache/indexK/shared_cpu_list (the index
  // whose level is 2) or topology/cluster_cpus_list. Empty sysfs_root: clusters unknown (-1).
  std::optional<std::vector<std::vector<int>>> clusters;
  std::string sysfs_root = "/sys";
  // KVM: explicit (remote host, tests) or probed by opening kvm_device read-write. Only an
  // aarch64 host with usable KVM gets Accel::kKvm.
  std::optional<bool> kvm_usable;
  std::string kvm_device = "/dev/kvm";
  // Without kvm_usable: a remote host's KVM is what its capabilities say (a <domain type='kvm'>
  // for the host's arch, which libvirt lists only where /dev/kvm works), not this machine's.
  bool kvm_from_capabilities = false;
  // Free hugepages per cell are not in capabilities (their <pages> count totals): discover_host
  // asks virNodeGetFreePages; parse_capabilities reports free = total unless given here,
  // indexed [cell][page size KiB].
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> free_hugepages;
};

// Builds a HostTopology from a capabilities document (virConnectGetCapabilities) alone: arch,
// CPU model, NUMA cells with CPUs, memory and hugepage sizes (4 KiB base pages are not
// listed), per-CPU socket/die/core/siblings, plus clusters and accel from `options`.
// hostname is left empty; memory_kib is the sum of the cells. kInvalidArgument if the document
// is malformed or has no <host>.
Result<HostTopology> parse_capabilities(std::string_view capabilities_xml,
                                        const DiscoveryOptions& options);

// The same for the host behind `connection`, adding the hostname, the node memory
// (virNodeGetInfo) and free hugepages (virNodeGetFreePages). Blocks on libvirt.
// `capabilities_xml`, when given, receives the capabilities document the topology came from
// (kept so that a host unreachable at the next start has its topology: parse_capabilities).
Result<HostTopology> discover_host(const Connection& connection, const DiscoveryOptions& options,
                                   std::string* capabilities_xml = nullptr);

// L2 clusters from a sysfs tree (exposed for tests): each list once, sorted by first CPU.
std::vector<std::vector<int>> read_sysfs_clusters(const std::string& sysfs_root);

}  // namespace armhive
