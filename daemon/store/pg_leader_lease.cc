#include "daemon/store/pg_leader_lease.h"

#include <algorithm>

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
)sql",
                                          // Step 2: when each epoch began; the members.
                                          R"sql(
ALTER TABLE leader ADD COLUMN since INTEGER NOT NULL DEFAULT 0;
CREATE TABLE cluster_members (
  holder TEXT PRIMARY KEY,
  url TEXT NOT NULL,
  role TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  last_contact INTEGER NOT NULL
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
  // The same condition decides the epoch and `since`: a new term (another holder, or ours
  // after it had ended) starts both anew. A `since` of 0 is a term from before step 2.
  ARMHIVE_ASSIGN_OR_RETURN(
      std::vector<SqlRow> taken,
      db_.query("INSERT INTO leader (id, holder, epoch, url, expires_at, since) VALUES (1, ?, 1, "
                "?, " ARMHIVE_DB_NOW_MS " + ?, " ARMHIVE_DB_NOW_MS ") "
                "ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, url = excluded.url, "
                "expires_at = excluded.expires_at, epoch = CASE WHEN leader.holder = "
                "excluded.holder AND leader.expires_at > " ARMHIVE_DB_NOW_MS
                " THEN leader.epoch ELSE leader.epoch + 1 END, "
                "since = CASE WHEN leader.holder = excluded.holder AND leader.expires_at "
                "> " ARMHIVE_DB_NOW_MS " AND leader.since <> 0 THEN leader.since ELSE "
                "excluded.since END "
                "WHERE leader.holder = excluded.holder OR leader.expires_at <= " ARMHIVE_DB_NOW_MS
                " RETURNING epoch, since",
                {holder_, my_url, static_cast<int64_t>(lease_.count())}));
  Renewal r;
  if (!taken.empty()) {
    r.ours = true;
    r.epoch = sql_int(taken[0][0]);
    r.since_ms = sql_int(taken[0][1]);
    r.holder = holder_;
    r.url = my_url;
  } else {
    ARMHIVE_ASSIGN_OR_RETURN(
        std::vector<SqlRow> held,
        db_.query("SELECT holder, epoch, url, since FROM leader WHERE id = 1"));
    if (held.empty()) return unavailable("the leader row vanished", db_.path());
    r.holder = sql_text(held[0][0]);
    r.epoch = sql_int(held[0][1]);
    r.url = sql_text(held[0][2]);
    r.since_ms = sql_int(held[0][3]);
  }
  r.membership = record_member(my_url, r.ours);
  return r;
}

Status PgLeaderLease::record_member(const std::string& url, bool leading) {
  // One statement: our row (started_at kept from the first), and the rows of members silent
  // past the horizon gone. Ours is never among them: it is being written.
  const int64_t horizon_ms = static_cast<int64_t>(lease_.count()) * kMemberSilenceLeases;
  return db_.execute(
      "WITH gone AS (DELETE FROM cluster_members WHERE holder <> ? AND last_contact "
      "< " ARMHIVE_DB_NOW_MS
      " - ?) "
      "INSERT INTO cluster_members (holder, url, role, started_at, last_contact) VALUES (?, ?, "
      "?, " ARMHIVE_DB_NOW_MS ", " ARMHIVE_DB_NOW_MS
      ") "
      "ON CONFLICT (holder) DO UPDATE SET url = excluded.url, role = excluded.role, "
      "last_contact = excluded.last_contact",
      {holder_, horizon_ms, holder_, url, std::string(leading ? "leader" : "standby")});
}

Result<ClusterView> PgLeaderLease::read_view(Database& db, std::chrono::milliseconds lease) {
  if (db.dialect() != Database::Dialect::kPostgres) {
    return invalid_argument("store.url", "the cluster's rows are on PostgreSQL");
  }
  const int64_t horizon_ms = static_cast<int64_t>(lease.count()) * kMemberSilenceLeases;
  // One statement, one `now`: the leader row and the members as of the same instant. The role
  // shown is the leader row's word (the member holding it leads, the others stand by): the
  // role a member wrote is what it last knew, stale for a leader that died.
  ARMHIVE_ASSIGN_OR_RETURN(
      std::vector<SqlRow> rows,
      db.query("WITH clock AS (SELECT " ARMHIVE_DB_NOW_MS " AS now) "
               "SELECT l.holder, l.url, l.epoch, l.since, clock.now, m.holder, m.url, "
               "m.started_at, m.last_contact FROM leader l CROSS JOIN clock "
               "LEFT JOIN cluster_members m ON m.last_contact >= clock.now - ? "
               "WHERE l.id = 1 "
               "ORDER BY CASE WHEN m.holder = l.holder THEN 0 ELSE 1 END, m.holder",
               {horizon_ms}));
  ClusterView v;
  v.postgres = true;
  if (rows.empty()) return v;
  const SqlRow& first = rows.front();
  v.leader =
      ClusterLeader{sql_text(first[0]), sql_text(first[1]), sql_int(first[2]), sql_int(first[3])};
  const int64_t now = sql_int(first[4]);
  for (const SqlRow& row : rows) {
    if (sql_is_null(row[5])) continue;  // no member within the horizon
    ClusterMember m;
    m.holder = sql_text(row[5]);
    m.url = sql_text(row[6]);
    m.role = m.holder == v.leader->holder ? "leader" : "standby";
    m.started_at_ms = sql_int(row[7]);
    m.last_contact_ms = sql_int(row[8]);
    m.last_contact_age_ms = std::max<int64_t>(0, now - m.last_contact_ms);
    v.members.push_back(std::move(m));
  }
  return v;
}

Status PgLeaderLease::release(int64_t epoch) {
  return db_.execute("UPDATE leader SET expires_at = 0 WHERE id = 1 AND holder = ? AND epoch = ?",
                     {holder_, epoch});
}

}  // namespace armhive
