// The engine's persistence queue over the real SQLite store: one batch per flush, and a row
// the store refuses holds back only itself.

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "daemon/engine/engine_health.h"
#include "daemon/engine/persist_queue.h"
#include "daemon/store/sqlite_lease_store.h"
#include "tests/support/manual_clock.h"

namespace armhive {
namespace {

Lease lease_named(const std::string& id, LeaseState state) {
  Lease l;
  l.id = id;
  l.pool = "ci";
  l.owner = "ci-bot";
  l.state = state;
  l.created_at = from_unix_ms(1'700'000'000'000);
  l.expires_at = from_unix_ms(1'700'003'600'000);
  return l;
}

TEST_CASE("persist queue: a refused row stays queued, the rest of its flush lands",
          "[engine][persist]") {
  std::string path = "/tmp/armhive-persist-" + std::to_string(::getpid()) + ".db";
  std::remove(path.c_str());
  {
    auto db = Database::open(path);
    REQUIRE(db.is_ok());
    auto store = SqliteLeaseStore::open(**db);
    REQUIRE(store.is_ok());
    ManualClock clock;
    EngineHealth health(clock, nullptr);
    PersistQueue queue(**store, clock, health);

    Lease known = lease_named("l-known", LeaseState::kPending);
    REQUIRE((*store)->insert(known).is_ok());
    known.state = LeaseState::kProvisioning;
    queue.lease(known);
    queue.lease(lease_named("l-never-inserted", LeaseState::kReady));
    VmRecord vm;
    vm.name = "vm-1";
    vm.pool = "ci";
    vm.state = VmState::kWarm;
    queue.vm(vm);

    Status first = queue.flush();
    CHECK(first.code() == ErrorCode::kNotFound);
    CHECK_THAT(first.to_string(), Catch::Contains("l-never-inserted"));
    CHECK((*store)->find("l-known")->value().state == LeaseState::kProvisioning);
    CHECK((*store)->vms()->size() == 1);
    CHECK(queue.lease_pending("l-never-inserted"));
    CHECK_FALSE(queue.lease_pending("l-known"));
    CHECK_FALSE(queue.vm_pending("vm-1"));
    CHECK(health.view().errors == 1);

    // Once the row can be written, the retry after the backoff lands it.
    REQUIRE((*store)->insert(lease_named("l-never-inserted", LeaseState::kPending)).is_ok());
    CHECK_FALSE(queue.flush().is_ok());  // still backing off
    clock.advance(std::chrono::seconds(1));
    REQUIRE(queue.flush().is_ok());
    CHECK(queue.pending() == 0);
    CHECK((*store)->find("l-never-inserted")->value().state == LeaseState::kReady);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

}  // namespace
}  // namespace armhive
