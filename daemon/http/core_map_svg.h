#pragma once

#include <string>
#include <vector>

#include "daemon/core/topology.h"
#include "daemon/engine/lease_service.h"

namespace armhive {

// Renders a host's core map as a standalone SVG document: one box per host CPU, grouped by
// NUMA node and L2 cluster, coloured by role and use (housekeeping; dedicated free / in use;
// shared free / in use; unassigned), labelled with the CPU number and the lease (or VM) holding
// it, a legend with counts, and a <title> tooltip per CPU (role, node, cluster, lease, VM, pool).
//
// `cores` is what LeaseService::hosts() reports: normally one entry per CPU; a shared CPU
// carrying several VMs may appear once per VM. CPUs of the topology without an entry are drawn
// as unassigned; entries for CPUs the topology does not have are ignored.
//
// All text goes through libxml2's text writer (entities escaped) after replacing invalid UTF-8
// and characters XML forbids with U+FFFD, so lease or VM names cannot alter the document.
// There is no XML declaration, so the result can be inlined in HTML or served as
// image/svg+xml. Every box is a <g class="cpu ..." data-cpu="N">.
//
// Pure and thread-safe, given that main() initialised libxml2 (xmlInitParser()) before
// starting threads.
std::string render_core_map_svg(const HostTopology& topology, const std::vector<CoreUse>& cores);

}  // namespace armhive
