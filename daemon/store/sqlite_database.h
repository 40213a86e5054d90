#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/thread_annotations.h"
#include "daemon/store/database.h"
#include "daemon/store/wal_checkpointer.h"

namespace armhive {

class SqliteDatabase final : public Database {
 public:
  // Opens (creating if needed) `path`; ":memory:" for tests. `max_wal_pages` is the WAL size
  // the checkpointer rewinds past (tests make it small). The file, its -wal and its -shm are
  // owner-only (0600) whatever the process umask: they hold token hashes, the audit log and
  // request fingerprints. A file found with wider modes is narrowed to 0600.
  static Result<std::unique_ptr<SqliteDatabase>> open(
      const std::string& path, int max_wal_pages = WalCheckpointer::kDefaultMaxWalPages);
  ~SqliteDatabase() override;

  Dialect dialect() const override { return Dialect::kSqlite; }

  Status execute(std::string_view sql, const std::vector<SqlValue>& params = {}) override
      EXCLUDES(mu_);
  Result<std::vector<SqlRow>> query(std::string_view sql,
                                    const std::vector<SqlValue>& params = {}) override
      EXCLUDES(mu_);

  // BEGIN IMMEDIATE; body; COMMIT — or ROLLBACK when body returns an error. kNormal commits
  // with synchronous=NORMAL (WAL mode), kFull with synchronous=FULL (the WAL synced at this
  // commit).
  Status transaction(const std::function<Status(Database::Tx&)>& body,
                     Durability durability = Durability::kNormal) override EXCLUDES(mu_);

  const std::string& path() const override { return path_; }

 private:
  // Statement access inside a transaction. A Tx exists only inside transaction(), which holds
  // the database's mutex for its whole life: its methods run under that lock, which the
  // analysis cannot follow through the std::function body, so they are exempt from it.
  class Tx final : public Database::Tx {
   public:
    explicit Tx(SqliteDatabase* db) : db_(db) {}
    Status execute(std::string_view sql,
                   const std::vector<SqlValue>& params) override NO_THREAD_SAFETY_ANALYSIS;
    Result<std::vector<SqlRow>> query(std::string_view sql, const std::vector<SqlValue>& params)
        override NO_THREAD_SAFETY_ANALYSIS;
    int64_t changes() const override;
    Status execute_script(const std::string& sql) override;

   private:
    SqliteDatabase* db_;
  };

  SqliteDatabase(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
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
};

}  // namespace armhive
