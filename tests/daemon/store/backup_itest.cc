// armhived backup / restore (daemon/store/backup.h) and the state directory's lock: a backup
// taken while leases churn is of one moment, a restore gives back exactly what was backed up,
// and neither ever overwrites what it should not.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "daemon/store/backup.h"
#include "daemon/store/sqlite_lease_store.h"
#include "daemon/store/state_lock.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("armhive-backup-" + std::to_string(::getpid()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

Lease lease_of(int i, LeaseState state) {
  Lease l;
  char id[32];
  std::snprintf(id, sizeof id, "l-%012d", i);
  l.id = id;
  l.pool = "ci";
  l.owner = "gitlab";
  l.state = state;
  l.vm_name = "armhive-ci-" + std::to_string(i);
  l.created_at = from_unix_ms(1'700'000'000'000 + i);
  l.expires_at = from_unix_ms(1'700'003'600'000 + i);
  return l;
}

VmRecord vm_of(const Lease& l) {
  VmRecord vm;
  vm.name = l.vm_name;
  vm.vm_id = "vm-" + l.id;
  vm.pool = l.pool;
  vm.state = VmState::kLeased;
  vm.lease_id = l.id;
  vm.created_at = l.created_at;
  return vm;
}

// Every lease (id, state) and VM (name, lease) of a database, sorted: what must come back.
std::vector<std::string> contents(const std::string& path) {
  auto db = Database::open(path);
  REQUIRE(db.is_ok());
  auto store = SqliteLeaseStore::open(**db);
  REQUIRE(store.is_ok());
  std::vector<std::string> out;
  LeaseFilter all;
  all.limit = kMaxListLimit;
  auto leases = (*store)->list(all);
  REQUIRE(leases.is_ok());
  for (const Lease& l : *leases) out.push_back(l.id + " " + std::string(to_string(l.state)));
  auto vms = (*store)->vms();
  REQUIRE(vms.is_ok());
  for (const VmRecord& v : *vms) out.push_back(v.name + " -> " + v.lease_id);
  std::sort(out.begin(), out.end());
  return out;
}

size_t ready_leases(const std::string& path) {
  auto db = Database::open(path);
  REQUIRE(db.is_ok());
  auto store = SqliteLeaseStore::open(**db);
  REQUIRE(store.is_ok());
  auto active = (*store)->active();
  REQUIRE(active.is_ok());
  auto vms = (*store)->vms();
  REQUIRE(vms.is_ok());
  CHECK(vms->size() == active->size());  // each commit moves a lease and its VM together
  return active->size();
}

TEST_CASE("a backup taken while 100 leases churn is of one moment and restores exactly",
          "[store][backup]") {
  TempDir dir;
  const std::string source = (dir.path / "armhive.db").string();
  constexpr int kLeases = 100;
  {
    auto db = Database::open(source);
    REQUIRE(db.is_ok());
    auto store = SqliteLeaseStore::open(**db);
    REQUIRE(store.is_ok());
    // 100 ready leases with their VMs, and 100 released ones to swap with.
    for (int i = 0; i < 2 * kLeases; ++i) {
      Lease l = lease_of(i, i < kLeases ? LeaseState::kReady : LeaseState::kReleased);
      REQUIRE((*store)->insert(l).is_ok());
      if (i < kLeases) REQUIRE((*store)->put_vm(vm_of(l)).is_ok());
    }
    // The churn: each commit releases one lease (its VM goes) and readies another (its VM
    // comes), as the engine's persistence queue writes them, so every commit has 100 of each.
    std::atomic<bool> stop{false};
    std::atomic<int> commits{0};
    std::atomic<bool> churn_ok{true};
    std::thread churn([&] {
      for (int step = 0; !stop; ++step) {
        int out = step % (2 * kLeases);
        int in = (out + kLeases) % (2 * kLeases);
        Lease released = lease_of(out, LeaseState::kReleased);
        Lease ready = lease_of(in, LeaseState::kReady);
        Status s = (*store)->write_batch(
            {{released.id, released}, {ready.id, ready}},
            {{released.vm_name, std::nullopt}, {ready.vm_name, vm_of(ready)}});
        if (!s.is_ok()) churn_ok = false;
        ++commits;
      }
    });
    while (commits < 50) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::string during = (dir.path / "during.db").string();
    Status taken = backup_database(source, during);
    const int commits_at_backup = commits;
    while (commits < commits_at_backup + 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    stop = true;
    churn.join();
    REQUIRE(churn_ok);
    REQUIRE(taken.is_ok());
    // Owner-only, a single file, and one moment: 100 ready leases, each with its VM.
    struct stat st {};
    REQUIRE(::stat(during.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK_FALSE(fs::exists(during + "-wal"));
    CHECK(ready_leases(during) == kLeases);
  }

  // Quiet now: a backup restored into another state directory gives back every row.
  const std::string quiet = (dir.path / "quiet.db").string();
  REQUIRE(backup_database(source, quiet).is_ok());
  const std::vector<std::string> before = contents(source);
  REQUIRE(before.size() == 3 * kLeases);  // 200 leases, 100 VMs
  fs::create_directories(dir.path / "restored");
  const std::string target = (dir.path / "restored" / "armhive.db").string();
  {
    auto empty = Database::open(target);  // a fresh armhived's database, to be replaced
    REQUIRE(empty.is_ok());
    REQUIRE(SqliteLeaseStore::open(**empty).is_ok());
  }
  REQUIRE(restore_database(quiet, target).is_ok());
  CHECK(contents(target) == before);
  CHECK(contents(target + ".before-restore").empty());  // what it replaced, kept
}

TEST_CASE("backup and restore refuse what they must not touch", "[store][backup]") {
  TempDir dir;
  const std::string source = (dir.path / "armhive.db").string();
  {
    auto db = Database::open(source);
    REQUIRE(db.is_ok());
    auto store = SqliteLeaseStore::open(**db);
    REQUIRE(store.is_ok());
    REQUIRE((*store)->insert(lease_of(1, LeaseState::kReady)).is_ok());
  }
  // Never over an existing file.
  const std::string existing = (dir.path / "precious").string();
  std::ofstream(existing) << "not yours";
  Status over = backup_database(source, existing);
  CHECK(over.code() == ErrorCode::kConflict);
  CHECK_THAT(over.message(), Catch::Contains("exists"));
  std::ifstream kept(existing);
  std::string text((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
  CHECK(text == "not yours");
  CHECK(backup_database((dir.path / "none.db").string(), (dir.path / "x.db").string()).code() ==
        ErrorCode::kNotFound);

  // Not a database, or not armhived's: refused, and the database stays as it was.
  const std::vector<std::string> before = contents(source);
  Status garbage = restore_database(existing, source);
  CHECK(garbage.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(garbage.message(), Catch::Contains("not a SQLite database"));
  const std::string other = (dir.path / "other.db").string();
  {
    auto db = Database::open(other);
    REQUIRE(db.is_ok());
    REQUIRE((*db)->execute("CREATE TABLE t (x)").is_ok());
  }
  Status foreign = restore_database(other, source);
  CHECK(foreign.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(foreign.message(), Catch::Contains("not armhived's"));
  CHECK(contents(source) == before);
  CHECK_FALSE(fs::exists(source + ".before-restore"));
}

TEST_CASE("one armhived per state directory", "[store][backup]") {
  TempDir dir;
  auto first = StateLock::acquire(dir.path.string());
  REQUIRE(first.is_ok());
  auto second = StateLock::acquire(dir.path.string());
  REQUIRE_FALSE(second.is_ok());
  CHECK(second.status().code() == ErrorCode::kConflict);
  CHECK_THAT(second.status().message(), Catch::Contains("pid " + std::to_string(::getpid())));
  first->reset();
  CHECK(StateLock::acquire(dir.path.string()).is_ok());
}

}  // namespace
}  // namespace armhive
