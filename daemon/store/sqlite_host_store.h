#pragma once

#include <memory>

#include "daemon/core/host_store.h"
#include "daemon/store/database.h"

namespace armhive {

// The API's hosts in SQLite (table hosts, migration component "hosts"): one row per host, its
// spec as a JSON document (the keys of a [[hosts]] table), so that a field added to HostSpec
// needs no migration. A row this version cannot read is an error naming the host. Each host's
// last capabilities document is a row of host_capabilities.
//
// Owns nothing but a reference to the Database (which must outlive it). Thread-safe (every
// call is one statement of the Database).
class SqliteHostStore final : public HostStore {
 public:
  static Result<std::unique_ptr<SqliteHostStore>> open(Database& db);

  Result<std::vector<HostSpec>> list() override;
  Status put(const HostSpec& spec) override;
  Status remove(const std::string& name) override;
  Result<std::map<std::string, std::string>> capabilities() override;
  Status put_capabilities(const std::string& name, const std::string& xml) override;

 private:
  explicit SqliteHostStore(Database& db) : db_(db) {}
  Database& db_;
};

}  // namespace armhive
