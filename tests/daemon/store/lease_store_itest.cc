#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "daemon/store/sqlite_lease_store.h"
#include "tests/support/store_backends.h"

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

TEST_CASE("leases: lists page to the end past the listing cap, counts come from SQL",
          "[store][leases]") {
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
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
  f.limit = 5000;  // a listing returns at most kMaxListLimit, whatever it asks
  auto page = (*store)->list(f);
  REQUIRE(page.is_ok());
  CHECK(page->size() == kMaxListLimit);

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

TEST_CASE("leases: live listings hold every non-terminal state, pages carry each lease's history",
          "[store][leases]") {
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
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
  live.limit = kMaxListLimit;
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
  all.limit = kMaxListLimit;
  auto page = (*store)->list(all);
  REQUIRE(page.is_ok());
  REQUIRE(page->size() == kMaxListLimit);
  for (size_t i = 0; i < page->size(); ++i) {
    const Lease& l = (*page)[i];
    REQUIRE(l.history.size() == i % 4 + 1);
    CHECK(l.history.back().reason == "step " + std::to_string(i % 4));
    CHECK(l.history.front().at == from_unix_ms(1'700'000'000'000));
  }
}

TEST_CASE("host admin: drain and maintenance are kept across reopening, none forgets",
          "[store][host_admin]") {
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  {
    auto db = (*backend)->open();
    REQUIRE(db.is_ok());
    auto store = SqliteLeaseStore::open(**db);
    REQUIRE(store.is_ok());
    CHECK((*store)->host_admin()->empty());
    REQUIRE((*store)->put_host_admin("hc1", HostHealthTracker::Admin::kDrain).is_ok());
    REQUIRE((*store)->put_host_admin("tx1", HostHealthTracker::Admin::kDrain).is_ok());
    REQUIRE((*store)->put_host_admin("tx1", HostHealthTracker::Admin::kMaintenance).is_ok());
  }
  {
    auto db = (*backend)->open();
    REQUIRE(db.is_ok());
    auto store = SqliteLeaseStore::open(**db);
    REQUIRE(store.is_ok());
    auto admin = (*store)->host_admin();
    REQUIRE(admin.is_ok());
    CHECK(*admin == std::map<std::string, HostHealthTracker::Admin>{
                        {"hc1", HostHealthTracker::Admin::kDrain},
                        {"tx1", HostHealthTracker::Admin::kMaintenance}});
    REQUIRE((*store)->put_host_admin("hc1", HostHealthTracker::Admin::kNone).is_ok());
    REQUIRE((*store)->put_host_admin("nobody", HostHealthTracker::Admin::kNone).is_ok());
    CHECK((*store)->host_admin()->size() == 1);
    // A row that cannot be understood is an error naming it, never "none".
    REQUIRE((*db)->execute("UPDATE host_admin SET admin = 'nap' WHERE host = 'tx1'", {}).is_ok());
    auto bad = (*store)->host_admin();
    CHECK(bad.status().code() == ErrorCode::kInternal);
    CHECK_THAT(bad.status().to_string(), Catch::Contains("tx1"));
  }
}

TEST_CASE("hosts: leases and VM records keep their host, older rows upgrade with none",
          "[store][leases]") {
  auto db = Database::open(":memory:");
  REQUIRE(db.is_ok());
  // A database as a daemon from before hosts were recorded left it: one lease, one VM.
  const auto& steps = SqliteLeaseStore::schema_steps();
  REQUIRE(steps.size() >= 3);
  REQUIRE((*db)->migrate("leases", {steps[0], steps[1]}).is_ok());
  REQUIRE((*db)
              ->execute("INSERT INTO leases (id, pool, owner, purpose, ssh_keys, labels, "
                        "idempotency_key, state, reason, ttl_s, created_at, ready_at, "
                        "expires_at, ended_at, vm_name, address, login_user, cpus, warm) VALUES "
                        "('l-000000000001', 'ci', 'odd', 'ci', '[]', '{}', '', 'ready', '', 60, "
                        "1, 2, 3, 0, 'armhive-vm-old', '10.0.0.5', 'armhive', '[2]', 1)")
              .is_ok());
  REQUIRE((*db)
              ->execute("INSERT INTO vms (name, vm_id, pool, state, lease_id, address, cpus, "
                        "created_at) VALUES ('armhive-vm-old', 'old', 'ci', 'leased', "
                        "'l-000000000001', '10.0.0.5', '[2]', 1)")
              .is_ok());

  auto store = SqliteLeaseStore::open(**db);
  REQUIRE(store.is_ok());
  auto old = (*store)->find("l-000000000001");
  REQUIRE(old.is_ok());
  REQUIRE(old->has_value());
  CHECK((*old)->host.empty());
  CHECK((*old)->host_keys.empty());  // read at hand-out for such a VM
  CHECK((*old)->vm_name == "armhive-vm-old");
  CHECK((*old)->state == LeaseState::kReady);
  REQUIRE((*store)->vms()->size() == 1);
  CHECK((*store)->vms()->front().host.empty());

  // New rows carry their host through insert, update, batch and listing.
  Lease l = make_lease(2, LeaseState::kProvisioning);
  l.host = "hc1";
  REQUIRE((*store)->insert(l).is_ok());
  CHECK((*store)->find(l.id)->value().host == "hc1");
  l.state = LeaseState::kReady;
  l.host = "tx1";
  VmRecord vm;
  vm.name = "armhive-vm-new";
  vm.pool = "ci";
  vm.host = "tx1";
  vm.created_at = from_unix_ms(5);
  vm.state = VmState::kLeased;
  vm.lease_id = l.id;
  REQUIRE((*store)->write_batch({{l.id, l}}, {{vm.name, vm}}).is_ok());
  auto listed = (*store)->list(LeaseFilter{});
  REQUIRE(listed.is_ok());
  REQUIRE(listed->size() == 2);
  CHECK(listed->back().host == "tx1");
  auto vms = (*store)->vms();
  REQUIRE(vms.is_ok());
  REQUIRE(vms->size() == 2);
  CHECK(vms->back().host == "tx1");
}

TEST_CASE("host keys: a VM's and its lease's survive a reopen, a tampered row is refused",
          "[store][leases]") {
  const std::string key =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL4VKYqD6zyeGmUdw5PnHb2hHd3HpM6d3ODBC8iXrGrg";
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  {
    auto db = (*backend)->open();
    REQUIRE(db.is_ok());
    auto store = SqliteLeaseStore::open(**db);
    REQUIRE(store.is_ok());
    Lease l = make_lease(1, LeaseState::kReady);
    l.host_keys = {key};
    REQUIRE((*store)->insert(l).is_ok());
    VmRecord vm;
    vm.name = "armhive-vm-k";
    vm.pool = "ci";
    vm.state = VmState::kWarm;
    vm.host_keys = {key};
    REQUIRE((*store)->put_vm(vm).is_ok());
  }
  {
    auto db = (*backend)->open();
    REQUIRE(db.is_ok());
    auto store = SqliteLeaseStore::open(**db);
    REQUIRE(store.is_ok());
    auto l = (*store)->find(make_lease(1, LeaseState::kReady).id);
    REQUIRE(l.is_ok());
    REQUIRE(l->has_value());
    CHECK((*l)->host_keys == std::vector<std::string>{key});
    auto vms = (*store)->vms();
    REQUIRE(vms.is_ok());
    REQUIRE(vms->size() == 1);
    CHECK(vms->front().host_keys == std::vector<std::string>{key});

    // Keys came from a guest: a row holding something else is an error naming the row.
    REQUIRE((*db)
                ->execute("UPDATE vms SET host_keys = '[\"ssh-ed25519 AAAA root@evil\"]'", {})
                .is_ok());
    auto bad = (*store)->vms();
    REQUIRE_FALSE(bad.is_ok());
    CHECK(bad.status().code() == ErrorCode::kInternal);
    CHECK_THAT(bad.status().to_string(), Catch::Contains("armhive-vm-k"));
  }
}

TEST_CASE("leases: a write batch lands whole or not at all", "[store][batch]") {
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  {
    auto db = (*backend)->open();
    REQUIRE(db.is_ok());
    auto store = SqliteLeaseStore::open(**db);
    INFO(store.status().to_string());
    REQUIRE(store.is_ok());
    Lease a = make_lease(1, LeaseState::kPending);
    REQUIRE((*store)->insert(a).is_ok());
    VmRecord gone;
    gone.name = "vm-gone";
    gone.pool = "ci";
    gone.state = VmState::kWarm;
    REQUIRE((*store)->put_vm(gone).is_ok());

    // A batch with one row the store refuses (a lease never inserted): nothing of it lands.
    a.state = LeaseState::kProvisioning;
    a.vm_name = "vm-1";
    VmRecord vm;
    vm.name = "vm-1";
    vm.pool = "ci";
    vm.state = VmState::kLeased;
    vm.lease_id = a.id;
    Lease stranger = make_lease(2, LeaseState::kReady);
    Status refused = (*store)->write_batch({{a.id, a}, {stranger.id, stranger}},
                                           {{"vm-1", vm}, {"vm-gone", std::nullopt}});
    CHECK(refused.code() == ErrorCode::kNotFound);
    CHECK_THAT(refused.to_string(), Catch::Contains(stranger.id));
    CHECK((*store)->find(a.id)->value().state == LeaseState::kPending);
    CHECK((*store)->vms()->size() == 1);

    // Without it the same batch lands whole: the update, the new VM and the deletion.
    REQUIRE((*store)->write_batch({{a.id, a}}, {{"vm-1", vm}, {"vm-gone", std::nullopt}}).is_ok());
    auto stored = (*store)->find(a.id);
    REQUIRE(stored.is_ok());
    REQUIRE(stored->has_value());
    CHECK((*stored)->state == LeaseState::kProvisioning);
    CHECK((*stored)->vm_name == "vm-1");
    auto vms = (*store)->vms();
    REQUIRE(vms.is_ok());
    REQUIRE(vms->size() == 1);
    CHECK((*vms)[0].name == "vm-1");
    CHECK((*vms)[0].lease_id == a.id);
  }
}

}  // namespace
}  // namespace armhive
