#include "daemon/fleet/host_setup.h"

#include "daemon/core/fleet.h"

namespace armhive {

HostSetup make_host_setup(const HostSpec& h, const std::string& name,
                          const std::vector<PoolConfig>& pools, const std::string& state_dir) {
  HostSetup setup;
  setup.name = name;
  setup.uri = h.libvirt_uri;
  setup.labels = h.labels;
  setup.cpus.housekeeping = h.housekeeping_cpus;
  setup.cpus.dedicated = h.dedicated_cpus;
  setup.cpus.shared = h.shared_cpus;
  // Only the pools that may use this host say which CPU sets it needs.
  setup.cpus.dedicated_pools = setup.cpus.shared_pools = false;
  for (const PoolConfig& p : pools) {
    if (!labels_match(p.host_labels, h.labels)) continue;
    (p.cpu_policy == CpuPolicy::kDedicated ? setup.cpus.dedicated_pools : setup.cpus.shared_pools) =
        true;
  }
  setup.cpus.field_prefix = h.field_prefix + "cpus.";
  for (const std::string& cluster : h.l2_clusters) {
    auto cpus = parse_cpu_list(h.field_prefix + "l2_clusters", cluster);
    if (cpus.is_ok()) setup.l2_clusters.push_back(*cpus);  // validate_host_spec refused others
  }
  setup.vm_dir = h.vm_dir.empty() ? state_dir + "/vms" : h.vm_dir;
  setup.image_dir = h.image_dir.empty() ? state_dir + "/shipped-images" : h.image_dir;
  setup.guard_here = h.network_guard == "armhived";
  return setup;
}

}  // namespace armhive
