// The CTest fixture `postgres` (tests/CMakeLists.txt): one PostgreSQL server that the
// integration tests of a run share, in $ARMHIVE_TEST_POSTGRES_DIR. Hidden test cases: run only
// by the fixture's two tests.
#include <catch2/catch.hpp>

#include "tests/support/files.h"
#include "tests/support/postgres_server.h"

namespace armhive {
namespace {

TEST_CASE("postgres fixture: the run's server starts", "[.postgres-start]") {
  const std::string dir = env_or("ARMHIVE_TEST_POSTGRES_DIR", "");
  REQUIRE_FALSE(dir.empty());
  // A server left by a run that was killed is stopped first (only if it is this directory's).
  REQUIRE(PostgresServer::stop(dir).is_ok());
  auto server = PostgresServer::start(dir);
  INFO(server.status().to_string());
  REQUIRE(server.is_ok());
  (*server)->release();  // it outlives this process, until the stop case
}

TEST_CASE("postgres fixture: the run's server stops", "[.postgres-stop]") {
  const std::string dir = env_or("ARMHIVE_TEST_POSTGRES_DIR", "");
  REQUIRE_FALSE(dir.empty());
  Status stopped = PostgresServer::stop(dir);
  INFO(stopped.to_string());
  REQUIRE(stopped.is_ok());
}

}  // namespace
}  // namespace armhive
