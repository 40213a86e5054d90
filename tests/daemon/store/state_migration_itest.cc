// `armhived migrate` (daemon/store/state_migration.h) from a SQLite state filled through the
// real stores into the tests' PostgreSQL: read back through the same stores there, a target
// that is not empty or a source with an unknown table refused with nothing written, new ids
// past the copied ones, and a long history copied in batches.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "daemon/store/audit_log.h"
#include "daemon/store/pg_database.h"
#include "daemon/store/sqlite_database.h"
#include "daemon/store/sqlite_health_store.h"
#include "daemon/store/sqlite_host_store.h"
#include "daemon/store/sqlite_lease_store.h"
#include "daemon/store/state_migration.h"
#include "daemon/store/state_schema.h"
#include "daemon/store/token_store.h"
#include "tests/support/manual_clock.h"
#include "tests/support/postgres_server.h"

namespace armhive {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const TimePoint kT0 = from_unix_ms(1'800'000'000'000);

// A SQLite file in a directory of the test's, removed with it.
struct SqliteState {
  fs::path dir = fs::temp_directory_path() /
                 ("armhive-migrate-" + std::to_string(::getpid()) + "-" + std::to_string(next()));
  std::unique_ptr<SqliteDatabase> db;
  SqliteState() {
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto opened = SqliteDatabase::open((dir / "armhive.db").string());
    REQUIRE(opened.is_ok());
    db = std::move(*opened);
  }
  ~SqliteState() {
    db.reset();
    fs::remove_all(dir);
  }
  static int next() {
    static int n = 0;
    return ++n;
  }
};

std::unique_ptr<TestPostgresDatabase> make_pg() {
  auto pg = TestPostgresDatabase::make();
  INFO(pg.status().to_string());
  REQUIRE(pg.is_ok());
  return std::move(*pg);
}

std::unique_ptr<PgDatabase> connect(const TestPostgresDatabase& pg) {
  auto db = PgDatabase::connect(pg.url());
  INFO(db.status().to_string());
  REQUIRE(db.is_ok());
  return std::move(*db);
}

Lease lease_at(int i, LeaseState state) {
  Lease l;
  char id[32];
  std::snprintf(id, sizeof id, "l-%012d", i);
  l.id = id;
  l.pool = i % 2 == 0 ? "ci" : "dev";
  l.owner = "ci-bot";
  l.purpose = i % 2 == 0 ? Purpose::kCi : Purpose::kDev;
  l.labels = {{"repo", "octo/app"}, {"job", std::to_string(i)}};
  l.ssh_keys = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB9c migrate@test"};
  l.state = state;
  l.created_at = kT0 + std::chrono::minutes(i);
  l.expires_at = l.created_at + 1h;
  return l;
}

LeaseUsage usage_of(int i) {
  LeaseUsage u;
  u.cpu_ns = static_cast<uint64_t>(i) * 1'000'000'000ULL;
  u.disk_write_bytes = 4096ULL * static_cast<uint64_t>(i);
  u.net_rx_bytes = 10;
  u.net_tx_bytes = 3;
  u.peak_rss_bytes = 256ULL << 20;
  u.started_at = kT0;
  u.sampled_at = kT0 + 30s;
  u.samples = 4;
  u.last = UsageCounters{17, 123, std::nullopt, 456, 7, std::nullopt};
  return u;
}

HealthResult health_at(int i) {
  HealthResult h;
  h.at = kT0 + std::chrono::minutes(i);
  h.host = "hc1";
  h.pool = "ci";
  h.suite = "compression";
  h.figure = "compression.guest.t1.compress_mb_s";
  h.label = "compress MB/s, 1 thread";
  h.unit = "MB/s";
  h.value = 100.5 + i;
  h.run_id = "b-" + std::to_string(i);
  h.verdict = i < 2 ? "insufficient_history" : "within_band";
  if (i >= 2) h.band = HealthBandValues{static_cast<size_t>(i), 101.0, 0.5, 99.5, 102.5};
  h.reason = "within the band";
  return h;
}

HostSpec host_named(const std::string& name) {
  HostSpec h;
  h.name = name;
  h.libvirt_uri = "qemu+ssh://armhive@" + name + "/system";
  h.labels = {{"board", "honeycomb"}};
  h.l2_clusters = {"0-1", "2-3"};
  return h;
}

TEST_CASE("state migration: a state filled through the stores reads back the same on PostgreSQL",
          "[store][postgres][migrate]") {
  ManualClock clock(kT0);
  SqliteState state;
  Database& sqlite = *state.db;
  std::string ci_secret;
  std::string fingerprint;
  {
    auto leases = SqliteLeaseStore::open(sqlite);
    REQUIRE(leases.is_ok());
    // Twelve leases through their lives: history, usage, VMs, a drained host.
    for (int i = 1; i <= 12; ++i) {
      Lease l = lease_at(i, LeaseState::kPending);
      REQUIRE((*leases)->insert(l).is_ok());
      l.history.push_back({LeaseState::kPending, LeaseState::kReady, l.created_at + 1s, "warm VM"});
      l.state = LeaseState::kReady;
      l.vm_name = "armhive-vm-" + std::to_string(i);
      l.host = "hc1";
      l.usage = usage_of(i);
      REQUIRE((*leases)->update(l).is_ok());
      if (i % 3 == 0) {
        l.history.push_back(
            {LeaseState::kReady, LeaseState::kReleased, l.created_at + 5min, "done"});
        l.state = LeaseState::kReleased;
        l.usage->final = true;
        REQUIRE((*leases)->update(l).is_ok());
      } else {
        VmRecord vm;
        vm.name = l.vm_name;
        vm.vm_id = "vm-" + std::to_string(i);
        vm.pool = l.pool;
        vm.host = "hc1";
        vm.state = VmState::kLeased;
        vm.lease_id = l.id;
        vm.cpus = {i % 4};
        vm.created_at = l.created_at;
        REQUIRE((*leases)->put_vm(vm).is_ok());
      }
    }
    REQUIRE((*leases)->put_host_admin("tx1", HostHealthTracker::Admin::kDrain).is_ok());

    auto tokens = TokenStore::open(sqlite, clock);
    REQUIRE(tokens.is_ok());
    auto secret = (*tokens)->create({.name = "ci-bot", .role = TokenRole::kCi, .max_leases = 4});
    REQUIRE(secret.is_ok());
    ci_secret = *secret;
    REQUIRE((*tokens)->create({.name = "gone", .role = TokenRole::kRead}).is_ok());
    REQUIRE((*tokens)->revoke("gone").is_ok());
    fingerprint = (*tokens)->request_fingerprint_of("POST /v1/leases {\"pool\":\"ci\"}");

    auto audit = AuditLog::open(sqlite, clock);
    REQUIRE(audit.is_ok());
    for (int i = 1; i <= 7; ++i) {
      REQUIRE((*audit)
                  ->record("ci-bot", "lease.create", lease_at(i, LeaseState::kPending).id,
                           "pool ci, a \"quoted\" detail; with ? and 'quotes'")
                  .is_ok());
      clock.advance(1s);
    }

    auto hosts = SqliteHostStore::open(sqlite);
    REQUIRE(hosts.is_ok());
    REQUIRE((*hosts)->put(host_named("hc1")).is_ok());
    REQUIRE((*hosts)->put(host_named("tx1")).is_ok());
    REQUIRE((*hosts)->put_capabilities("hc1", "<capabilities><host/></capabilities>").is_ok());

    auto health = SqliteHealthStore::open(sqlite);
    REQUIRE(health.is_ok());
    for (int i = 0; i < 5; ++i) REQUIRE((*health)->append(health_at(i)).is_ok());
  }
  // What the startup commands' runner keeps (it needs an engine to be opened itself).
  REQUIRE(migrate_state(sqlite).is_ok());
  REQUIRE(sqlite
              .execute("INSERT INTO startups (lease_id, state, pid, status) VALUES (?, ?, ?, ?)",
                       {std::string("l-000000000001"), std::string("exited"), int64_t{0},
                        std::string("{\"state\":\"exited\",\"exit_code\":0}")})
              .is_ok());

  auto pg = make_pg();
  auto target = connect(*pg);
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> progress;
  MigrationOptions options;
  options.batch_rows = 5;  // several batches per table
  options.progress = [&](std::string_view table, int64_t done, int64_t total) {
    progress[std::string(table)].emplace_back(done, total);
  };
  auto report = migrate_state_to_postgres(*state.db, *target, options);
  INFO(report.status().to_string());
  REQUIRE(report.is_ok());
  CHECK(report->verification().is_ok());
  std::map<std::string, int64_t> rows;
  for (const MigratedTable& t : report->tables) {
    CHECK(t.source_rows == t.target_rows);
    rows[t.table] = t.target_rows;
  }
  CHECK(rows["leases"] == 12);
  CHECK(rows["lease_history"] == 12 + 4);
  CHECK(rows["lease_usage"] == 12);
  CHECK(rows["vms"] == 8);
  CHECK(rows["host_admin"] == 1);
  CHECK(rows["tokens"] == 2);
  CHECK(rows["server_secrets"] == 1);
  CHECK(rows["audit"] == 7);
  CHECK(rows["hosts"] == 2);
  CHECK(rows["host_capabilities"] == 1);
  CHECK(rows["health_results"] == 5);
  CHECK(rows["startups"] == 1);
  // The leader lease and the databases' own bookkeeping are not copied.
  CHECK(rows.count("leader") == 0);
  CHECK(rows.count("schema_migrations") == 0);
  CHECK(rows.count("armhive_meta") == 0);
  // Progress: each table from 0 to all its rows, a batch at a time.
  REQUIRE(progress["leases"].size() == 1 + 3);
  CHECK(progress["leases"].front() == std::make_pair(int64_t{0}, int64_t{12}));
  CHECK(progress["leases"][1] == std::make_pair(int64_t{5}, int64_t{12}));
  CHECK(progress["leases"].back() == std::make_pair(int64_t{12}, int64_t{12}));
  CHECK(progress["host_admin"].back() == std::make_pair(int64_t{1}, int64_t{1}));

  // Read back through the stores, on PostgreSQL, as the armhived of the new lab will.
  auto leases = SqliteLeaseStore::open(*target);
  REQUIRE(leases.is_ok());
  auto listed = (*leases)->list(LeaseFilter{});
  REQUIRE(listed.is_ok());
  REQUIRE(listed->size() == 12);
  for (int i = 1; i <= 12; ++i) {
    const Lease& l = listed->at(static_cast<size_t>(i - 1));
    INFO("lease " << l.id);
    CHECK(l.id == lease_at(i, LeaseState::kPending).id);
    CHECK(l.labels.at("job") == std::to_string(i));
    CHECK(l.purpose == (i % 2 == 0 ? Purpose::kCi : Purpose::kDev));
    CHECK(l.state == (i % 3 == 0 ? LeaseState::kReleased : LeaseState::kReady));
    CHECK(l.history.size() == (i % 3 == 0 ? 2u : 1u));
    CHECK(l.history.at(0).reason == "warm VM");
    REQUIRE(l.usage);
    CHECK(l.usage->cpu_ns == static_cast<uint64_t>(i) * 1'000'000'000ULL);
    CHECK(l.usage->last.cpu_ns == 123);
    CHECK_FALSE(l.usage->last.rss_bytes);
    CHECK(l.usage->final == (i % 3 == 0));
  }
  auto counted = (*leases)->count(LeaseFilter{});
  REQUIRE(counted.is_ok());
  CHECK((*counted)[LeaseState::kReady] == 8);
  CHECK((*counted)[LeaseState::kReleased] == 4);
  auto vms = (*leases)->vms();
  REQUIRE(vms.is_ok());
  CHECK(vms->size() == 8);
  auto admin = (*leases)->host_admin();
  REQUIRE(admin.is_ok());
  CHECK(admin->at("tx1") == HostHealthTracker::Admin::kDrain);

  auto tokens = TokenStore::open(*target, clock);
  REQUIRE(tokens.is_ok());
  auto who = (*tokens)->authenticate(ci_secret);
  INFO(who.status().to_string());
  REQUIRE(who.is_ok());
  CHECK(who->name == "ci-bot");
  CHECK(who->role == TokenRole::kCi);
  CHECK(who->max_leases == 4);
  auto gone = (*tokens)->get("gone");
  REQUIRE(gone.is_ok());
  CHECK(gone->revoked());
  // The same fingerprint key: a retry with an Idempotency-Key across the move is recognised.
  CHECK((*tokens)->request_fingerprint_of("POST /v1/leases {\"pool\":\"ci\"}") == fingerprint);

  auto audit = AuditLog::open(*target, clock);
  REQUIRE(audit.is_ok());
  auto entries = (*audit)->recent(100);
  REQUIRE(entries.is_ok());
  REQUIRE(entries->size() == 7);
  for (const AuditEntry& e : *entries) {
    CHECK(e.actor == "ci-bot");
    CHECK(e.detail == "pool ci, a \"quoted\" detail; with ? and 'quotes'");
  }
  auto for_lease = (*audit)->recent(100, "l-000000000003");
  REQUIRE(for_lease.is_ok());
  CHECK(for_lease->size() == 1);

  auto hosts = SqliteHostStore::open(*target);
  REQUIRE(hosts.is_ok());
  auto host_list = (*hosts)->list();
  REQUIRE(host_list.is_ok());
  REQUIRE(host_list->size() == 2);
  CHECK(host_list->at(0).name == "hc1");
  CHECK(host_list->at(0).l2_clusters == std::vector<std::string>{"0-1", "2-3"});
  auto caps = (*hosts)->capabilities();
  REQUIRE(caps.is_ok());
  CHECK(caps->at("hc1") == "<capabilities><host/></capabilities>");

  auto health = SqliteHealthStore::open(*target);
  REQUIRE(health.is_ok());
  auto series = (*health)->recent("hc1", "ci", "compression.guest.t1.compress_mb_s", 10);
  REQUIRE(series.is_ok());
  REQUIRE(series->size() == 5);
  bool banded = false;
  for (const HealthResult& h : *series) {
    if (h.run_id != "b-4") continue;
    banded = true;
    CHECK(h.value == 104.5);
    REQUIRE(h.band);
    CHECK(h.band->median == 101.0);
    CHECK(h.band->high == 102.5);
  }
  CHECK(banded);

  auto startup = target->query("SELECT state, status FROM startups WHERE lease_id = ?",
                               {std::string("l-000000000001")});
  REQUIRE(startup.is_ok());
  REQUIRE(startup->size() == 1);
  CHECK(sql_text((*startup)[0][0]) == "exited");
}

TEST_CASE("state migration: rows added on PostgreSQL after the copy get ids past the copied ones",
          "[store][postgres][migrate]") {
  ManualClock clock(kT0);
  SqliteState state;
  int64_t newest_health = 0;
  {
    auto audit = AuditLog::open(*state.db, clock);
    REQUIRE(audit.is_ok());
    for (int i = 0; i < 6; ++i) REQUIRE((*audit)->record("admin", "token.create", "").is_ok());
    auto hosts = SqliteHostStore::open(*state.db);
    REQUIRE(hosts.is_ok());
    REQUIRE((*hosts)->put(host_named("hc1")).is_ok());
    REQUIRE((*hosts)->put(host_named("hc2")).is_ok());
    auto health = SqliteHealthStore::open(*state.db);
    REQUIRE(health.is_ok());
    for (int i = 0; i < 3; ++i) {
      auto id = (*health)->append(health_at(i));
      REQUIRE(id.is_ok());
      newest_health = *id;
    }
  }
  // The two newest audit rows gone (as a retention could take them): SQLite never gives their
  // ids again, and neither may PostgreSQL.
  REQUIRE(state.db->execute("DELETE FROM audit WHERE id > 4").is_ok());

  auto pg = make_pg();
  auto target = connect(*pg);
  auto report = migrate_state_to_postgres(*state.db, *target);
  INFO(report.status().to_string());
  REQUIRE(report.is_ok());
  REQUIRE(report->verification().is_ok());

  auto audit = AuditLog::open(*target, clock);
  REQUIRE(audit.is_ok());
  REQUIRE((*audit)->record("admin", "token.revoke", "").is_ok());
  auto entries = (*audit)->recent(10);
  REQUIRE(entries.is_ok());
  REQUIRE(entries->size() == 5);
  int64_t revoke_id = 0;
  for (const AuditEntry& e : *entries) {
    if (e.action == "token.revoke") revoke_id = e.id;
  }
  CHECK(revoke_id == 7);

  auto hosts = SqliteHostStore::open(*target);
  REQUIRE(hosts.is_ok());
  REQUIRE((*hosts)->put(host_named("tx1")).is_ok());
  auto listed = (*hosts)->list();
  REQUIRE(listed.is_ok());
  REQUIRE(listed->size() == 3);
  CHECK(listed->back().name == "tx1");  // listed in the order added: after the copied ones

  auto health = SqliteHealthStore::open(*target);
  REQUIRE(health.is_ok());
  auto id = (*health)->append(health_at(3));
  REQUIRE(id.is_ok());
  CHECK(*id == newest_health + 1);

  auto leases = SqliteLeaseStore::open(*target);
  REQUIRE(leases.is_ok());
  REQUIRE((*leases)->insert(lease_at(1, LeaseState::kPending)).is_ok());
}

TEST_CASE("state migration: a target that is not empty is refused and nothing is written",
          "[store][postgres][migrate]") {
  ManualClock clock(kT0);
  SqliteState state;
  {
    auto leases = SqliteLeaseStore::open(*state.db);
    REQUIRE(leases.is_ok());
    REQUIRE((*leases)->insert(lease_at(1, LeaseState::kPending)).is_ok());
  }
  auto pg = make_pg();
  auto target = connect(*pg);
  // An armhived already ran on it: its token store holds the bootstrap admin.
  {
    auto tokens = TokenStore::open(*target, clock);
    REQUIRE(tokens.is_ok());
    REQUIRE((*tokens)->create({.name = "admin", .role = TokenRole::kAdmin}).is_ok());
  }
  bool called = false;
  MigrationOptions options;
  options.progress = [&](std::string_view, int64_t, int64_t) { called = true; };
  auto report = migrate_state_to_postgres(*state.db, *target, options);
  REQUIRE_FALSE(report.is_ok());
  CHECK(report.status().code() == ErrorCode::kConflict);
  CHECK_THAT(report.status().message(),
             Catch::Contains("the target database is not empty: table tokens has 1 row"));
  CHECK_FALSE(called);
  // Nothing written: no table of the other components was made, the tokens are as they were.
  auto leases = target->query("SELECT to_regclass('leases') IS NULL");
  REQUIRE(leases.is_ok());
  CHECK(sql_int((*leases)[0][0]) == 1);
  auto tokens = target->query("SELECT name FROM tokens");
  REQUIRE(tokens.is_ok());
  REQUIRE(tokens->size() == 1);
  CHECK(sql_text((*tokens)[0][0]) == "admin");

  // A second run over a target that the first filled is refused the same way.
  auto fresh = make_pg();
  auto second = connect(*fresh);
  REQUIRE(migrate_state_to_postgres(*state.db, *second).is_ok());
  auto again = migrate_state_to_postgres(*state.db, *second);
  REQUIRE_FALSE(again.is_ok());
  CHECK_THAT(again.status().message(),
             Catch::Contains("the target database is not empty: table leases has 1 row"));
  auto count = second->query("SELECT count(*) FROM leases");
  REQUIRE(count.is_ok());
  CHECK(sql_int((*count)[0][0]) == 1);
}

TEST_CASE("state migration: a source with a table the schema list does not know is refused",
          "[store][postgres][migrate]") {
  SqliteState state;
  REQUIRE(migrate_state(*state.db).is_ok());
  REQUIRE(state.db->execute("CREATE TABLE webhook_deliveries (id TEXT PRIMARY KEY)").is_ok());
  REQUIRE(state.db->execute("INSERT INTO webhook_deliveries VALUES ('d-1')").is_ok());
  auto pg = make_pg();
  auto target = connect(*pg);
  auto report = migrate_state_to_postgres(*state.db, *target);
  REQUIRE_FALSE(report.is_ok());
  CHECK(report.status().code() == ErrorCode::kConflict);
  CHECK_THAT(report.status().message(), Catch::Contains("webhook_deliveries"));
  auto leases = target->query("SELECT to_regclass('leases') IS NULL");
  REQUIRE(leases.is_ok());
  CHECK(sql_int((*leases)[0][0]) == 1);
}

TEST_CASE("state migration: every table the schema list creates is copied or named as not copied",
          "[store][migrate]") {
  SqliteState state;
  REQUIRE(migrate_state(*state.db).is_ok());
  std::set<std::string> listed;
  for (const StateComponent& c : state_components()) {
    for (const StateTable& t : c.tables) listed.emplace(t.name);
  }
  for (std::string_view t : bookkeeping_tables()) listed.emplace(t);
  auto tables = state.db->query(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, 7) != 'sqlite_'");
  REQUIRE(tables.is_ok());
  REQUIRE(tables->size() > 10);
  for (const SqlRow& r : *tables) {
    INFO("table " << sql_text(r[0]));
    CHECK(listed.count(sql_text(r[0])) == 1);
  }
}

TEST_CASE("state migration: a history of 100000 leases is copied in batches",
          "[store][postgres][migrate]") {
  SqliteState state;
  REQUIRE(migrate_state(*state.db).is_ok());
  constexpr int64_t kLeases = 100000;
  // Written in SQL: the stores would take minutes under the sanitizers for what is one
  // statement here.
  REQUIRE(
      state.db
          ->execute("WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?) "
                    "INSERT INTO leases (id, pool, owner, purpose, ssh_keys, labels, "
                    "idempotency_key, state, reason, ttl_s, created_at, ready_at, expires_at, "
                    "ended_at, vm_name, address, login_user, cpus, warm) SELECT printf('l-%012d', "
                    "i), 'ci', 'ci-bot', 'ci', '[]', '{}', '', 'released', 'done', 3600, "
                    "1800000000000 + i, 0, 0, 1800000000000 + i, '', '', 'root', '[]', 0 FROM k",
                    {kLeases})
          .is_ok());
  REQUIRE(state.db
              ->execute("INSERT INTO lease_history (lease_id, seq, from_state, to_state, at, "
                        "reason) SELECT id, 0, 'pending', 'released', created_at, 'done' FROM "
                        "leases")
              .is_ok());
  auto pg = make_pg();
  auto target = connect(*pg);
  int64_t last_done = -1;
  bool ordered = true;
  MigrationOptions options;
  options.progress = [&](std::string_view table, int64_t done, int64_t total) {
    if (table != "lease_history") return;
    ordered = ordered && done > last_done && done <= total && total == kLeases;
    last_done = done;
  };
  auto report = migrate_state_to_postgres(*state.db, *target, options);
  INFO(report.status().to_string());
  REQUIRE(report.is_ok());
  CHECK(report->verification().is_ok());
  CHECK(ordered);
  CHECK(last_done == kLeases);
  auto leases = SqliteLeaseStore::open(*target);
  REQUIRE(leases.is_ok());
  auto counted = (*leases)->count(LeaseFilter{});
  REQUIRE(counted.is_ok());
  CHECK((*counted)[LeaseState::kReleased] == static_cast<size_t>(kLeases));
  auto newest = (*leases)->find("l-000000100000");
  REQUIRE(newest.is_ok());
  REQUIRE(newest->has_value());
  CHECK((*newest)->history.size() == 1);
}

}  // namespace
}  // namespace armhive
