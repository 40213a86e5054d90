#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/store/sql_value.h"

namespace armhive {

// The SQL database the stores keep armhived's state in: SQLite, the embedded default (one file,
// `Database::open`, daemon/store/sqlite_database.h), or PostgreSQL, which several armhived can
// share (`PgDatabase`, daemon/store/pg_database.h). Statements are fixed text with `?`
// placeholders on both, every value bound, never spliced. Where the two dialects differ (the
// schema's types, JSON access, aggregate names) a store asks dialect(); everything else is the
// SQL both accept (`INSERT ... ON CONFLICT`, `RETURNING`).
//
// Errors: kConflict when a constraint is violated (a duplicate key); kUnavailable when the
// database cannot be reached or is busy past its timeout (retry later); kInternal for SQL the
// database refuses (a bug).
//
// Threading: implementations are thread-safe. transaction() runs its body on one connection
// that no other statement uses meanwhile: the body must run statements only through the Tx it
// is given and must not wait on anything else (no libvirt, no locks of the caller's).
class Database {
 public:
  enum class Dialect { kSqlite, kPostgres };

  // Opens (creating if needed) the SQLite file `path`; ":memory:" for tests. See
  // SqliteDatabase::open (daemon/store/sqlite_database.h) for `max_wal_pages`; 0: its default.
  static Result<std::unique_ptr<Database>> open(const std::string& path, int max_wal_pages = 0);

  virtual ~Database() = default;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  virtual Dialect dialect() const = 0;
  // Where the database is, for messages: the file, or the PostgreSQL server and database
  // (never a password).
  virtual const std::string& path() const = 0;

  virtual Status execute(std::string_view sql, const std::vector<SqlValue>& params = {}) = 0;
  virtual Result<std::vector<SqlRow>> query(std::string_view sql,
                                            const std::vector<SqlValue>& params = {}) = 0;

  // Statements inside a transaction; a Tx exists only inside transaction().
  class Tx {
   public:
    virtual ~Tx() = default;
    virtual Status execute(std::string_view sql, const std::vector<SqlValue>& params = {}) = 0;
    virtual Result<std::vector<SqlRow>> query(std::string_view sql,
                                              const std::vector<SqlValue>& params = {}) = 0;
    // Rows changed by the last execute().
    virtual int64_t changes() const = 0;
    // Runs several ;-separated statements without parameters (schema steps).
    virtual Status execute_script(const std::string& sql) = 0;
  };
  // How much a commit survives. kNormal may be lost at a power cut or an OS crash (SQLite's
  // synchronous=NORMAL: the last commits roll back) but is atomic and consistent; kFull is on
  // disk when the call returns, for writes whose loss would be a security regression (a revoked
  // token that works again). PostgreSQL commits every transaction as kFull (its default
  // synchronous_commit): a standby that takes over must have what the leader acknowledged.
  enum class Durability { kNormal, kFull };
  // BEGIN; body; COMMIT — or ROLLBACK when body returns an error.
  virtual Status transaction(const std::function<Status(Tx&)>& body,
                             Durability durability = Durability::kNormal) = 0;

  // Test seam: called inside every transaction() just before its COMMIT, with the Tx (a test
  // reads what the commit pays for there). Set before use, from one thread; null: none.
  void set_before_commit_for_test(std::function<void(Tx&)> hook) {
    before_commit_for_test_ = std::move(hook);
  }

  // Applies the schema steps of `component` not yet applied (tracked in schema_migrations), in
  // order, each in its own transaction. Steps are append-only: never edit a released one. They
  // are written for SQLite; PostgreSQL runs each as adapt_schema() rewrites it, so both have
  // the same tables and the same steps. A
  // database migrated by a newer armhived (more steps than `steps`) is refused with kConflict
  // naming the version that wrote it. Safe when several armhived migrate one PostgreSQL
  // database at once: a step is applied by one of them.
  Status migrate(std::string_view component, const std::vector<std::string>& steps);

 protected:
  Database() = default;
  // Run inside each migration step's transaction before it looks at schema_migrations: makes
  // concurrent migrations of one database take turns (PostgreSQL: an advisory lock). SQLite's
  // transactions already exclude each other.
  virtual Status lock_for_migration(Tx& tx) {
    (void)tx;
    return Status::ok();
  }
  // A schema step (SQLite DDL) as this database runs it. SQLite: as written.
  virtual std::string adapt_schema(const std::string& step) const { return step; }
  // The tables every database has (schema_migrations, armhive_meta); open() runs it.
  Status create_bookkeeping();
  void before_commit(Tx& tx) {
    if (before_commit_for_test_) before_commit_for_test_(tx);
  }

 private:
  std::function<void(Tx&)> before_commit_for_test_;
};

}  // namespace armhive
