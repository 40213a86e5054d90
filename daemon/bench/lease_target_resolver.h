#pragma once

#include <functional>
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
LeaseTargetResolver make_lease_target_resolver(LeasedVmLookup lookup, const HostTopology& host,
                                               ImageResolver images);

}  // namespace armhive
