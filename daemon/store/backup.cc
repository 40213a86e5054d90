#include "daemon/store/backup.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/result.h"

namespace armhive {
namespace {

namespace fs = std::filesystem;

struct Closer {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
using Handle = std::unique_ptr<sqlite3, Closer>;

Result<Handle> open_db(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Handle db(raw);
  if (rc != SQLITE_OK) {
    return unavailable(std::string("cannot open the database: ") +
                           (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)),
                       path);
  }
  sqlite3_busy_timeout(db.get(), 30000);
  return db;
}

Status exec(sqlite3* db, const char* sql, const std::string& path) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = err != nullptr ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    return unavailable(std::string(sql) + ": " + message, path);
  }
  return Status::ok();
}

// The file at `path` is an armhive database that SQLite finds whole.
Status check_database(sqlite3* db, const std::string& path) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &raw, nullptr) != SQLITE_OK) {
    return invalid_argument("backup", path + " is not a SQLite database: " + sqlite3_errmsg(db));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, sqlite3_finalize);
  std::string verdict;
  if (sqlite3_step(stmt.get()) == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt.get(), 0);
    verdict = text != nullptr ? reinterpret_cast<const char*>(text) : "";
  } else {
    return invalid_argument("backup", path + " is not a SQLite database: " + sqlite3_errmsg(db));
  }
  if (verdict != "ok") {
    return invalid_argument("backup", path + " is damaged (integrity_check: " + verdict + ")");
  }
  // armhived's: the leases table every armhived creates (beside the migrations' own table).
  for (const char* table : {"schema_migrations", "leases"}) {
    if (sqlite3_table_column_metadata(db, "main", table, nullptr, nullptr, nullptr, nullptr,
                                      nullptr, nullptr) != SQLITE_OK) {
      return invalid_argument("backup", path +
                                            " is a SQLite database but not armhived's (it "
                                            "has no " +
                                            std::string(table) + " table)");
    }
  }
  return Status::ok();
}

Status sync_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    int err = errno;
    if (fd >= 0) ::close(fd);
    return unavailable(std::string("cannot sync: ") + std::strerror(err), path);
  }
  ::close(fd);
  return Status::ok();
}

}  // namespace

Status backup_database(const std::string& source, const std::string& dest) {
  std::error_code ec;
  if (fs::exists(dest, ec)) {
    return conflict(dest + " exists: choose a new file (a backup never overwrites one)", dest);
  }
  if (!fs::exists(source, ec)) return not_found("no database at " + source, source);
  const std::string tmp = dest + ".partial";
  fs::remove(tmp, ec);
  {
    // Owner-only from the first byte: the copy holds token hashes and the audit log.
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      return unavailable(std::string("cannot create: ") + std::strerror(errno), tmp);
    }
    ::close(fd);
  }
  auto fail = [&tmp](Status s) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return s;
  };
  {
    auto src = open_db(source, SQLITE_OPEN_READONLY);
    if (!src.is_ok()) return fail(src.status());
    auto dst = open_db(tmp, SQLITE_OPEN_READWRITE);
    if (!dst.is_ok()) return fail(dst.status());
    sqlite3_backup* b = sqlite3_backup_init(dst->get(), "main", src->get(), "main");
    if (b == nullptr) {
      return fail(unavailable(std::string("backup: ") + sqlite3_errmsg(dst->get()), source));
    }
    // All pages in one step: one read transaction, so one moment of the source; in WAL mode it
    // does not hold up armhived's writes. BUSY: a writer held an exclusive lock at that instant.
    int rc = SQLITE_OK;
    for (int attempt = 0; attempt < 100; ++attempt) {
      rc = sqlite3_backup_step(b, -1);
      if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
      sqlite3_sleep(50);
    }
    int finish = sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE || finish != SQLITE_OK) {
      return fail(unavailable(
          std::string("backup: ") + sqlite3_errstr(rc != SQLITE_DONE ? rc : finish), source));
    }
    // A single file whatever the source's journal: no -wal travels with it.
    if (Status s = exec(dst->get(), "PRAGMA journal_mode=DELETE", tmp); !s.is_ok()) {
      return fail(s);
    }
    if (Status s = check_database(dst->get(), tmp); !s.is_ok()) return fail(s);
  }
  if (Status s = sync_file(tmp); !s.is_ok()) return fail(s);
  if (::rename(tmp.c_str(), dest.c_str()) != 0) {
    return fail(
        unavailable(std::string("cannot rename into place: ") + std::strerror(errno), dest));
  }
  return Status::ok();
}

Status restore_database(const std::string& backup, const std::string& target) {
  {
    std::error_code ec;
    if (!fs::exists(backup, ec)) return not_found("no backup at " + backup, backup);
    auto db = open_db(backup, SQLITE_OPEN_READONLY);
    if (!db.is_ok()) return db.status();
    ARMHIVE_RETURN_IF_ERROR(check_database(db->get(), backup));
  }
  const std::string tmp = target + ".restoring";
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::copy_file(backup, tmp, ec);
  if (ec) return unavailable("cannot copy the backup: " + ec.message(), tmp);
  if (::chmod(tmp.c_str(), 0600) != 0 || !sync_file(tmp).is_ok()) {
    fs::remove(tmp, ec);
    return unavailable("cannot make the restored file owner-only (0600)", tmp);
  }
  if (fs::exists(target, ec)) {
    // Kept, not deleted: a restore of the wrong file can be undone. Its WAL is folded in by
    // opening it once (the last commits of the stopped armhived), then dropped.
    {
      auto old = open_db(target, SQLITE_OPEN_READWRITE);
      if (old.is_ok()) (void)exec(old->get(), "PRAGMA wal_checkpoint(TRUNCATE)", target);
    }
    fs::rename(target, target + ".before-restore", ec);
    if (ec) {
      fs::remove(tmp, ec);
      return unavailable("cannot keep the current database aside: " + ec.message(), target);
    }
  }
  fs::remove(target + "-wal", ec);
  fs::remove(target + "-shm", ec);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    return unavailable(std::string("cannot rename into place: ") + std::strerror(errno), target);
  }
  return Status::ok();
}

}  // namespace armhive
