#include <catch2/catch.hpp>

#include "daemon/store/sqlite_health_store.h"
#include "tests/support/fake_health_store.h"
#include "tests/support/store_backends.h"

namespace armhive {
namespace {

HealthResult result(const std::string& pool, double value, int64_t minute) {
  HealthResult r;
  r.at = from_unix_ms(1'800'000'000'000 + minute * 60'000);
  r.host = "honeycomb";
  r.pool = pool;
  r.suite = "compression";
  r.figure = "compression.guest.t1.compress_mb_s";
  r.label = "zstd compress MB/s (guest, 1 thread)";
  r.unit = "MB/s";
  r.value = value;
  r.run_id = "b-" + std::to_string(minute);
  r.verdict = "within_band";
  r.band = HealthBandValues{5, 400, 4, 388, 412};
  r.reason = "within";
  return r;
}

// What the scheduler relies on, for the SQLite store and the fake alike (keep 3 per series).
void check_store(HealthSeriesStore& store) {
  for (int i = 0; i < 5; ++i) REQUIRE(store.append(result("ci", 400 + i, i)).is_ok());
  HealthResult other = result("nightly", 90, 10);
  other.band.reset();
  other.verdict = "insufficient_history";
  REQUIRE(store.append(other).is_ok());

  auto ci = store.recent("honeycomb", "ci", "", 10);
  REQUIRE(ci.is_ok());
  REQUIRE(ci->size() == 3);         // older rows dropped
  CHECK(ci->front().value == 402);  // oldest first
  CHECK(ci->back().value == 404);
  CHECK(ci->back().run_id == "b-4");
  CHECK(ci->back().at == from_unix_ms(1'800'000'000'000 + 4 * 60'000));
  REQUIRE(ci->back().band.has_value());
  CHECK(ci->back().band->low == 388);
  CHECK(ci->back().label == "zstd compress MB/s (guest, 1 thread)");
  CHECK(store.recent("honeycomb", "ci", "", 2)->front().value == 403);
  CHECK(store.recent("honeycomb", "ci", "memory.guest.t1.triad_mb_s", 10)->empty());
  CHECK(store.recent("thunderx", "ci", "", 10)->empty());

  auto latest = store.latest();
  REQUIRE(latest.is_ok());
  REQUIRE(latest->size() == 2);
  CHECK(latest->at(0).pool == "ci");
  CHECK(latest->at(0).value == 404);
  CHECK(latest->at(1).pool == "nightly");
  CHECK_FALSE(latest->at(1).band.has_value());
}

TEST_CASE("health series: the SQL store keeps the newest results per host and pool",
          "[store][health]") {
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto store = SqliteHealthStore::open(**db, 3);
  REQUIRE(store.is_ok());
  check_store(**store);
  // The migration is applied once: opening again keeps the rows.
  auto again = SqliteHealthStore::open(**db, 3);
  REQUIRE(again.is_ok());
  CHECK((*again)->recent("honeycomb", "ci", "", 10)->size() == 3);
}

TEST_CASE("health series: the fake store behaves as the SQLite one", "[store][health]") {
  FakeHealthStore fake(3);
  check_store(fake);
}

}  // namespace
}  // namespace armhive
