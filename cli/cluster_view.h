#pragma once

#include <ostream>
#include <string>

#include "api/types.h"

namespace armhive {

// `armhive cluster`'s human output: one row per member (holder, role, URL, last contact), then
// who leads since when; on SQLite the one row and a line saying there is no cluster. Pure.
void print_cluster(const ClusterDto& cluster, std::ostream& out);

// "0 s ago", "42 s ago", "3 min ago", "2 h ago", "4 d ago": how long ago a member was last
// heard of, rounded down.
std::string contact_age_text(double seconds);

}  // namespace armhive
