// Upgrades keep every lease: the database the previous armhived wrote (tests/fixtures/upgrade,
// README there says how it was made) opens with today's stores, migrates, and holds what it
// held — leases with their labels and idempotency keys, the VM record, tokens that still
// authenticate, the audit log — and then names today's armhived as its writer.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "base/version.h"
#include "daemon/core/clock.h"
#include "daemon/store/database.h"
#include "daemon/store/sqlite_lease_store.h"
#include "daemon/store/token_store.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

TEST_CASE("the previous armhived's database opens, migrates and keeps every lease",
          "[store][upgrade]") {
  fs::path dir = fs::temp_directory_path() / ("armhive-upgrade-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path db_path = dir / "armhive.db";
  fs::copy_file(std::string(ARMHIVE_FIXTURES_DIR) + "/upgrade/armhived-7a9713b.db", db_path);
  {
    auto db = Database::open(db_path.string());
    REQUIRE(db.is_ok());
    auto leases = SqliteLeaseStore::open(**db);
    REQUIRE(leases.is_ok());
    SystemClock clock;
    auto tokens = TokenStore::open(**db, clock);
    REQUIRE(tokens.is_ok());

    auto ready = (*leases)->find("l-ecd95a4f692f");
    REQUIRE(ready.is_ok());
    REQUIRE(ready->has_value());
    const Lease& b = **ready;
    CHECK(b.state == LeaseState::kReady);
    CHECK(b.pool == "ci");
    CHECK(b.owner == "gitlab");
    CHECK(b.vm_name == "armhive-vm-9930e905");
    CHECK(b.labels == std::map<std::string, std::string>{{"job", "b"}});
    auto by_key = (*leases)->find_by_idempotency_key("gitlab", "job-b");
    REQUIRE(by_key.is_ok());
    REQUIRE(by_key->has_value());
    CHECK((*by_key)->id == b.id);
    auto released = (*leases)->find("l-cf6ee8aadb32");
    REQUIRE(released.is_ok());
    REQUIRE(released->has_value());
    CHECK((*released)->state == LeaseState::kReleased);
    // The VM record recovery adopts the running domain by.
    auto vms = (*leases)->vms();
    REQUIRE(vms.is_ok());
    REQUIRE(vms->size() == 1);
    CHECK(vms->front().name == "armhive-vm-9930e905");
    CHECK(vms->front().lease_id == b.id);
    CHECK(vms->front().state == VmState::kLeased);
    CHECK(vms->front().cpus == std::vector<int>{1});
    // The CI token made then still authenticates, with its role.
    auto who = (*tokens)->authenticate("ah_WEnCN2gErz8tAVpF2M3sWw0jY_neCfeWMnRJQc6v");
    REQUIRE(who.is_ok());
    CHECK(who->name == "gitlab");
    CHECK(who->role == TokenRole::kCi);
    auto audit = (*db)->query("SELECT count(*) FROM audit");
    REQUIRE(audit.is_ok());
    CHECK(sql_int(audit->front()[0]) == 3);
    // Today's armhived is now the writer an older one would be told about.
    auto meta = (*db)->query("SELECT value FROM armhive_meta WHERE key = 'written_by'");
    REQUIRE(meta.is_ok());
    REQUIRE(meta->size() == 1);
    CHECK(sql_text(meta->front()[0]) == std::string(kVersion));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace armhive
