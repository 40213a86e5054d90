#include "daemon/bench/lease_target_resolver.h"

namespace armhive {

LeaseTargetResolver make_lease_target_resolver(LeasedVmLookup lookup, const HostTopology& host,
                                               ImageResolver images,
                                               std::map<std::string, std::string> network_bridges) {
  return
      [lookup = std::move(lookup), &host, images = std::move(images),
       bridges = std::move(network_bridges)](const std::string& lease_id) -> Result<LeaseTarget> {
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
        auto image = images(vm.pool.image);
        if (image.is_ok() && !image->corpus_path.empty()) {
          t.corpus_path = image->corpus_path;
          t.corpus_bytes = image->corpus_bytes;
          t.corpus_seed = image->corpus_seed;
          t.corpus_sha256 = image->corpus_sha256;
          t.corpus_description = "armhive corpus of image " + image->name + " " + image->version +
                                 " (seed " + std::to_string(image->corpus_seed) + ")";
        }
        return t;
      };
}

}  // namespace armhive
