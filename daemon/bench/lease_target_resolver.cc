#include "daemon/bench/lease_target_resolver.h"

#include <filesystem>

namespace armhive {

LeaseTargetResolver make_lease_target_resolver(LeasedVmLookup lookup, LeaseHostLookup hosts,
                                               ImageResolver images,
                                               std::map<std::string, std::string> network_bridges,
                                               OverlayPathFn overlay_path) {
  return [lookup = std::move(lookup), hosts = std::move(hosts), images = std::move(images),
          bridges = std::move(network_bridges), overlay_path = std::move(overlay_path)](
             const std::string& lease_id) -> Result<LeaseTarget> {
    ARMHIVE_ASSIGN_OR_RETURN(LeasedVm vm, lookup(lease_id));
    const LeaseHost where = hosts(vm.lease.host);
    if (where.topology == nullptr) {
      return not_found(
          "the lease's VM is on host '" + vm.lease.host + "', which this armhived does not drive",
          lease_id);
    }
    const HostTopology& host = *where.topology;
    LeaseTarget t;
    t.vm_name = vm.lease.vm_name;
    t.address = vm.lease.address;
    t.pool = vm.pool.name;
    t.host = host.hostname;
    t.host_arch = host.arch;
    t.remote_host = !where.local;
    t.cpus = vm.lease.cpus;
    t.housekeeping_cpus = vm.housekeeping;
    t.vcpus = vm.pool.vcpus;
    t.mtu = vm.pool.mtu;
    t.emulated = host.accel != Accel::kKvm;
    // The bridge, the overlay and the images' host files are on this machine: a remote
    // host's VM has none of them here.
    const bool here = !t.remote_host;
    if (auto b = bridges.find(vm.pool.network); here && b != bridges.end()) t.bridge = b->second;
    if (here && overlay_path && !t.vm_name.empty()) {
      t.disk_path = overlay_path(t.vm_name);
      if (!t.disk_path.empty()) {
        t.host_scratch_dir = std::filesystem::path(t.disk_path).parent_path().string();
      }
    }
    auto image = images(vm.pool.image);
    if (image.is_ok()) {
      if (!image->corpus_path.empty()) {
        t.corpus_path = image->corpus_path;
        t.corpus_bytes = image->corpus_bytes;
        t.corpus_seed = image->corpus_seed;
        t.corpus_sha256 = image->corpus_sha256;
        t.corpus_description = "armhive corpus of image " + image->name + " " + image->version +
                               " (seed " + std::to_string(image->corpus_seed) + ")";
        if (here) t.host_corpus_path = image->host_corpus_file;
      }
      // The catalogue's armhive-stream is built for the image's architecture: on a host of
      // another one it is not the host's program (and would run emulated, if at all).
      if (here && host.arch == image->arch) t.host_stream_path = image->host_stream_file;
    }
    return t;
  };
}

LeaseTargetResolver make_lease_target_resolver(LeasedVmLookup lookup, const HostTopology& host,
                                               ImageResolver images,
                                               std::map<std::string, std::string> network_bridges,
                                               OverlayPathFn overlay_path) {
  return make_lease_target_resolver(
      std::move(lookup),
      [&host](const std::string&) {
        return LeaseHost{&host, true};
      },
      std::move(images), std::move(network_bridges), std::move(overlay_path));
}

}  // namespace armhive
