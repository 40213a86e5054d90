#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/core/host_spec.h"

namespace armhive {

// The hosts added through the API (POST /v1/hosts), kept so that a restart drives them again;
// the configuration's hosts are not in it. Implemented on SQLite by daemon/store
// (SqliteHostStore).
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
  // Forgets the host; idempotent.
  virtual Status remove(const std::string& name) = 0;
};

}  // namespace armhive
