#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "daemon/store/database.h"
#include "tests/support/postgres_server.h"

namespace armhive {

// The databases the store conformance cases run against, by name: "sqlite" (a file in a
// temporary directory) and "postgresql" (an empty database of its own on the tests' PostgreSQL
// server, tests/support/postgres_server.h). A test case that starts with
//   const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
// runs once on each, so one set of assertions holds both implementations to one behaviour.
class StoreBackend {
 public:
  static Result<std::unique_ptr<StoreBackend>> make(const std::string& kind);
  ~StoreBackend();  // removes the file or drops the database

  // A new connection to the same data: called again, it is what a restarted armhived sees.
  Result<std::unique_ptr<Database>> open() const;
  const std::string& kind() const { return kind_; }

 private:
  explicit StoreBackend(std::string kind) : kind_(std::move(kind)) {}
  std::string kind_;
  std::string sqlite_dir_;
  std::unique_ptr<TestPostgresDatabase> pg_;
};

}  // namespace armhive
