// The leader lease on a real PostgreSQL: one holder at a time, a takeover only after the
// holder's lease ended (with a new epoch), a fenced write of a stale leader refused, a clean
// release handed over at once.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "daemon/store/pg_database.h"
#include "daemon/store/pg_leader_lease.h"
#include "tests/support/postgres_server.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<PgDatabase> connect(const TestPostgresDatabase& t) {
  auto db = PgDatabase::connect(t.url());
  INFO(db.status().to_string());
  REQUIRE(db.is_ok());
  return std::move(*db);
}

std::unique_ptr<PgLeaderLease> lease_for(Database& db, const std::string& who,
                                         std::chrono::milliseconds lease) {
  auto l = PgLeaderLease::open(db, who, "https://" + who + ":8470", lease);
  INFO(l.status().to_string());
  REQUIRE(l.is_ok());
  return std::move(*l);
}

// Renews until the lease is ours (bounded: a minute).
PgLeaderLease::Renewal renew_until_ours(PgLeaderLease& lease) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    auto r = lease.renew();
    REQUIRE(r.is_ok());
    if (r->ours || std::chrono::steady_clock::now() > deadline) return *r;
    std::this_thread::sleep_for(50ms);
  }
}

TEST_CASE("leader lease: one holder, a takeover only after its lease ends, stale writes fenced",
          "[store][postgres][leader]") {
  auto t = TestPostgresDatabase::make();
  REQUIRE(t.is_ok());
  auto elect_a = connect(**t);
  auto elect_b = connect(**t);
  auto store_a = connect(**t);
  auto lease_a = lease_for(*elect_a, "armhived@hc1", 1500ms);
  auto lease_b = lease_for(*elect_b, "armhived@tx1", 1500ms);

  auto a = lease_a->renew();
  REQUIRE(a.is_ok());
  CHECK(a->ours);
  const int64_t first_epoch = a->epoch;
  // B is told who leads and where its API is.
  auto b = lease_b->renew();
  REQUIRE(b.is_ok());
  CHECK_FALSE(b->ours);
  CHECK(b->holder == "armhived@hc1");
  CHECK(b->url == "https://armhived@hc1:8470");
  CHECK(b->epoch == first_epoch);
  // A renewing keeps its term (same epoch).
  auto again = lease_a->renew();
  REQUIRE(again.is_ok());
  CHECK(again->ours);
  CHECK(again->epoch == first_epoch);

  // A's store writes are fenced by its term.
  REQUIRE(store_a->execute("CREATE TABLE work (n BIGINT)").is_ok());
  store_a->set_fence("armhived@hc1", first_epoch);
  REQUIRE(store_a->execute("INSERT INTO work VALUES (1)").is_ok());

  // A stops renewing (paused, cut off): B takes over once A's lease has ended, in a new epoch.
  auto taken = renew_until_ours(*lease_b);
  REQUIRE(taken.ours);
  CHECK(taken.epoch == first_epoch + 1);
  // A, running again, writes nothing: its fence is for a term that ended.
  Status stale = store_a->execute("INSERT INTO work VALUES (2)");
  CHECK(stale.code() == ErrorCode::kUnavailable);
  CHECK_THAT(stale.to_string(), Catch::Contains("no longer holds the leader lease"));
  Status stale_tx = store_a->transaction(
      [](Database::Tx& tx) { return tx.execute("INSERT INTO work VALUES (3)"); });
  CHECK(stale_tx.code() == ErrorCode::kUnavailable);
  auto rows = elect_b->query("SELECT n FROM work");
  REQUIRE(rows.is_ok());
  CHECK(rows->size() == 1);
  // And A's next renewal says who leads now.
  auto lost = lease_a->renew();
  REQUIRE(lost.is_ok());
  CHECK_FALSE(lost->ours);
  CHECK(lost->holder == "armhived@tx1");

  // B stops cleanly: A takes over at its next renewal, without waiting for B's lease to end.
  REQUIRE(lease_b->release(taken.epoch).is_ok());
  auto back = lease_a->renew();
  REQUIRE(back.is_ok());
  CHECK(back->ours);
  CHECK(back->epoch == first_epoch + 2);
}

TEST_CASE("leader lease: of instances renewing at once exactly one leads",
          "[store][postgres][leader]") {
  auto t = TestPostgresDatabase::make();
  REQUIRE(t.is_ok());
  constexpr int kInstances = 6;
  std::vector<std::unique_ptr<PgDatabase>> dbs;
  std::vector<std::unique_ptr<PgLeaderLease>> leases;
  for (int i = 0; i < kInstances; ++i) {
    dbs.push_back(connect(**t));
    leases.push_back(lease_for(*dbs.back(), "armhived@" + std::to_string(i), 60s));
  }
  std::vector<Result<PgLeaderLease::Renewal>> results(kInstances, unavailable("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kInstances; ++i) {
    threads.emplace_back([&, i] { results[i] = leases[i]->renew(); });
  }
  for (auto& th : threads) th.join();
  int leaders = 0;
  std::string holder;
  for (int i = 0; i < kInstances; ++i) {
    INFO(results[i].status().to_string());
    REQUIRE(results[i].is_ok());
    if (results[i]->ours) {
      ++leaders;
      holder = "armhived@" + std::to_string(i);
    }
  }
  CHECK(leaders == 1);
  for (int i = 0; i < kInstances; ++i) {
    if (!results[i]->ours) CHECK(results[i]->holder == holder);
  }
}

const ClusterMember* member(const ClusterView& v, const std::string& holder) {
  for (const ClusterMember& m : v.members) {
    if (m.holder == holder) return &m;
  }
  return nullptr;
}

ClusterView view_of(Database& db, std::chrono::milliseconds lease) {
  auto v = PgLeaderLease::read_view(db, lease);
  INFO(v.status().to_string());
  REQUIRE(v.is_ok());
  return *v;
}

TEST_CASE("leader lease: members show their last contact and since changes only with the epoch",
          "[store][postgres][leader]") {
  auto t = TestPostgresDatabase::make();
  REQUIRE(t.is_ok());
  auto elect_a = connect(**t);
  auto elect_b = connect(**t);
  auto reader = connect(**t);  // a third connection, as a standby's server reads
  auto lease_a = lease_for(*elect_a, "armhived@hc1", 1500ms);
  auto lease_b = lease_for(*elect_b, "armhived@tx1", 1500ms);

  auto a = lease_a->renew();
  REQUIRE(a.is_ok());
  REQUIRE(a->ours);
  CHECK(a->membership.is_ok());
  const int64_t since = a->since_ms;
  CHECK(since > 0);
  auto b = lease_b->renew();
  REQUIRE(b.is_ok());
  REQUIRE_FALSE(b->ours);
  CHECK(b->membership.is_ok());
  CHECK(b->since_ms == since);  // a standby is told since when the leader leads

  ClusterView v = view_of(*reader, 1500ms);
  CHECK(v.postgres);
  REQUIRE(v.leader);
  CHECK(v.leader->holder == "armhived@hc1");
  CHECK(v.leader->url == "https://armhived@hc1:8470");
  CHECK(v.leader->epoch == a->epoch);
  CHECK(v.leader->since_ms == since);
  REQUIRE(v.members.size() == 2);
  CHECK(v.members[0].holder == "armhived@hc1");  // the leader first
  CHECK(v.members[0].role == "leader");
  CHECK(v.members[1].holder == "armhived@tx1");
  CHECK(v.members[1].role == "standby");
  CHECK(v.members[1].url == "https://armhived@tx1:8470");
  for (const ClusterMember& m : v.members) {
    CHECK(m.started_at_ms <= m.last_contact_ms);
    CHECK(m.last_contact_age_ms >= 0);
  }

  // Renewing keeps the term and its since, and moves the member's last contact, not its start.
  std::this_thread::sleep_for(20ms);
  auto again = lease_a->renew();
  REQUIRE(again.is_ok());
  CHECK(again->epoch == a->epoch);
  CHECK(again->since_ms == since);
  ClusterView renewed = view_of(*reader, 1500ms);
  const ClusterMember* a_now = member(renewed, "armhived@hc1");
  REQUIRE(a_now != nullptr);
  CHECK(a_now->started_at_ms == v.members[0].started_at_ms);
  CHECK(a_now->last_contact_ms > v.members[0].last_contact_ms);
  const int64_t a_last = a_now->last_contact_ms;

  // A stops renewing: its last contact stays and its age grows; B takes over in a new epoch,
  // which starts a new since.
  auto taken = renew_until_ours(*lease_b);
  REQUIRE(taken.ours);
  CHECK(taken.epoch == a->epoch + 1);
  CHECK(taken.since_ms > since);
  ClusterView after = view_of(*reader, 1500ms);
  REQUIRE(after.leader);
  CHECK(after.leader->holder == "armhived@tx1");
  CHECK(after.leader->epoch == taken.epoch);
  CHECK(after.leader->since_ms == taken.since_ms);
  REQUIRE(after.members.size() == 2);
  CHECK(after.members[0].holder == "armhived@tx1");
  CHECK(after.members[0].role == "leader");
  const ClusterMember* a_silent = member(after, "armhived@hc1");
  REQUIRE(a_silent != nullptr);
  CHECK(a_silent->role == "standby");  // the leader row's word, not what A last wrote
  CHECK(a_silent->last_contact_ms == a_last);
  ClusterView later = view_of(*reader, 1500ms);
  const ClusterMember* a_later = member(later, "armhived@hc1");
  REQUIRE(a_later != nullptr);
  CHECK(a_later->last_contact_age_ms >= a_silent->last_contact_age_ms);
  auto kept = lease_b->renew();
  REQUIRE(kept.is_ok());
  CHECK(kept->since_ms == taken.since_ms);

  // Past kMemberSilenceLeases leases a silent member is omitted (here a lease of 1 ms: A has
  // been silent for more than a lease of 1.5 s), and the next renewal of any member with that
  // lease deletes its row.
  CHECK(member(view_of(*reader, 1ms), "armhived@hc1") == nullptr);
  CHECK(member(view_of(*reader, 1500ms), "armhived@hc1") != nullptr);
  auto elect_c = connect(**t);
  auto lease_c = lease_for(*elect_c, "armhived@hc2", 1ms);
  auto c = lease_c->renew();
  REQUIRE(c.is_ok());
  CHECK(c->membership.is_ok());
  auto rows = reader->query("SELECT holder FROM cluster_members WHERE holder = 'armhived@hc1'");
  REQUIRE(rows.is_ok());
  CHECK(rows->empty());
}

TEST_CASE("leader lease: SQLite has none", "[store][leader]") {
  auto db = Database::open(":memory:");
  REQUIRE(db.is_ok());
  auto l = PgLeaderLease::open(**db, "armhived@hc1", "", 10s);
  REQUIRE_FALSE(l.is_ok());
  CHECK(l.status().code() == ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace armhive
