#include "tests/support/topologies.h"

#include <string>

namespace armhive {

HostTopology make_topology(int nodes, int clusters_per_node, int cpus_per_cluster) {
  HostTopology t;
  t.hostname = "synthetic";
  t.arch = "aarch64";
  t.cpu_model = "cortex-a72";
  t.accel = Accel::kKvm;
  const uint64_t node_kib = 16ULL * 1024 * 1024;
  int id = 0;
  for (int n = 0; n < nodes; ++n) {
    NumaCell cell;
    cell.id = n;
    cell.memory_kib = node_kib;
    cell.hugepages.push_back({2048, 0, 0});
    for (int c = 0; c < clusters_per_node; ++c) {
      for (int k = 0; k < cpus_per_cluster; ++k) {
        HostCpu cpu;
        cpu.id = id;
        cpu.socket = n;
        cpu.core = id - n * clusters_per_node * cpus_per_cluster;
        cpu.cluster = n * clusters_per_node + c;
        cpu.numa_node = n;
        cpu.siblings = {id};
        t.cpus.push_back(cpu);
        cell.cpus.push_back(id);
        ++id;
      }
    }
    t.cells.push_back(cell);
    t.memory_kib += node_kib;
  }
  return t;
}

HostTopology lx2160a_topology() {
  HostTopology t = make_topology(1, 8, 2);
  t.hostname = "honeycomb";
  t.cells[0].memory_kib = 32ULL * 1024 * 1024;
  t.memory_kib = t.cells[0].memory_kib;
  return t;
}

HostTopology thunderx_2s_topology() {
  HostTopology t = make_topology(2, 1, 48);
  t.hostname = "thunderx";
  t.cpu_model = "thunderx";
  for (NumaCell& cell : t.cells) cell.memory_kib = 64ULL * 1024 * 1024;
  t.memory_kib = 128ULL * 1024 * 1024;
  return t;
}

HostTopology two_cpu_topology() {
  HostTopology t = make_topology(1, 1, 2);
  t.hostname = "dev";
  t.arch = "x86_64";
  t.cpu_model = "";
  t.accel = Accel::kTcg;
  for (HostCpu& c : t.cpus) c.cluster = -1;
  return t;
}

}  // namespace armhive
