#pragma once

#include <functional>
#include <map>
#include <string>

#include "daemon/bench/lease_target.h"
#include "daemon/core/boot_image.h"
#include "daemon/core/lease.h"
#include "daemon/core/topology.h"

namespace armhive {

// Looks up the VM behind a ready lease (LeaseEngine::lease_vm): kNotFound for an unknown lease,
// kConflict when it is not ready.
using LeasedVmLookup = std::function<Result<LeasedVm>(const std::string& lease_id)>;

// Tells the benchmark runner which VM a lease has and what it needs to know about it (address,
// pinned cores, MTU, whether guests are emulated, the image's corpus). The host topology is
// borrowed and must outlive the resolver.
// `network_bridges` maps a network name to its host bridge (LeaseTarget::bridge).
LeaseTargetResolver make_lease_target_resolver(
    LeasedVmLookup lookup, const HostTopology& host, ImageResolver images,
    std::map<std::string, std::string> network_bridges = {});

}  // namespace armhive
