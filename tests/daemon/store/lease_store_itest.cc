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

TEST_CASE("leases: live listings hold every non-terminal state; pages carry each lease's history",
          "[store][leases]") {
  auto db = Database::open(":memory:");
  REQUIRE(db.is_ok());
  auto store = SqliteLeaseStore::open(**db);
  REQUIRE(store.is_ok());
  const std::vector<LeaseState> states = {
      LeaseState::kPending,  LeaseState::kProvisioning, LeaseState::kReady, LeaseState::kReleasing,
      LeaseState::kReleased, LeaseState::kExpired,      LeaseState::kFailed};
  // More leases than one history query reads, each with i % 4 + 1 transitions.
  constexpr int kLeases = 1200;
  for (int i = 0; i < kLeases; ++i) {
    Lease l = make_lease(i, states[i % states.size()]);
    for (int h = 0; h <= i % 4; ++h) {
      l.history.push_back({LeaseState::kPending, l.state, from_unix_ms(1'700'000'000'000 + h),
                           "step " + std::to_string(h)});
    }
    REQUIRE((*store)->insert(l).is_ok());
  }
  LeaseFilter live;
  live.include_ended = false;
  live.limit = kMaxLeaseListLimit;
  size_t seen = 0;
  for (;;) {
    auto page = (*store)->list(live);
    REQUIRE(page.is_ok());
    for (const Lease& l : *page) {
      CHECK_FALSE(is_terminal(l.state));
      ++seen;
    }
    if (page->size() < live.limit) break;
    live.after_id = page->back().id;
  }
  size_t expected_live = 0;
  for (int i = 0; i < kLeases; ++i) expected_live += is_terminal(states[i % states.size()]) ? 0 : 1;
  CHECK(seen == expected_live);
  auto active = (*store)->active();
  REQUIRE(active.is_ok());
  CHECK(active->size() == expected_live);

  LeaseFilter all;
  all.limit = kMaxLeaseListLimit;
  auto page = (*store)->list(all);
  REQUIRE(page.is_ok());
  REQUIRE(page->size() == kMaxLeaseListLimit);
  for (size_t i = 0; i < page->size(); ++i) {
    const Lease& l = (*page)[i];
    REQUIRE(l.history.size() == i % 4 + 1);
    CHECK(l.history.back().reason == "step " + std::to_string(i % 4));
    CHECK(l.history.front().at == from_unix_ms(1'700'000'000'000));
  }
}

}  // namespace
}  // namespace armhive
