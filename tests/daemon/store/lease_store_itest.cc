#include <catch2/catch.hpp>

#include "daemon/store/sqlite_lease_store.h"

namespace armhive {
namespace {

Lease make_lease(int i, LeaseState state) {
  Lease l;
  char id[32];
  std::snprintf(id, sizeof id, "l-%012d", i);
  l.id = id;
  l.pool = "ci";
  l.owner = i % 2 == 0 ? "even" : "odd";
  l.state = state;
  l.created_at = from_unix_ms(1'700'000'000'000 + i);
  l.expires_at = from_unix_ms(1'700'003'600'000 + i);
  return l;
}

TEST_CASE("leases: lists page to the end past the listing cap; counts come from SQL",
          "[store][leases]") {
  auto db = Database::open(":memory:");
  REQUIRE(db.is_ok());
  auto store = SqliteLeaseStore::open(**db);
  REQUIRE(store.is_ok());
  constexpr int kLeases = 2500;
  for (int i = 0; i < kLeases; ++i) {
    REQUIRE((*store)
                ->insert(make_lease(i, i % 5 == 0 ? LeaseState::kReleased : LeaseState::kReady))
                .is_ok());
  }
  LeaseFilter f;
  f.limit = 5000;  // a listing returns at most kMaxLeaseListLimit, whatever it asks
  auto page = (*store)->list(f);
  REQUIRE(page.is_ok());
  CHECK(page->size() == kMaxLeaseListLimit);

  // Paging with a cursor visits every lease once, in creation order.
  f.limit = 700;
  size_t seen = 0;
  std::string last;
  for (;;) {
    auto p = (*store)->list(f);
    REQUIRE(p.is_ok());
    for (const Lease& l : *p) {
      CHECK(l.id > last);
      last = l.id;
      ++seen;
    }
    if (p->size() < f.limit) break;
    f.after_id = p->back().id;
  }
  CHECK(seen == kLeases);

  LeaseFilter active;
  active.include_ended = false;
  auto counts = (*store)->count(active);
  REQUIRE(counts.is_ok());
  CHECK((*counts)[LeaseState::kReady] == 2000);
  CHECK(counts->count(LeaseState::kReleased) == 0);
  LeaseFilter even;
  even.owner = "even";
  auto by_owner = (*store)->count(even);
  REQUIRE(by_owner.is_ok());
  CHECK((*by_owner)[LeaseState::kReady] + (*by_owner)[LeaseState::kReleased] == 1250);
}

}  // namespace
}  // namespace armhive
