#include "daemon/core/cluster_view.h"

namespace armhive {

ClusterView single_instance_view(const std::string& holder, const std::string& url,
                                 int64_t started_ms, int64_t now_ms) {
  ClusterView v;
  v.leader = ClusterLeader{holder, url, 0, started_ms};
  v.members.push_back(ClusterMember{holder, url, "leader", started_ms, now_ms, 0});
  return v;
}

}  // namespace armhive
