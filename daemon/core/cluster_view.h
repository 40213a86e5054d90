#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace armhive {

// Who leads the armhived instances that share one database, since when, and when each member
// was last heard of (GET /v1/cluster, `armhive cluster`). Times are milliseconds since the Unix
// epoch in the database's clock (PostgreSQL's clock_timestamp()), so that ages never depend on
// how the instances' clocks agree; with SQLite there is one instance and its own clock.
struct ClusterLeader {
  std::string holder;    // armhived@HOST/PID
  std::string url;       // its API URL
  int64_t epoch = 0;     // the term, one more at each takeover; 0 with SQLite (no election)
  int64_t since_ms = 0;  // when this epoch began (SQLite: when the instance started)
};

struct ClusterMember {
  std::string holder;
  std::string url;
  std::string role;  // "leader" or "standby"
  int64_t started_at_ms = 0;
  int64_t last_contact_ms = 0;
  int64_t last_contact_age_ms = 0;  // now - last_contact, in the same clock
};

struct ClusterView {
  bool postgres = false;  // false: SQLite, one instance
  // Absent only on a PostgreSQL database no instance has renewed the lease of yet.
  std::optional<ClusterLeader> leader;
  std::vector<ClusterMember> members;  // the leader first, then by holder
};

// A member silent for longer than this many leader leases has died (or been cut off for long):
// the view omits it and the next renewal of any member deletes its row.
inline constexpr int kMemberSilenceLeases = 10;

// The view of an armhived on SQLite: it alone, leading since it started, heard from now.
ClusterView single_instance_view(const std::string& holder, const std::string& url,
                                 int64_t started_ms, int64_t now_ms);

}  // namespace armhive
