#include "daemon/store/pg_leader_lease.h"

#include "daemon/store/state_schema.h"

namespace armhive {
namespace {

// The database's now, in ms since the Unix epoch.
#define ARMHIVE_DB_NOW_MS "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint"

const std::vector<std::string> kSchema = {R"sql(
CREATE TABLE leader (
  id INTEGER PRIMARY KEY,
  holder TEXT NOT NULL,
  epoch INTEGER NOT NULL,
  url TEXT NOT NULL,
  expires_at INTEGER NOT NULL
);
)sql"};

}  // namespace

const std::vector<std::string>& leader_schema_steps() { return kSchema; }

Result<std::unique_ptr<PgLeaderLease>> PgLeaderLease::open(Database& db, std::string holder,
                                                           std::string url,
                                                           std::chrono::milliseconds lease) {
  if (db.dialect() != Database::Dialect::kPostgres) {
    return invalid_argument("store.url", "a leader lease needs PostgreSQL");
  }
  ARMHIVE_RETURN_IF_ERROR(db.migrate("leader", kSchema));
  return std::unique_ptr<PgLeaderLease>(
      new PgLeaderLease(db, std::move(holder), std::move(url), lease));
}

void PgLeaderLease::set_url(std::string url) {
  MutexLock lock(mu_);
  url_ = std::move(url);
}

std::string PgLeaderLease::url() const {
  MutexLock lock(mu_);
  return url_;
}

Result<PgLeaderLease::Renewal> PgLeaderLease::renew() {
  const std::string my_url = url();
  ARMHIVE_ASSIGN_OR_RETURN(
      std::vector<SqlRow> taken,
      db_.query("INSERT INTO leader (id, holder, epoch, url, expires_at) VALUES (1, ?, 1, "
                "?, " ARMHIVE_DB_NOW_MS " + ?) "
                "ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, url = excluded.url, "
                "expires_at = excluded.expires_at, epoch = CASE WHEN leader.holder = "
                "excluded.holder AND leader.expires_at > " ARMHIVE_DB_NOW_MS
                " THEN leader.epoch ELSE leader.epoch + 1 END "
                "WHERE leader.holder = excluded.holder OR leader.expires_at <= " ARMHIVE_DB_NOW_MS
                " RETURNING epoch",
                {holder_, my_url, static_cast<int64_t>(lease_.count())}));
  Renewal r;
  if (!taken.empty()) {
    r.ours = true;
    r.epoch = sql_int(taken[0][0]);
    r.holder = holder_;
    r.url = my_url;
    return r;
  }
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<SqlRow> held,
                           db_.query("SELECT holder, epoch, url FROM leader WHERE id = 1"));
  if (held.empty()) return unavailable("the leader row vanished", db_.path());
  r.holder = sql_text(held[0][0]);
  r.epoch = sql_int(held[0][1]);
  r.url = sql_text(held[0][2]);
  return r;
}

Status PgLeaderLease::release(int64_t epoch) {
  return db_.execute("UPDATE leader SET expires_at = 0 WHERE id = 1 AND holder = ? AND epoch = ?",
                     {holder_, epoch});
}

}  // namespace armhive
