#include "cli/cluster_view.h"

#include <algorithm>
#include <cmath>

#include "cli/table.h"

namespace armhive {

std::string contact_age_text(double seconds) {
  const auto s = static_cast<long long>(std::floor(std::max(0.0, seconds)));
  if (s < 120) return std::to_string(s) + " s ago";
  if (s < 2 * 3600) return std::to_string(s / 60) + " min ago";
  if (s < 2 * 86400) return std::to_string(s / 3600) + " h ago";
  return std::to_string(s / 86400) + " d ago";
}

void print_cluster(const ClusterDto& cluster, std::ostream& out) {
  Table t({"HOLDER", "ROLE", "URL", "LAST CONTACT"});
  for (const ClusterMemberDto& m : cluster.members) {
    t.add({m.holder, m.role, m.url, contact_age_text(m.last_contact_age_s)});
  }
  t.print(out);
  if (cluster.store == "sqlite") {
    out << "one armhived (SQLite): no cluster\n";
    return;
  }
  if (!cluster.leader) {
    out << "no armhived has led yet\n";
    return;
  }
  out << cluster.leader->holder << " leads (epoch " << cluster.leader->epoch << ") since "
      << cluster.leader->since << "\n";
}

}  // namespace armhive
