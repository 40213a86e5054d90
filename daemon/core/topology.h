#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace armhive {

// A host's CPU and memory topology, as discovered from libvirt capabilities plus sysfs (L2
// clusters are not in capabilities) or as stated in configuration for a remote host.
// Plain data: built once, then read from any thread.

struct HostCpu {
  int id = 0;  // the host's logical CPU number (what cpusets name)
  int socket = 0;
  int die = 0;
  int core = 0;
  int cluster = 0;  // CPUs sharing an L2 (LX2160A: pairs). Unique host-wide; -1 if unknown
  int numa_node = 0;
  std::vector<int> siblings;  // SMT siblings including itself
};

struct HugePages {
  uint64_t size_kib = 0;
  uint64_t total = 0;
  uint64_t free = 0;
};

struct NumaCell {
  int id = 0;
  uint64_t memory_kib = 0;
  std::vector<int> cpus;
  std::vector<HugePages> hugepages;
};

enum class Accel { kKvm, kTcg };

struct HostTopology {
  std::string hostname;
  std::string arch;           // host architecture: "aarch64", "x86_64"
  std::string cpu_model;      // e.g. "cortex-a72"
  Accel accel = Accel::kTcg;  // kKvm only on an aarch64 host with a usable /dev/kvm
  uint64_t memory_kib = 0;
  std::vector<HostCpu> cpus;  // sorted by id
  std::vector<NumaCell> cells;

  const HostCpu* cpu(int id) const;
  // CPU ids of each L2 cluster, keyed by cluster id.
  std::map<int, std::vector<int>> clusters() const;
};

}  // namespace armhive
