#pragma once

#include "daemon/core/topology.h"

namespace armhive {

// Host topologies for tests, shaped like the hosts armhive runs on. Plain values: each call
// builds a fresh one.

// SolidRun HoneyComb LX2K (NXP LX2160A): 16 Cortex-A72 CPUs, 8 L2 clusters of 2 (cluster i =
// CPUs 2i, 2i+1), one NUMA node, no SMT.
HostTopology lx2160a_topology();

// 2-socket Cavium ThunderX CN8890: 96 CPUs, 48 per socket, socket s = NUMA node s = CPUs
// 48s..48s+47. No SMT; the L2 is shared by a whole socket, so cluster = socket.
HostTopology thunderx_2s_topology();

// A small host like the development machine: 2 CPUs, one node, unknown clusters (-1).
HostTopology two_cpu_topology();

// A synthetic host: `nodes` NUMA nodes, each of `clusters_per_node` clusters of
// `cpus_per_cluster` CPUs, numbered consecutively.
HostTopology make_topology(int nodes, int clusters_per_node, int cpus_per_cluster);

}  // namespace armhive
