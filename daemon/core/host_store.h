#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/core/host_spec.h"

namespace armhive {

// The hosts added through the API (POST /v1/hosts), kept so that a restart drives them again;
// the configuration's hosts are not in it. Also, for every host (the configuration's too), the
// libvirt capabilities document it last came up with: a host that cannot be reached at the
// next start is driven with the topology they give (daemon/fleet HostRegistry). Implemented on
// SQLite by daemon/store (SqliteHostStore).
//
// Threading: implementations are thread-safe. Calls block on disk: never call them with an
// engine lock held.
class HostStore {
 public:
  virtual ~HostStore() = default;
  // Every kept host, in the order they were added.
  virtual Result<std::vector<HostSpec>> list() = 0;
  // Adds the host, or replaces the one of that name.
  virtual Status put(const HostSpec& spec) = 0;
  // Forgets the host (and its capabilities); idempotent.
  virtual Status remove(const std::string& name) = 0;

  // The capabilities documents kept, by host name.
  virtual Result<std::map<std::string, std::string>> capabilities() = 0;
  // Keeps `xml` as the host's capabilities, replacing the one before.
  virtual Status put_capabilities(const std::string& name, const std::string& xml) = 0;
};

}  // namespace armhive
