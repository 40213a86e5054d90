#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/thread_annotations.h"
#include "daemon/store/database.h"

struct pg_conn;

namespace armhive {

// The PostgreSQL Database (daemon/store/database.h), through libpq: the store several armhived
// share, so that losing one machine loses no state (issue 36). One connection, every call
// serialised on it (as SqliteDatabase serialises on its file).
//
// `?` placeholders become `$1..$n` (outside quoted text); each value is sent with its type
// (int64 as bigint, double as float8, text as text). Results come back typed by their column:
// integers (int2/4/8, bool as 0/1, a numeric without fraction) as int64, float4/8 and other
// numerics as double, everything else as text.
//
// A lost connection fails the call in progress with kUnavailable and is re-made by the next
// call (a statement is never retried by this class: the caller's idempotent rewrite is).
// Nothing waits without a deadline: connecting gives up after `connect_timeout` (5 s unless the
// URL says), a dead peer is noticed by TCP keepalives and `tcp_user_timeout` (10 s), a
// statement is cancelled by the server past `statement_timeout` (30 s).
//
// Errors: unique and other integrity violations (SQLSTATE class 23) are kConflict; connection
// failures (class 08, 57P01-03), serialization failures and deadlocks (40001, 40P01) and
// statement timeouts (57014) are kUnavailable; the rest is kInternal.
class PgDatabase final : public Database {
 public:
  // `url`: a libpq connection URI (postgresql://user@host:port/db?sslmode=...) or key=value
  // string. Connects once to check it (kUnavailable naming the server when it cannot).
  static Result<std::unique_ptr<PgDatabase>> connect(const std::string& url);
  ~PgDatabase() override;

  Dialect dialect() const override { return Dialect::kPostgres; }
  const std::string& path() const override { return where_; }

  Status execute(std::string_view sql, const std::vector<SqlValue>& params = {}) override
      EXCLUDES(mu_);
  Result<std::vector<SqlRow>> query(std::string_view sql,
                                    const std::vector<SqlValue>& params = {}) override
      EXCLUDES(mu_);
  // BEGIN; body; COMMIT (READ COMMITTED). Every commit is durable (see Database::Durability).
  Status transaction(const std::function<Status(Database::Tx&)>& body,
                     Durability durability = Durability::kNormal) override EXCLUDES(mu_);

  // Fencing (daemon/store/pg_leader_lease.h): from now on every transaction first checks, with
  // the leader row locked FOR SHARE, that `holder` still holds the leader lease with `epoch`,
  // unexpired; when it does not, the transaction does nothing and fails with kUnavailable. A
  // standalone execute() runs as such a transaction; query() (reads) is not fenced.
  void set_fence(std::string holder, int64_t epoch) EXCLUDES(mu_);

  // `?` placeholders numbered for PostgreSQL (`$1`...), outside '...' and "..." text.
  static std::string number_placeholders(std::string_view sql);

 protected:
  Status lock_for_migration(Database::Tx& tx) override;
  // SQLite's column types in PostgreSQL's words: INTEGER PRIMARY KEY AUTOINCREMENT is BIGSERIAL
  // PRIMARY KEY, INTEGER is BIGINT (SQLite's holds 64 bits, PostgreSQL's 32), REAL is DOUBLE
  // PRECISION. The schema steps are the project's own fixed text, never input.
  std::string adapt_schema(const std::string& step) const override;

 private:
  class Tx final : public Database::Tx {
   public:
    explicit Tx(PgDatabase* db) : db_(db) {}
    Status execute(std::string_view sql,
                   const std::vector<SqlValue>& params) override NO_THREAD_SAFETY_ANALYSIS;
    Result<std::vector<SqlRow>> query(std::string_view sql, const std::vector<SqlValue>& params)
        override NO_THREAD_SAFETY_ANALYSIS;
    int64_t changes() const override { return changes_; }
    Status execute_script(const std::string& sql) override NO_THREAD_SAFETY_ANALYSIS;

   private:
    PgDatabase* db_;
    int64_t changes_ = 0;
  };

  PgDatabase(std::string url, std::string where) : url_(std::move(url)), where_(std::move(where)) {}
  // Connects when there is no healthy connection.
  Status ensure_connected() REQUIRES(mu_);
  Result<std::vector<SqlRow>> query_locked(std::string_view sql,
                                           const std::vector<SqlValue>& params, int64_t* changes)
      REQUIRES(mu_);
  Status script_locked(const std::string& sql) REQUIRES(mu_);
  Status commit_locked() REQUIRES(mu_);

  const std::string url_;
  const std::string where_;  // host and database, for messages
  Mutex mu_;
  pg_conn* conn_ GUARDED_BY(mu_) = nullptr;
  std::string fence_holder_ GUARDED_BY(mu_);  // empty: no fence
  int64_t fence_epoch_ GUARDED_BY(mu_) = 0;
};

}  // namespace armhive
