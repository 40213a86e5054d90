// The lease_usage table (schema step 5): a lease's usage is kept with it through insert,
// update, batch, listing and reopening, an older database upgrades with none, a tampered row
// is refused, and the usage report summed in SQL equals daemon/core's aggregate_usage.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <random>

#include "daemon/store/sqlite_lease_store.h"
#include "tests/support/store_backends.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;

const TimePoint kT0 = from_unix_ms(1'800'000'000'000);

Lease lease_with_usage(int i, const std::string& owner, const std::string& pool,
                       std::map<std::string, std::string> labels, std::optional<LeaseUsage> u) {
  Lease l;
  char id[32];
  std::snprintf(id, sizeof id, "l-%012d", i);
  l.id = id;
  l.pool = pool;
  l.owner = owner;
  l.labels = std::move(labels);
  l.state = LeaseState::kReady;
  l.created_at = kT0 + std::chrono::minutes(i);
  l.expires_at = l.created_at + 1h;
  l.usage = std::move(u);
  return l;
}

LeaseUsage some_usage(uint64_t cpu_s, std::chrono::seconds wall) {
  LeaseUsage u;
  u.cpu_ns = cpu_s * 1'000'000'000ULL;
  u.disk_write_bytes = 4096 * cpu_s;
  u.net_rx_bytes = 10 * cpu_s;
  u.net_tx_bytes = 3 * cpu_s;
  u.peak_rss_bytes = (100 + cpu_s) << 20;
  u.started_at = kT0;
  u.sampled_at = kT0 + wall;
  u.samples = 4;
  u.last = UsageCounters{17, 123, std::nullopt, 456, 7, std::nullopt};
  return u;
}

void check_same(const LeaseUsage& a, const LeaseUsage& b) {
  CHECK(a.cpu_ns == b.cpu_ns);
  CHECK(a.disk_write_bytes == b.disk_write_bytes);
  CHECK(a.net_rx_bytes == b.net_rx_bytes);
  CHECK(a.net_tx_bytes == b.net_tx_bytes);
  CHECK(a.peak_rss_bytes == b.peak_rss_bytes);
  CHECK(a.started_at == b.started_at);
  CHECK(a.sampled_at == b.sampled_at);
  CHECK(a.samples == b.samples);
  CHECK(a.final == b.final);
  CHECK(a.last.run_id == b.last.run_id);
  CHECK(a.last.cpu_ns == b.last.cpu_ns);
  CHECK(a.last.rss_bytes == b.last.rss_bytes);
  CHECK(a.last.disk_write_bytes == b.last.disk_write_bytes);
  CHECK(a.last.net_rx_bytes == b.last.net_rx_bytes);
  CHECK(a.last.net_tx_bytes == b.last.net_tx_bytes);
}

TEST_CASE("usage store: a lease's usage is kept with it, final included, across a reopen",
          "[store][usage]") {
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  LeaseUsage u = some_usage(12, 30s);
  {
    auto db = (*backend)->open();
    REQUIRE(db.is_ok());
    auto store = SqliteLeaseStore::open(**db);
    REQUIRE(store.is_ok());
    Lease waiting = lease_with_usage(1, "ci-a", "ci", {}, std::nullopt);
    REQUIRE((*store)->insert(waiting).is_ok());
    CHECK_FALSE((*store)->find(waiting.id)->value().usage);  // never got a VM: none
    Lease ready = waiting;
    ready.usage = u;
    REQUIRE((*store)->update(ready).is_ok());
    check_same((*store)->find(ready.id)->value().usage.value(), u);
    // A write without a usage (an older version of the lease) never takes it away.
    REQUIRE((*store)->update(waiting).is_ok());
    check_same((*store)->find(ready.id)->value().usage.value(), u);
    // The final version, through a batch.
    Lease ended = ready;
    ended.state = LeaseState::kReleased;
    ended.usage->final = true;
    ended.usage->cpu_ns += 1;
    REQUIRE((*store)->write_batch({{ended.id, ended}}, {}).is_ok());
    // A lease inserted with its usage (a test's or a tool's) keeps it too.
    REQUIRE((*store)->insert(lease_with_usage(2, "ci-b", "ci", {}, u)).is_ok());
  }
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto store = SqliteLeaseStore::open(**db);
  REQUIRE(store.is_ok());
  auto listed = (*store)->list(LeaseFilter{});
  REQUIRE(listed.is_ok());
  REQUIRE(listed->size() == 2);
  REQUIRE(listed->at(0).usage);
  CHECK(listed->at(0).usage->final);
  CHECK(listed->at(0).usage->cpu_ns == u.cpu_ns + 1);
  check_same(listed->at(1).usage.value(), u);

  // A row that says what we never wrote is refused, naming the lease.
  REQUIRE((*db)
              ->execute("UPDATE lease_usage SET cpu_ns = -5 WHERE lease_id = ?", {listed->at(0).id})
              .is_ok());
  auto bad = (*store)->find(listed->at(0).id);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ErrorCode::kInternal);
  CHECK_THAT(bad.status().to_string(), Catch::Contains(listed->at(0).id));
}

TEST_CASE("usage store: a database from before usage was kept upgrades with none",
          "[store][usage]") {
  auto db = Database::open(":memory:");
  REQUIRE(db.is_ok());
  const auto& steps = SqliteLeaseStore::schema_steps();
  REQUIRE(steps.size() >= 5);
  REQUIRE((*db)->migrate("leases", {steps[0], steps[1], steps[2], steps[3]}).is_ok());
  REQUIRE((*db)
              ->execute("INSERT INTO leases (id, pool, owner, purpose, ssh_keys, labels, "
                        "idempotency_key, state, reason, ttl_s, created_at, ready_at, "
                        "expires_at, ended_at, vm_name, address, login_user, cpus, warm) VALUES "
                        "('l-000000000001', 'ci', 'odd', 'ci', '[]', '{}', '', 'released', '', "
                        "60, 1800000000000, 2, 3, 4, 'armhive-vm-old', '', '', '[]', 1)")
              .is_ok());
  auto store = SqliteLeaseStore::open(**db);
  REQUIRE(store.is_ok());
  auto old = (*store)->find("l-000000000001");
  REQUIRE(old.is_ok());
  CHECK_FALSE((*old)->usage);
  auto rows = (*store)->usage({kT0 - 1h, kT0 + 1h, UsageGroupBy::kOwner, {}, {}});
  REQUIRE(rows.is_ok());
  CHECK(rows->empty());  // it has no usage: not counted
}

// The SQL and the pure aggregation agree on random leases, for every grouping, window and
// owner: two implementations of one rule.
TEST_CASE("usage store: the report in SQL equals aggregate_usage", "[store][usage][property]") {
  const std::string kind = GENERATE(as<std::string>{}, "sqlite", "postgresql");
  INFO("on " << kind);
  auto backend = StoreBackend::make(kind);
  REQUIRE(backend.is_ok());
  auto db = (*backend)->open();
  REQUIRE(db.is_ok());
  auto store = SqliteLeaseStore::open(**db);
  REQUIRE(store.is_ok());
  std::mt19937_64 rng(5);
  std::vector<Lease> all;
  const std::vector<std::string> owners = {"ci-a", "ci-b", "github"};
  const std::vector<std::string> pools = {"ci", "big"};
  const std::vector<std::string> teams = {"arm", "x86", "a,\"b\""};
  for (int i = 0; i < 300; ++i) {
    std::map<std::string, std::string> labels;
    if (rng() % 3 != 0) labels["team"] = teams[rng() % teams.size()];
    if (rng() % 2 == 0) labels["repo"] = "r" + std::to_string(rng() % 4);
    std::optional<LeaseUsage> u;
    if (rng() % 5 != 0) {
      u = some_usage(rng() % 1000, std::chrono::seconds(rng() % 5000));
      u->final = rng() % 2 == 0;
    }
    Lease l =
        lease_with_usage(i, owners[rng() % owners.size()], pools[rng() % pools.size()], labels, u);
    REQUIRE((*store)->insert(l).is_ok());
    all.push_back(l);
  }
  auto same = [](const std::vector<UsageRow>& a, const std::vector<UsageRow>& b) {
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("group " << a[i].group);
      CHECK(a[i].group == b[i].group);
      CHECK(a[i].leases == b[i].leases);
      CHECK(a[i].cpu_ns == b[i].cpu_ns);
      CHECK(a[i].wall_ms == b[i].wall_ms);
      CHECK(a[i].disk_write_bytes == b[i].disk_write_bytes);
      CHECK(a[i].net_rx_bytes == b[i].net_rx_bytes);
      CHECK(a[i].net_tx_bytes == b[i].net_tx_bytes);
      CHECK(a[i].peak_rss_bytes == b[i].peak_rss_bytes);
    }
  };
  for (int round = 0; round < 30; ++round) {
    UsageQuery q;
    q.since = kT0 + std::chrono::minutes(rng() % 200);
    q.until = q.since + std::chrono::minutes(rng() % 200);
    q.group_by = static_cast<UsageGroupBy>(rng() % 3);
    if (q.group_by == UsageGroupBy::kLabel) q.label = rng() % 2 == 0 ? "team" : "repo";
    if (rng() % 3 == 0) q.owner = owners[rng() % owners.size()];
    INFO("round " << round << " group_by " << to_string(q.group_by) << " " << q.label);
    auto sql = (*store)->usage(q);
    REQUIRE(sql.is_ok());
    same(*sql, aggregate_usage(all, q));
    // And the LeaseStore default (paging through list()), which services without SQL use.
    auto paged = (*store)->LeaseStore::usage(q);
    REQUIRE(paged.is_ok());
    same(*paged, *sql);
  }
}

}  // namespace
}  // namespace armhive
