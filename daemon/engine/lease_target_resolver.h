#pragma once

#include "daemon/bench/lease_target.h"
#include "daemon/core/topology.h"
#include "daemon/engine/catalog_image_source.h"
#include "daemon/engine/lease_engine.h"

namespace armhive {

// Tells the benchmark runner which VM a lease has and what it needs to know about it (address,
// pinned cores, MTU, whether guests are emulated, the image's corpus). The engine, host
// topology and image source are borrowed and must outlive the resolver.
LeaseTargetResolver make_lease_target_resolver(LeaseEngine& engine, const HostTopology& host,
                                               CatalogImageSource& images);

}  // namespace armhive
