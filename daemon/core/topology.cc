#include "daemon/core/topology.h"

namespace armhive {

const HostCpu* HostTopology::cpu(int id) const {
  for (const HostCpu& c : cpus) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

std::map<int, std::vector<int>> HostTopology::clusters() const {
  std::map<int, std::vector<int>> out;
  for (const HostCpu& c : cpus) out[c.cluster].push_back(c.id);
  return out;
}

}  // namespace armhive
