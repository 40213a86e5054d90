#include "daemon/store/sqlite_database.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace armhive {
namespace {

// Makes `path` exist with mode 0600 before SQLite opens it, and narrows an existing file's
// mode to 0600. SQLite creates the -wal and -shm files with the database file's mode, so this
// decides theirs too; existing ones (from a run before this) are narrowed here as well.
Status make_owner_only(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return unavailable(std::string("cannot create the database file: ") + std::strerror(errno),
                       path);
  }
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && ((st.st_mode & 077) == 0 || ::fchmod(fd, 0600) == 0);
  const int err = errno;
  ::close(fd);
  if (!ok) {
    return unavailable(
        std::string("cannot make the database file owner-only (0600): ") + std::strerror(err),
        path);
  }
  for (const char* suffix : {"-wal", "-shm"}) {
    const std::string side = path + suffix;
    if (::stat(side.c_str(), &st) == 0 && (st.st_mode & 077) != 0 &&
        ::chmod(side.c_str(), 0600) != 0) {
      return unavailable(
          std::string("cannot make the file owner-only (0600): ") + std::strerror(errno), side);
    }
  }
  return Status::ok();
}

bool is_file_path(const std::string& path) {
  return !path.empty() && path != ":memory:" && path.rfind("file:", 0) != 0;
}

}  // namespace

Result<std::unique_ptr<SqliteDatabase>> SqliteDatabase::open(const std::string& path,
                                                             int max_wal_pages) {
  if (is_file_path(path)) ARMHIVE_RETURN_IF_ERROR(make_owner_only(path));
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close(raw);
    return unavailable("cannot open database: " + msg, path);
  }
  std::unique_ptr<SqliteDatabase> db(new SqliteDatabase(raw, path));
  sqlite3_busy_timeout(raw, 5000);
  // The first statements read the file: a file that is not a database (or is damaged) fails
  // here, and the operator needs to know which file.
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA foreign_keys=ON", "PRAGMA synchronous=NORMAL"}) {
    if (Status s = db->execute(pragma); !s.is_ok()) return s.annotate("database " + path);
  }
  if (path != ":memory:" && !path.empty()) {
    ARMHIVE_ASSIGN_OR_RETURN(
        db->checkpointer_,
        WalCheckpointer::start(path, std::chrono::milliseconds(200), max_wal_pages));
    ARMHIVE_RETURN_IF_ERROR(db->execute("PRAGMA wal_autocheckpoint=0"));
    // Replaces SQLite's automatic-checkpoint hook, which the pragma above has just turned off.
    db->backstop_frames_ = 4 * max_wal_pages;
    sqlite3_wal_hook(raw, &SqliteDatabase::on_commit, db.get());
  }
  ARMHIVE_RETURN_IF_ERROR(db->create_bookkeeping());
  return db;
}

int SqliteDatabase::on_commit(void* self, sqlite3* db, const char* schema, int frames) {
  auto* d = static_cast<SqliteDatabase*>(self);
  if (d->backstop_frames_ <= 0 || frames <= d->backstop_frames_) return SQLITE_OK;
  // The commit has happened and its write lock is released; this waits for the checkpointer's
  // pass of the moment, copies the rest and rewinds the WAL. SQLite (3.40) answers SQLITE_BUSY
  // at once, without the busy handler, while another connection holds the checkpoint lock, so
  // the wait is this loop's: a checkpointer thread descheduled mid-pass must not let every
  // commit meanwhile grow the WAL (the backstop is what bounds it). Bounded like the busy
  // timeout; a failure leaves the WAL as it was and the next commit tries again: the commit
  // itself stands either way.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto pause = std::chrono::milliseconds(1);
  while (sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_RESTART, nullptr, nullptr) ==
             SQLITE_BUSY &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return SQLITE_OK;
}

SqliteDatabase::~SqliteDatabase() {
  checkpointer_.reset();
  stmts_.clear();
  sqlite3_close_v2(db_);
}

Status SqliteDatabase::error(std::string_view what) const {
  return unavailable(std::string(what) + ": " + sqlite3_errmsg(db_), path_);
}

Status SqliteDatabase::execute(std::string_view sql, const std::vector<SqlValue>& params) {
  MutexLock lock(mu_);
  return execute_locked(sql, params);
}

Result<std::vector<SqlRow>> SqliteDatabase::query(std::string_view sql,
                                                  const std::vector<SqlValue>& params) {
  MutexLock lock(mu_);
  return query_locked(sql, params);
}

Status SqliteDatabase::execute_locked(std::string_view sql, const std::vector<SqlValue>& params) {
  auto rows = query_locked(sql, params);
  return rows.is_ok() ? Status::ok() : rows.status();
}

Result<std::vector<SqlRow>> SqliteDatabase::query_locked(std::string_view sql,
                                                         const std::vector<SqlValue>& params) {
  sqlite3_stmt* raw = nullptr;
  Stmt one_shot;
  if (auto cached = stmts_.find(sql); cached != stmts_.end()) {
    raw = cached->second.get();
  } else {
    if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &raw, nullptr) !=
        SQLITE_OK) {
      return internal_error(std::string("SQL prepare failed: ") + sqlite3_errmsg(db_),
                            std::string(sql.substr(0, 80)));
    }
    if (stmts_.size() < kMaxCachedStatements) {
      stmts_.emplace(std::string(sql), Stmt(raw));
    } else {
      one_shot.reset(raw);
    }
  }
  // Ready for the next call however this one ends (and no read transaction left open).
  struct Rewind {
    sqlite3_stmt* stmt;
    ~Rewind() {
      sqlite3_reset(stmt);
      sqlite3_clear_bindings(stmt);
    }
  } rewind{raw};
  for (size_t i = 0; i < params.size(); ++i) {
    int idx = static_cast<int>(i + 1);
    const SqlValue& p = params[i];
    int rc = SQLITE_OK;
    if (std::holds_alternative<std::nullptr_t>(p)) {
      rc = sqlite3_bind_null(raw, idx);
    } else if (const auto* iv = std::get_if<int64_t>(&p)) {
      rc = sqlite3_bind_int64(raw, idx, *iv);
    } else if (const auto* dv = std::get_if<double>(&p)) {
      rc = sqlite3_bind_double(raw, idx, *dv);
    } else {
      const std::string& s = std::get<std::string>(p);
      rc = sqlite3_bind_text(raw, idx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    }
    if (rc != SQLITE_OK) return error("SQL bind failed");
  }
  std::vector<SqlRow> rows;
  while (true) {
    int rc = sqlite3_step(raw);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      if (rc == SQLITE_CONSTRAINT) {
        return conflict(std::string("constraint violated: ") + sqlite3_errmsg(db_), path_);
      }
      return error("SQL step failed");
    }
    int n = sqlite3_column_count(raw);
    SqlRow row;
    row.reserve(static_cast<size_t>(n));
    for (int c = 0; c < n; ++c) {
      switch (sqlite3_column_type(raw, c)) {
        case SQLITE_NULL:
          row.emplace_back(nullptr);
          break;
        case SQLITE_INTEGER:
          row.emplace_back(static_cast<int64_t>(sqlite3_column_int64(raw, c)));
          break;
        case SQLITE_FLOAT:
          row.emplace_back(sqlite3_column_double(raw, c));
          break;
        default: {
          const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(raw, c));
          row.emplace_back(
              std::string(text ? text : "", static_cast<size_t>(sqlite3_column_bytes(raw, c))));
        }
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Status SqliteDatabase::Tx::execute(std::string_view sql, const std::vector<SqlValue>& params) {
  return db_->execute_locked(sql, params);
}
Result<std::vector<SqlRow>> SqliteDatabase::Tx::query(std::string_view sql,
                                                      const std::vector<SqlValue>& params) {
  return db_->query_locked(sql, params);
}
Status SqliteDatabase::Tx::execute_script(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_->db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return internal_error("SQL script failed: " + msg, db_->path_);
  }
  return Status::ok();
}
int64_t SqliteDatabase::Tx::changes() const { return sqlite3_changes64(db_->db_); }

Status SqliteDatabase::transaction(const std::function<Status(Database::Tx&)>& body,
                                   Durability durability) {
  MutexLock lock(mu_);
  // The level is the connection's, so it is raised for this transaction only and restored
  // before the mutex is released: no other statement of this connection commits under it.
  const bool full = durability == Durability::kFull;
  if (full) ARMHIVE_RETURN_IF_ERROR(execute_locked("PRAGMA synchronous=FULL", {}));
  Status s = execute_locked("BEGIN IMMEDIATE", {});
  if (s.is_ok()) {
    Tx tx(this);
    s = body(tx);
    if (s.is_ok()) before_commit(tx);
    if (s.is_ok()) s = execute_locked("COMMIT", {});
    if (!s.is_ok()) (void)execute_locked("ROLLBACK", {});
  }
  if (full) {
    Status restored = execute_locked("PRAGMA synchronous=NORMAL", {});
    if (s.is_ok() && !restored.is_ok()) return restored;
  }
  return s;
}

}  // namespace armhive
