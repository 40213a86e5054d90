#include "daemon/bench/lease_target_resolver.h"

#include <filesystem>

namespace armhive {

LeaseTargetResolver make_lease_target_resolver(LeasedVmLookup lookup, const HostTopology& host,
                                               ImageResolver images,
                                               std::map<std::string, std::string> network_bridges,
                                               OverlayPathFn overlay_path) {
  return [lookup = std::move(lookup), &host, images = std::move(images),
          bridges = std::move(network_bridges), overlay_path = std::move(overlay_path)](
             const std::string& lease_id) -> Result<LeaseTarget> {
    ARMHIVE_ASSIGN_OR_RETURN(LeasedVm vm, lookup(lease_id));
    LeaseTarget t;
    t.vm_name = vm.lease.vm_name;
    t.address = vm.lease.address;
    t.pool = vm.pool.name;
    t.host = host.hostname;
    t.host_arch = host.arch;
    t.cpus = vm.lease.cpus;
    t.housekeeping_cpus = vm.housekeeping;
    t.vcpus = vm.pool.vcpus;
    t.mtu = vm.pool.mtu;
    if (auto b = bridges.find(vm.pool.network); b != bridges.end()) t.bridge = b->second;
    t.emulated = host.accel != Accel::kKvm;
    if (overlay_path && !t.vm_name.empty()) {
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
        t.host_corpus_path = image->host_corpus_file;
      }
      // The catalogue's armhive-stream is built for the image's architecture: on a host of
      // another one it is not the host's program (and would run emulated, if at all).
      if (host.arch == image->arch) t.host_stream_path = image->host_stream_file;
    }
    return t;
  };
}

}  // namespace armhive
