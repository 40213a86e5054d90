#pragma once

#include <string>
#include <vector>

#include "daemon/config/daemon_config.h"

namespace armhive {

// What re-reading the configuration (SIGHUP) does to the [access] table, decided from the
// running table and the file's, without I/O.
//
// Live: max_sessions (the host's cap, at once), max_sessions_per_forward and
// forward_idle_timeout (forwards opened from then on; an open forward is a running listener and
// keeps its own), max_extra_ports (leases asking from then on). Restart-only, kept and named:
// listen and port_min/port_max (the sockets of the open forwards and the ports they hold),
// advertise (the address the leases' SSH endpoints and known_hosts were handed out under),
// ssh_ca_key (the CA the guests trust), and the table being added or removed.
struct AccessReload {
  AccessConfig config;  // the table in force after the reload
  bool limits = false;  // a live key changed
  // "access: max_sessions 1024 -> 8" per live change; "[access] listen: ... needs a restart
  // (...)" per restart-only one.
  std::vector<std::string> applied;
  std::vector<std::string> restart_needed;
};

// Pure. Both tables absent, or equal: nothing.
AccessReload plan_access_reload(const AccessConfig& running, const AccessConfig& next);

}  // namespace armhive
