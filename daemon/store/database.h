#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/store/wal_checkpointer.h"

namespace armhive {

using SqlValue = std::variant<std::nullptr_t, int64_t, double, std::string>;
using SqlRow = std::vector<SqlValue>;

// Typed access to a column of a row; aborts on a type mismatch (schema invariant).
int64_t sql_int(const SqlValue& v);
double sql_double(const SqlValue& v);
const std::string& sql_text(const SqlValue& v);
bool sql_is_null(const SqlValue& v);

// One SQLite database file (WAL, foreign keys on, busy timeout). Owns the sqlite3 handle and,
// for a file, a WalCheckpointer (automatic checkpoints are off: commits do not pay for them).
//
// The checkpointer bounds the WAL near `max_wal_pages` only if its thread gets the CPU: on a
// starved machine a steady writer outran it (12 MB past a 256 KiB cap in CI). So the writer
// holds a backstop: a commit that leaves more than 4 x `max_wal_pages` in the WAL runs one
// RESTART checkpoint itself, after its write lock is released and before execute() returns,
// which bounds the file however the threads are scheduled. Normally it never fires.
//
// Threading: every method is thread-safe; calls are serialised on an internal mutex, and
// transaction() holds it for the whole body, so the body must only call the *_locked variants
// through the Tx it is given and must not block on anything else (no libvirt, no I/O waits).
class Database {
 public:
  // Opens (creating if needed) `path`; ":memory:" for tests. `max_wal_pages` is the WAL size
  // the checkpointer rewinds past (tests make it small). The file, its -wal and its -shm are
  // owner-only (0600) whatever the process umask: they hold token hashes, the audit log and
  // request fingerprints. A file found with wider modes is narrowed to 0600.
  static Result<std::unique_ptr<Database>> open(
      const std::string& path, int max_wal_pages = WalCheckpointer::kDefaultMaxWalPages);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  Status execute(std::string_view sql, const std::vector<SqlValue>& params = {}) EXCLUDES(mu_);
  Result<std::vector<SqlRow>> query(std::string_view sql, const std::vector<SqlValue>& params = {})
      EXCLUDES(mu_);

  // Statement access inside a transaction. A Tx exists only inside transaction(), which holds
  // the database's mutex for its whole life: its methods run under that lock, which the
  // analysis cannot follow through the std::function body, so they are exempt from it.
  class Tx {
   public:
    Status execute(std::string_view sql,
                   const std::vector<SqlValue>& params = {}) NO_THREAD_SAFETY_ANALYSIS;
    Result<std::vector<SqlRow>> query(
        std::string_view sql, const std::vector<SqlValue>& params = {}) NO_THREAD_SAFETY_ANALYSIS;
    int64_t changes() const;
    // Runs several ;-separated statements without parameters (schema steps).
    Status execute_script(const std::string& sql);

   private:
    friend class Database;
    explicit Tx(Database* db) : db_(db) {}
    Database* db_;
  };
  // How much a commit survives. kNormal (the default, synchronous=NORMAL in WAL mode) is
  // atomic and consistent but may be lost at a power cut or an OS crash: the last commits roll
  // back. kFull (synchronous=FULL) syncs the WAL at this commit, for writes whose loss would be
  // a security regression: a revoked token that works again after a power cut.
  enum class Durability { kNormal, kFull };
  // BEGIN IMMEDIATE; body; COMMIT — or ROLLBACK when body returns an error.
  Status transaction(const std::function<Status(Tx&)>& body,
                     Durability durability = Durability::kNormal) EXCLUDES(mu_);

  // Test seam: called inside every transaction() just before its COMMIT, with the Tx (a test
  // reads `PRAGMA synchronous` there to see what the commit pays for). Set before use, from
  // one thread; null: none.
  void set_before_commit_for_test(std::function<void(Tx&)> hook) {
    before_commit_for_test_ = std::move(hook);
  }

  // Applies the schema steps of `component` not yet applied (tracked in schema_migrations), in
  // order, each in its own transaction. Steps are append-only: never edit a released one.
  Status migrate(std::string_view component, const std::vector<std::string>& steps);

  const std::string& path() const { return path_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status execute_locked(std::string_view sql, const std::vector<SqlValue>& params) REQUIRES(mu_);
  Result<std::vector<SqlRow>> query_locked(std::string_view sql,
                                           const std::vector<SqlValue>& params) REQUIRES(mu_);
  Status error(std::string_view what) const;
  // sqlite3_wal_hook: runs after each commit of db_, under mu_, with the WAL's frame count.
  static int on_commit(void* self, sqlite3* db, const char* schema, int frames);

  struct StmtCloser {
    void operator()(sqlite3_stmt* s) const noexcept { sqlite3_finalize(s); }
  };
  using Stmt = std::unique_ptr<sqlite3_stmt, StmtCloser>;
  // Every statement text run so far, prepared once (the SQL here is fixed text with bound
  // parameters, so the set is small; past kMaxCachedStatements a statement is prepared per
  // call). Each is reset before query_locked returns, so none holds a read transaction open.
  static constexpr size_t kMaxCachedStatements = 128;

  Mutex mu_;
  sqlite3* db_;
  std::string path_;
  std::map<std::string, Stmt, std::less<>> stmts_ GUARDED_BY(mu_);  // finalized before db_ closes
  // Files only (not ":memory:"): checkpoints off the request path; destroyed before db_ closes.
  std::unique_ptr<WalCheckpointer> checkpointer_;
  int backstop_frames_ = 0;  // set once in open(); 0: no backstop (":memory:")
  std::function<void(Tx&)> before_commit_for_test_;
};

}  // namespace armhive
