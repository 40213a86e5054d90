#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>
#include <vector>

#include "base/version.h"
#include "daemon/store/sqlite_database.h"

namespace armhive {
namespace {

// An empty directory of this name under the temp directory.
// Named after the process too: a suite run twice at once (a developer's run beside ctest's)
// must not share files.
// Removed when the test ends, however it ends.
struct FreshDir {
  std::filesystem::path path;
  ~FreshDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
};
FreshDir fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return FreshDir{dir};
}

// The rows of table t, read through a database opened anew.
int64_t rows_after_reopen(const std::string& path) {
  auto again = Database::open(path);
  REQUIRE(again.is_ok());
  auto n = (*again)->query("SELECT COUNT(*) FROM t");
  REQUIRE(n.is_ok());
  return sql_int((*n)[0][0]);
}

// The permission bits of a file (0 when it does not exist).
unsigned mode_of(const std::filesystem::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  return st.st_mode & 0777;
}

// Sets the process umask for its lifetime (the files a test makes see it; restored after).
class Umask {
 public:
  explicit Umask(mode_t mask) : old_(::umask(mask)) {}
  ~Umask() { ::umask(old_); }
  Umask(const Umask&) = delete;
  Umask& operator=(const Umask&) = delete;

 private:
  mode_t old_;
};

TEST_CASE("database: the file, its WAL and its SHM are 0600 whatever the umask",
          "[store][hostile]") {
  // Issue 33 finding 9: they used to be created with the umask's modes (0644 under 022),
  // readable by every local user: token hashes, the audit log, request fingerprints.
  Umask loose(022);
  auto dir = fresh_dir("armhive-db-modes");
  const std::string path = (dir / "state.db").string();
  {
    auto db = Database::open(path);
    REQUIRE(db.is_ok());
    REQUIRE((*db)->execute("CREATE TABLE t (x INTEGER)").is_ok());
    REQUIRE((*db)->execute("INSERT INTO t VALUES (1)").is_ok());
    // All three exist while the database is open (WAL mode).
    for (const char* suffix : {"", "-wal", "-shm"}) {
      INFO(path << suffix);
      CHECK(mode_of(path + suffix) == 0600);
    }
  }
  // A database an earlier version left 0644 (with its WAL) is narrowed when opened.
  const std::string old_path = (dir / "old.db").string();
  {
    auto db = Database::open(old_path);
    REQUIRE(db.is_ok());
    REQUIRE((*db)->execute("CREATE TABLE t (x INTEGER)").is_ok());
  }
  for (const char* suffix : {"", "-wal", "-shm"}) {
    if (std::filesystem::exists(old_path + suffix)) {
      std::filesystem::permissions(old_path + suffix, std::filesystem::perms(0644));
    }
  }
  REQUIRE(mode_of(old_path) == 0644);
  auto db = Database::open(old_path);
  REQUIRE(db.is_ok());
  REQUIRE((*db)->execute("INSERT INTO t VALUES (1)").is_ok());
  for (const char* suffix : {"", "-wal", "-shm"}) {
    INFO(old_path << suffix);
    CHECK(mode_of(old_path + suffix) == 0600);
  }
}

TEST_CASE(
    "database: a Durability::kFull transaction commits with synchronous=FULL, the rest "
    "NORMAL",
    "[store]") {
  auto dir = fresh_dir("armhive-db-sync");
  auto db = Database::open((dir / "state.db").string());
  REQUIRE(db.is_ok());
  std::vector<int64_t> levels;
  (*db)->set_before_commit_for_test([&levels](Database::Tx& tx) {
    auto r = tx.query("PRAGMA synchronous");
    REQUIRE(r.is_ok());
    levels.push_back(sql_int((*r)[0][0]));
  });
  REQUIRE((*db)->execute("CREATE TABLE t (x INTEGER)").is_ok());
  auto insert = [](Database::Tx& tx) { return tx.execute("INSERT INTO t VALUES (1)"); };
  REQUIRE((*db)->transaction(insert).is_ok());
  REQUIRE((*db)->transaction(insert, Database::Durability::kFull).is_ok());
  REQUIRE((*db)->transaction(insert).is_ok());
  // 1 = NORMAL, 2 = FULL: raised for that one commit only.
  CHECK(levels == std::vector<int64_t>{1, 2, 1});
}

TEST_CASE("database migrations apply once and survive reopening", "[store]") {
  auto dir = fresh_dir("armhive-db-test");
  std::string path = (dir / "a.db").string();
  std::vector<std::string> steps = {
      "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE); CREATE INDEX t_name ON t(name)",
      "ALTER TABLE t ADD COLUMN extra TEXT"};
  {
    auto db = Database::open(path);
    REQUIRE(db.is_ok());
    REQUIRE((*db)->migrate("test", steps).is_ok());
    REQUIRE((*db)
                ->execute("INSERT INTO t (name, extra) VALUES (?, ?)",
                          {std::string("a"), std::string("x")})
                .is_ok());
    // A unique violation is a conflict, not a crash; the failed transaction leaves nothing.
    Status s = (*db)->transaction([](Database::Tx& tx) {
      ARMHIVE_RETURN_IF_ERROR(tx.execute("INSERT INTO t (name) VALUES ('b')"));
      return tx.execute("INSERT INTO t (name) VALUES ('a')");
    });
    CHECK(s.code() == ErrorCode::kConflict);
  }
  auto db = Database::open(path);
  REQUIRE(db.is_ok());
  REQUIRE((*db)->migrate("test", steps).is_ok());  // already applied: no-op
  auto rows = (*db)->query("SELECT name, extra FROM t ORDER BY name");
  REQUIRE(rows.is_ok());
  REQUIRE(rows->size() == 1);
  CHECK(sql_text((*rows)[0][0]) == "a");
  CHECK(sql_text((*rows)[0][1]) == "x");
}

TEST_CASE("a database a newer armhived migrated is refused, naming both versions", "[store]") {
  auto dir = fresh_dir("armhive-db-newer-test");
  std::string path = (dir / "n.db").string();
  const std::vector<std::string> v2 = {"CREATE TABLE t (id INTEGER PRIMARY KEY)",
                                       "ALTER TABLE t ADD COLUMN extra TEXT"};
  {
    auto db = Database::open(path);
    REQUIRE(db.is_ok());
    REQUIRE((*db)->migrate("leases", v2).is_ok());
    // As the newer armhived left it: its version recorded beside its schema.
    REQUIRE(
        (*db)->execute("UPDATE armhive_meta SET value = '0.9.0' WHERE key = 'written_by'").is_ok());
  }
  auto db = Database::open(path);
  REQUIRE(db.is_ok());
  Status older = (*db)->migrate("leases", {v2[0]});  // a binary that knows one step
  REQUIRE_FALSE(older.is_ok());
  CHECK(older.code() == ErrorCode::kConflict);
  CHECK_THAT(older.message(), Catch::Contains("written by armhived 0.9.0"));
  CHECK_THAT(older.message(), Catch::Contains("this is armhived " + std::string(kVersion)));
  CHECK_THAT(older.message(), Catch::Contains("leases schema step 2"));
  // Nothing was changed: the newer binary still finds its schema.
  CHECK((*db)->migrate("leases", v2).is_ok());
  auto columns = (*db)->query("SELECT extra FROM t");
  CHECK(columns.is_ok());
}

TEST_CASE("the WAL is checkpointed off the request path and nothing is lost", "[store]") {
  auto dir = fresh_dir("armhive-db-ckpt-test");
  std::string path = (dir / "c.db").string();
  {
    auto db = Database::open(path);
    REQUIRE(db.is_ok());
    // No commit of this connection checkpoints on its own.
    auto autock = (*db)->query("PRAGMA wal_autocheckpoint");
    REQUIRE(autock.is_ok());
    CHECK(sql_int((*autock)[0][0]) == 0);
    REQUIRE((*db)->execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)").is_ok());
    for (int i = 0; i < 500; ++i) {
      REQUIRE((*db)->execute("INSERT INTO t (v) VALUES (?)", {std::string(2000, 'x')}).is_ok());
    }
    // The rows reach the database file itself (not only the WAL) without any commit doing it.
    for (int i = 0; i < 500 && std::filesystem::file_size(path) < 1'000'000; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(std::filesystem::file_size(path) >= 1'000'000);
    // A second checkpointer beside the database's own is harmless.
    auto watcher = WalCheckpointer::start(path, std::chrono::milliseconds(20));
    REQUIRE(watcher.is_ok());
  }
  CHECK(rows_after_reopen(path) == 500);
}

TEST_CASE("under a steady stream of commits the WAL file stays bounded", "[store]") {
  auto dir = fresh_dir("armhive-db-wal-cap-test");
  std::string path = (dir / "w.db").string();
  {
    // The checkpointer rewinds the WAL past 64 pages (256 KiB); the commits themselves past
    // 256 pages, whether or not the checkpointer's thread gets the CPU.
    auto db = Database::open(path, 64);
    REQUIRE(db.is_ok());
    REQUIRE((*db)->execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)").is_ok());
    // ~40 MiB of commits, one after the other with no pause: a PASSIVE checkpoint alone never
    // finds the WAL fully copied when a commit begins, so the file would grow to ~40 MiB.
    std::string row(4000, 'x');
    for (int i = 0; i < 10000; ++i) {
      REQUIRE((*db)->execute("INSERT INTO t (v) VALUES (?)", {row}).is_ok());
    }
    // The WAL's file keeps its high-water mark: it never grew past a few MiB.
    CHECK(std::filesystem::file_size(path + "-wal") < 8u * 1024 * 1024);
  }
  CHECK(rows_after_reopen(path) == 10000);
}

}  // namespace
}  // namespace armhive
