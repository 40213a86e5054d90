#pragma once

#include <map>
#include <string>
#include <vector>

#include "daemon/core/cpu_sets.h"
#include "daemon/core/host_spec.h"
#include "daemon/core/lease.h"

namespace armhive {

// One libvirt host as armhived's configuration describes it ([[hosts]], or [host] alone).
struct HostSetup {
  std::string name;
  std::string uri;  // qemu:///system, qemu+tls://tx1/system, qemu+ssh://armhive@hc1/system
  std::map<std::string, std::string> labels;
  CpuSetsConfig cpus;  // overrides of discovery; field_prefix names the keys in errors
  // CPUs sharing an L2, which libvirt's capabilities do not list (a remote HoneyComb's pairs).
  // Empty: a local host's from sysfs, a remote host's unknown.
  std::vector<std::vector<int>> l2_clusters;
  std::string vm_dir;     // on that host: the VMs' overlays (LibvirtHypervisorOptions::state_dir)
  std::string image_dir;  // on that host (remote only): the storage pool of shipped images
  // Apply the network guard with this machine's nftables (a local host); false: the host's
  // own provisioning installs it (a remote host: nothing here reaches its ruleset).
  bool guard_here = true;
};

// What the registry needs of a host as an operator described it: its name (spec.name, or
// `name` when the spec leaves it to the machine), the CPU sets its pools need (only pools whose
// host_labels match it count), its clusters parsed, its directories defaulted under
// `state_dir`. The spec must have passed validate_host_spec.
HostSetup make_host_setup(const HostSpec& spec, const std::string& name,
                          const std::vector<PoolConfig>& pools, const std::string& state_dir);

}  // namespace armhive
