#include "daemon/store/sqlite_lease_store.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "daemon/core/host_keys.h"

namespace armhive {
namespace {

// Leases whose history one query reads (well under SQLite's 32,766 bound parameters).
constexpr size_t kHistoryBatch = 500;

const std::vector<std::string> kSchema = {
    R"sql(
CREATE TABLE leases (
  n INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  pool TEXT NOT NULL,
  owner TEXT NOT NULL,
  purpose TEXT NOT NULL,
  ssh_keys TEXT NOT NULL,
  labels TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  ttl_s INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  ready_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  ended_at INTEGER NOT NULL,
  vm_name TEXT NOT NULL,
  address TEXT NOT NULL,
  login_user TEXT NOT NULL,
  cpus TEXT NOT NULL,
  warm INTEGER NOT NULL
);
CREATE UNIQUE INDEX leases_idem ON leases(owner, idempotency_key) WHERE idempotency_key != '';
CREATE INDEX leases_state ON leases(state);
CREATE TABLE lease_history (
  lease_id TEXT NOT NULL REFERENCES leases(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  at INTEGER NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (lease_id, seq)
);
CREATE TABLE vms (
  name TEXT PRIMARY KEY,
  vm_id TEXT NOT NULL,
  pool TEXT NOT NULL,
  state TEXT NOT NULL,
  lease_id TEXT NOT NULL,
  address TEXT NOT NULL,
  cpus TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
)sql",
    // Step 2: the admin's drain / maintenance of a host (absent: none).
    R"sql(
CREATE TABLE host_admin (
  host TEXT PRIMARY KEY,
  admin TEXT NOT NULL
);
)sql",
    // Step 3: the host that runs a lease's VM and a VM record's domain ('' in rows written
    // before: the one host that daemon drove).
    R"sql(
ALTER TABLE leases ADD COLUMN host TEXT NOT NULL DEFAULT '';
ALTER TABLE vms ADD COLUMN host TEXT NOT NULL DEFAULT '';
)sql",
    // Step 4: the VM's SSH host keys, read before it was ready, on the VM and its lease (a JSON
    // array; '[]' in rows written before: such a warm VM has its keys read at hand-out).
    R"sql(
ALTER TABLE leases ADD COLUMN host_keys TEXT NOT NULL DEFAULT '[]';
ALTER TABLE vms ADD COLUMN host_keys TEXT NOT NULL DEFAULT '[]';
)sql",
    // Step 5: what a lease's VM used (daemon/core/usage_meter.h), one row per lease that got a
    // VM: the totals, the window they cover, and the raw counters of the last sample (NULL:
    // not reported) that the next sample is measured against. Counters are stored as SQLite's
    // signed 64-bit integers (clamped: 2^63 ns of CPU is 292 years). The usage report selects
    // leases by creation time.
    R"sql(
CREATE TABLE lease_usage (
  lease_id TEXT PRIMARY KEY REFERENCES leases(id) ON DELETE CASCADE,
  cpu_ns INTEGER NOT NULL,
  disk_write_bytes INTEGER NOT NULL,
  net_rx_bytes INTEGER NOT NULL,
  net_tx_bytes INTEGER NOT NULL,
  peak_rss_bytes INTEGER NOT NULL,
  started_at INTEGER NOT NULL,
  sampled_at INTEGER NOT NULL,
  samples INTEGER NOT NULL,
  final INTEGER NOT NULL,
  last_run_id INTEGER NOT NULL,
  last_cpu_ns INTEGER,
  last_rss_bytes INTEGER,
  last_disk_write_bytes INTEGER,
  last_net_rx_bytes INTEGER,
  last_net_tx_bytes INTEGER
);
CREATE INDEX leases_created ON leases(created_at);
)sql"};

// The SQL of label `key`'s value in the JSON text of `column` (NULL when the lease has no such
// label), its bound value appended to `params`: the key is bound, never spliced.
std::string label_value_sql(const Database& db, const char* column, const std::string& key,
                            std::vector<SqlValue>& params) {
  if (db.dialect() == Database::Dialect::kPostgres) {
    params.emplace_back(key);
    return std::string("(") + column + "::jsonb ->> ?)";
  }
  params.emplace_back("$.\"" + key + "\"");
  return std::string("json_extract(") + column + ", ?)";
}

// A sum that cannot overflow, as a double (SQLite's TOTAL()).
std::string total_sql(const Database& db, const std::string& expr) {
  if (db.dialect() == Database::Dialect::kPostgres) {
    return "COALESCE(SUM(" + expr + ")::float8, 0)";
  }
  return "TOTAL(" + expr + ")";
}

constexpr const char* kColumns =
    "id, pool, owner, purpose, ssh_keys, labels, idempotency_key, state, reason, ttl_s, "
    "created_at, ready_at, expires_at, ended_at, vm_name, address, login_user, cpus, warm, host, "
    "host_keys";

std::string json_text(const nlohmann::json& j) { return j.dump(); }

nlohmann::json parse_json(const std::string& s) {
  return nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
}

std::vector<SqlValue> lease_values(const Lease& l) {
  return {l.id,
          l.pool,
          l.owner,
          std::string(to_string(l.purpose)),
          json_text(l.ssh_keys),
          json_text(l.labels),
          l.idempotency_key,
          std::string(to_string(l.state)),
          l.reason,
          static_cast<int64_t>(l.ttl.count()),
          to_unix_ms(l.created_at),
          to_unix_ms(l.ready_at),
          to_unix_ms(l.expires_at),
          to_unix_ms(l.ended_at),
          l.vm_name,
          l.address,
          l.login_user,
          json_text(l.cpus),
          static_cast<int64_t>(l.warm_handout ? 1 : 0),
          l.host,
          json_text(l.host_keys)};
}

// A stored row that does not say what the schema promises: an error naming the row, never a
// default (a lease silently turned into "failed" or a VM into "starting" is destroyed work).
Status bad_row(const std::string& table, const std::string& key, const std::string& what) {
  return internal_error("database row cannot be read: " + what, table + " " + key);
}

template <typename T>
Status json_column(const std::string& table, const std::string& key, const char* column,
                   const std::string& text, T& out) {
  auto j = parse_json(text);
  try {
    out = j.template get<T>();
  } catch (const nlohmann::json::exception& e) {
    return bad_row(table, key, std::string(column) + " is not valid (" + e.what() + ")");
  }
  return Status::ok();
}

// Keys came from a guest: a row whose keys are not what parse_host_keys accepted is refused
// rather than handed to a client as trusted.
Status stored_host_keys(const std::string& table, const std::string& key,
                        const std::vector<std::string>& keys) {
  if (keys.size() > kMaxHostKeys) return bad_row(table, key, "host_keys has too many keys");
  for (const std::string& k : keys) {
    if (!is_host_key(k)) return bad_row(table, key, "host_keys holds a malformed key");
  }
  return Status::ok();
}

Result<LeaseState> lease_state_column(const std::string& key, const char* column,
                                      const std::string& text) {
  auto state = lease_state_from_string(text);
  if (!state) return bad_row("lease", key, std::string(column) + " '" + text + "' is unknown");
  return *state;
}

Result<Lease> lease_from_row(const SqlRow& r) {
  Lease l;
  l.id = sql_text(r[0]);
  l.pool = sql_text(r[1]);
  l.owner = sql_text(r[2]);
  auto purpose = purpose_from_string(sql_text(r[3]));
  if (!purpose) return bad_row("lease", l.id, "purpose '" + sql_text(r[3]) + "' is unknown");
  l.purpose = *purpose;
  ARMHIVE_RETURN_IF_ERROR(json_column("lease", l.id, "ssh_keys", sql_text(r[4]), l.ssh_keys));
  ARMHIVE_RETURN_IF_ERROR(json_column("lease", l.id, "labels", sql_text(r[5]), l.labels));
  l.idempotency_key = sql_text(r[6]);
  ARMHIVE_ASSIGN_OR_RETURN(l.state, lease_state_column(l.id, "state", sql_text(r[7])));
  l.reason = sql_text(r[8]);
  l.ttl = Seconds(sql_int(r[9]));
  l.created_at = from_unix_ms(sql_int(r[10]));
  l.ready_at = from_unix_ms(sql_int(r[11]));
  l.expires_at = from_unix_ms(sql_int(r[12]));
  l.ended_at = from_unix_ms(sql_int(r[13]));
  l.vm_name = sql_text(r[14]);
  l.address = sql_text(r[15]);
  l.login_user = sql_text(r[16]);
  ARMHIVE_RETURN_IF_ERROR(json_column("lease", l.id, "cpus", sql_text(r[17]), l.cpus));
  l.warm_handout = sql_int(r[18]) != 0;
  l.host = sql_text(r[19]);
  ARMHIVE_RETURN_IF_ERROR(json_column("lease", l.id, "host_keys", sql_text(r[20]), l.host_keys));
  ARMHIVE_RETURN_IF_ERROR(stored_host_keys("lease", l.id, l.host_keys));
  return l;
}

Status insert_history(Database::Tx& tx, const Lease& lease, size_t from) {
  for (size_t i = from; i < lease.history.size(); ++i) {
    const LeaseTransition& t = lease.history[i];
    ARMHIVE_RETURN_IF_ERROR(
        tx.execute("INSERT INTO lease_history (lease_id, seq, from_state, to_state, at, reason) "
                   "VALUES (?, ?, ?, ?, ?, ?)",
                   {lease.id, static_cast<int64_t>(i), std::string(to_string(t.from)),
                    std::string(to_string(t.to)), to_unix_ms(t.at), t.reason}));
  }
  return Status::ok();
}

int64_t clamp_counter(uint64_t v) {
  return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
}

SqlValue opt_counter(const std::optional<uint64_t>& v) {
  return v ? SqlValue(clamp_counter(*v)) : SqlValue(nullptr);
}

// A stored counter: never negative (a negative one is a row we did not write).
Status counter_column(const std::string& key, const char* column, const SqlValue& v,
                      uint64_t& out) {
  int64_t i = sql_int(v);
  if (i < 0) return bad_row("lease_usage", key, std::string(column) + " is negative");
  out = static_cast<uint64_t>(i);
  return Status::ok();
}

Status opt_counter_column(const std::string& key, const char* column, const SqlValue& v,
                          std::optional<uint64_t>& out) {
  if (sql_is_null(v)) {
    out.reset();
    return Status::ok();
  }
  uint64_t value = 0;
  ARMHIVE_RETURN_IF_ERROR(counter_column(key, column, v, value));
  out = value;
  return Status::ok();
}

constexpr const char* kUsageColumns =
    "lease_id, cpu_ns, disk_write_bytes, net_rx_bytes, net_tx_bytes, peak_rss_bytes, "
    "started_at, sampled_at, samples, final, last_run_id, last_cpu_ns, last_rss_bytes, "
    "last_disk_write_bytes, last_net_rx_bytes, last_net_tx_bytes";

Status put_usage_in(Database::Tx& tx, const std::string& lease_id, const LeaseUsage& u) {
  return tx.execute(
      std::string("INSERT INTO lease_usage (") + kUsageColumns +
          ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(lease_id) DO UPDATE SET "
          "cpu_ns=excluded.cpu_ns, disk_write_bytes=excluded.disk_write_bytes, "
          "net_rx_bytes=excluded.net_rx_bytes, net_tx_bytes=excluded.net_tx_bytes, "
          "peak_rss_bytes=excluded.peak_rss_bytes, started_at=excluded.started_at, "
          "sampled_at=excluded.sampled_at, samples=excluded.samples, final=excluded.final, "
          "last_run_id=excluded.last_run_id, last_cpu_ns=excluded.last_cpu_ns, "
          "last_rss_bytes=excluded.last_rss_bytes, "
          "last_disk_write_bytes=excluded.last_disk_write_bytes, "
          "last_net_rx_bytes=excluded.last_net_rx_bytes, "
          "last_net_tx_bytes=excluded.last_net_tx_bytes",
      {lease_id, clamp_counter(u.cpu_ns), clamp_counter(u.disk_write_bytes),
       clamp_counter(u.net_rx_bytes), clamp_counter(u.net_tx_bytes),
       clamp_counter(u.peak_rss_bytes), to_unix_ms(u.started_at), to_unix_ms(u.sampled_at),
       u.samples, static_cast<int64_t>(u.final ? 1 : 0), u.last.run_id, opt_counter(u.last.cpu_ns),
       opt_counter(u.last.rss_bytes), opt_counter(u.last.disk_write_bytes),
       opt_counter(u.last.net_rx_bytes), opt_counter(u.last.net_tx_bytes)});
}

Result<LeaseUsage> usage_from_row(const SqlRow& r) {
  const std::string key = sql_text(r[0]);
  LeaseUsage u;
  ARMHIVE_RETURN_IF_ERROR(counter_column(key, "cpu_ns", r[1], u.cpu_ns));
  ARMHIVE_RETURN_IF_ERROR(counter_column(key, "disk_write_bytes", r[2], u.disk_write_bytes));
  ARMHIVE_RETURN_IF_ERROR(counter_column(key, "net_rx_bytes", r[3], u.net_rx_bytes));
  ARMHIVE_RETURN_IF_ERROR(counter_column(key, "net_tx_bytes", r[4], u.net_tx_bytes));
  ARMHIVE_RETURN_IF_ERROR(counter_column(key, "peak_rss_bytes", r[5], u.peak_rss_bytes));
  u.started_at = from_unix_ms(sql_int(r[6]));
  u.sampled_at = from_unix_ms(sql_int(r[7]));
  u.samples = sql_int(r[8]);
  u.final = sql_int(r[9]) != 0;
  u.last.run_id = sql_int(r[10]);
  ARMHIVE_RETURN_IF_ERROR(opt_counter_column(key, "last_cpu_ns", r[11], u.last.cpu_ns));
  ARMHIVE_RETURN_IF_ERROR(opt_counter_column(key, "last_rss_bytes", r[12], u.last.rss_bytes));
  ARMHIVE_RETURN_IF_ERROR(
      opt_counter_column(key, "last_disk_write_bytes", r[13], u.last.disk_write_bytes));
  ARMHIVE_RETURN_IF_ERROR(opt_counter_column(key, "last_net_rx_bytes", r[14], u.last.net_rx_bytes));
  ARMHIVE_RETURN_IF_ERROR(opt_counter_column(key, "last_net_tx_bytes", r[15], u.last.net_tx_bytes));
  return u;
}

Status update_in(Database::Tx& tx, const Lease& lease) {
  std::vector<SqlValue> values = lease_values(lease);
  values.push_back(lease.id);
  ARMHIVE_RETURN_IF_ERROR(tx.execute(
      "UPDATE leases SET id=?, pool=?, owner=?, purpose=?, ssh_keys=?, labels=?, "
      "idempotency_key=?, state=?, reason=?, ttl_s=?, created_at=?, ready_at=?, expires_at=?, "
      "ended_at=?, vm_name=?, address=?, login_user=?, cpus=?, warm=?, host=?, host_keys=? "
      "WHERE id=?",
      values));
  if (tx.changes() != 1) return not_found("no such lease in the database", lease.id);
  auto stored = tx.query("SELECT COUNT(*) FROM lease_history WHERE lease_id = ?", {lease.id});
  if (!stored.is_ok()) return stored.status();
  ARMHIVE_RETURN_IF_ERROR(insert_history(tx, lease, static_cast<size_t>(sql_int((*stored)[0][0]))));
  // A usage is never taken away from a lease: a version without one (written before the
  // baseline) leaves the row alone.
  if (lease.usage) ARMHIVE_RETURN_IF_ERROR(put_usage_in(tx, lease.id, *lease.usage));
  return Status::ok();
}

constexpr const char* kDeleteVm = "DELETE FROM vms WHERE name = ?";

Status put_vm_in(Database::Tx& tx, const VmRecord& vm) {
  return tx.execute(
      "INSERT INTO vms (name, vm_id, pool, state, lease_id, address, cpus, created_at, host, "
      "host_keys) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT(name) DO UPDATE SET "
      "vm_id=excluded.vm_id, pool=excluded.pool, state=excluded.state, "
      "lease_id=excluded.lease_id, address=excluded.address, cpus=excluded.cpus, "
      "host=excluded.host, host_keys=excluded.host_keys",
      {vm.name, vm.vm_id, vm.pool, std::string(to_string(vm.state)), vm.lease_id, vm.address,
       json_text(vm.cpus), to_unix_ms(vm.created_at), vm.host, json_text(vm.host_keys)});
}

}  // namespace

const std::vector<std::string>& SqliteLeaseStore::schema_steps() { return kSchema; }

Result<std::unique_ptr<SqliteLeaseStore>> SqliteLeaseStore::open(Database& db) {
  ARMHIVE_RETURN_IF_ERROR(db.migrate("leases", kSchema));
  return std::unique_ptr<SqliteLeaseStore>(new SqliteLeaseStore(db));
}

Status SqliteLeaseStore::insert(const Lease& lease) {
  return db_.transaction([&](Database::Tx& tx) -> Status {
    std::string sql = std::string("INSERT INTO leases (") + kColumns +
                      ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
    ARMHIVE_RETURN_IF_ERROR(tx.execute(sql, lease_values(lease)));
    ARMHIVE_RETURN_IF_ERROR(insert_history(tx, lease, 0));
    if (lease.usage) ARMHIVE_RETURN_IF_ERROR(put_usage_in(tx, lease.id, *lease.usage));
    return Status::ok();
  });
}

Status SqliteLeaseStore::update(const Lease& lease) {
  return db_.transaction([&](Database::Tx& tx) -> Status { return update_in(tx, lease); });
}

Result<std::vector<Lease>> SqliteLeaseStore::load(const std::string& where,
                                                  const std::vector<SqlValue>& params,
                                                  const std::string& tail) {
  std::string sql = std::string("SELECT ") + kColumns + " FROM leases";
  if (!where.empty()) sql += " WHERE " + where;
  sql += " ORDER BY n" + tail;
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<SqlRow> rows, db_.query(sql, params));
  std::vector<Lease> leases;
  leases.reserve(rows.size());
  std::map<std::string, size_t> index;  // lease id -> position in `leases`
  for (const SqlRow& r : rows) {
    ARMHIVE_ASSIGN_OR_RETURN(Lease l, lease_from_row(r));
    index.emplace(l.id, leases.size());
    leases.push_back(std::move(l));
  }
  // The history of a whole page in a few queries (one per kHistoryBatch leases), not one query
  // per lease: a page of 1,000 leases used to cost 1,001 statements.
  for (size_t first = 0; first < leases.size(); first += kHistoryBatch) {
    const size_t n = std::min(kHistoryBatch, leases.size() - first);
    std::string placeholders;
    std::vector<SqlValue> ids;
    ids.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      placeholders += i == 0 ? "?" : ",?";
      ids.emplace_back(leases[first + i].id);
    }
    ARMHIVE_ASSIGN_OR_RETURN(
        std::vector<SqlRow> hist,
        db_.query("SELECT lease_id, from_state, to_state, at, reason FROM lease_history "
                  "WHERE lease_id IN (" +
                      placeholders + ") ORDER BY lease_id, seq",
                  ids));
    for (const SqlRow& h : hist) {
      auto it = index.find(sql_text(h[0]));
      if (it == index.end()) continue;
      Lease& l = leases[it->second];
      LeaseTransition t;
      ARMHIVE_ASSIGN_OR_RETURN(t.from,
                               lease_state_column(l.id, "history from_state", sql_text(h[1])));
      ARMHIVE_ASSIGN_OR_RETURN(t.to, lease_state_column(l.id, "history to_state", sql_text(h[2])));
      t.at = from_unix_ms(sql_int(h[3]));
      t.reason = sql_text(h[4]);
      l.history.push_back(std::move(t));
    }
    ARMHIVE_ASSIGN_OR_RETURN(
        std::vector<SqlRow> usage,
        db_.query(std::string("SELECT ") + kUsageColumns + " FROM lease_usage WHERE lease_id IN (" +
                      placeholders + ")",
                  ids));
    for (const SqlRow& u : usage) {
      auto it = index.find(sql_text(u[0]));
      if (it == index.end()) continue;
      ARMHIVE_ASSIGN_OR_RETURN(LeaseUsage parsed, usage_from_row(u));
      leases[it->second].usage = std::move(parsed);
    }
  }
  return leases;
}

Result<std::optional<Lease>> SqliteLeaseStore::find(const std::string& id) {
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<Lease> found, load("id = ?", {id}));
  if (found.empty()) return std::optional<Lease>();
  return std::optional<Lease>(std::move(found.front()));
}

Result<std::optional<Lease>> SqliteLeaseStore::find_by_idempotency_key(const std::string& owner,
                                                                       const std::string& key) {
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<Lease> found,
                           load("owner = ? AND idempotency_key = ?", {owner, key}));
  if (found.empty()) return std::optional<Lease>();
  return std::optional<Lease>(std::move(found.front()));
}

namespace {

// The WHERE clause of a filter with its bound values (never spliced); the cursor only for
// listings.
std::string filter_where(const Database& db, const LeaseFilter& filter, bool with_cursor,
                         std::vector<SqlValue>& params) {
  std::string where = "1=1";
  if (filter.owner) {
    where += " AND owner = ?";
    params.emplace_back(*filter.owner);
  }
  if (filter.pool) {
    where += " AND pool = ?";
    params.emplace_back(*filter.pool);
  }
  if (filter.state) {
    where += " AND state = ?";
    params.emplace_back(std::string(to_string(*filter.state)));
  }
  if (!filter.include_ended) {
    // The live states by name, so that the leases_state index finds them: NOT IN scanned every
    // ended lease of the history (48 ms per listing at 10^5 rows, see BENCHMARKS.md).
    where += " AND state IN ('pending', 'provisioning', 'ready', 'releasing', 'host_unreachable')";
  }
  if (with_cursor && !filter.after_id.empty()) {
    where += " AND n > (SELECT n FROM leases WHERE id = ?)";
    params.emplace_back(filter.after_id);
  }
  for (const auto& [k, v] : filter.labels) {
    where += " AND " + label_value_sql(db, "labels", k, params) + " = ?";
    params.emplace_back(v);
  }
  return where;
}

}  // namespace

Result<std::vector<Lease>> SqliteLeaseStore::list(const LeaseFilter& filter) {
  std::vector<SqlValue> params;
  std::string where = filter_where(db_, filter, /*with_cursor=*/true, params);
  return load(where, params, " LIMIT " + std::to_string(effective_limit(filter)));
}

Result<std::map<LeaseState, size_t>> SqliteLeaseStore::count(const LeaseFilter& filter) {
  std::vector<SqlValue> params;
  std::string where = filter_where(db_, filter, /*with_cursor=*/false, params);
  ARMHIVE_ASSIGN_OR_RETURN(
      std::vector<SqlRow> rows,
      db_.query("SELECT state, COUNT(*) FROM leases WHERE " + where + " GROUP BY state", params));
  std::map<LeaseState, size_t> out;
  for (const SqlRow& r : rows) {
    auto state = lease_state_from_string(sql_text(r[0]));
    if (!state) return internal_error("unknown lease state in the database", sql_text(r[0]));
    out[*state] += static_cast<size_t>(sql_int(r[1]));
  }
  return out;
}

Result<std::vector<UsageRow>> SqliteLeaseStore::usage(const UsageQuery& q) {
  std::vector<SqlValue> params;
  std::string key;
  switch (q.group_by) {
    case UsageGroupBy::kOwner:
      key = "l.owner";
      break;
    case UsageGroupBy::kPool:
      key = "l.pool";
      break;
    case UsageGroupBy::kLabel:
      // The label's value; '' for a lease without it (bound, never spliced: as filter_where).
      key = "COALESCE(" + label_value_sql(db_, "l.labels", q.label, params) + ", '')";
      break;
  }
  std::string where = "l.created_at >= ? AND l.created_at < ?";
  params.emplace_back(to_unix_ms(q.since));
  params.emplace_back(to_unix_ms(q.until));
  if (q.owner) {
    where += " AND l.owner = ?";
    params.emplace_back(*q.owner);
  }
  ARMHIVE_ASSIGN_OR_RETURN(
      std::vector<SqlRow> rows,
      db_.query("SELECT " + key + " AS g, COUNT(*), " + total_sql(db_, "u.cpu_ns") +
                    ", SUM(u.sampled_at - u.started_at), " + total_sql(db_, "u.disk_write_bytes") +
                    ", " + total_sql(db_, "u.net_rx_bytes") + ", " +
                    total_sql(db_, "u.net_tx_bytes") +
                    ", MAX(u.peak_rss_bytes) FROM leases l JOIN lease_usage u ON u.lease_id = l.id "
                    "WHERE " +
                    where + " GROUP BY g ORDER BY g",
                params));
  std::vector<UsageRow> out;
  out.reserve(rows.size());
  // TOTAL() is a double (it cannot overflow as SUM() would); below 2^53 exactly the integer.
  auto counter = [](const SqlValue& v) -> uint64_t {
    double d = sql_double(v);
    return d <= 0 ? 0 : d >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(d);
  };
  for (const SqlRow& r : rows) {
    UsageRow row;
    row.group = sql_is_null(r[0]) ? std::string() : sql_text(r[0]);
    row.leases = sql_int(r[1]);
    row.cpu_ns = counter(r[2]);
    row.wall_ms = std::max<int64_t>(0, sql_int(r[3]));
    row.disk_write_bytes = counter(r[4]);
    row.net_rx_bytes = counter(r[5]);
    row.net_tx_bytes = counter(r[6]);
    row.peak_rss_bytes = static_cast<uint64_t>(std::max<int64_t>(0, sql_int(r[7])));
    out.push_back(std::move(row));
  }
  // By group in byte order whatever the database's collation (PostgreSQL's may be a locale's).
  std::sort(out.begin(), out.end(),
            [](const UsageRow& a, const UsageRow& b) { return a.group < b.group; });
  return out;
}

Result<std::vector<Lease>> SqliteLeaseStore::active() {
  return load("state IN ('pending', 'provisioning', 'ready', 'releasing', 'host_unreachable')", {});
}

Status SqliteLeaseStore::put_vm(const VmRecord& vm) {
  return db_.transaction([&](Database::Tx& tx) -> Status { return put_vm_in(tx, vm); });
}

Status SqliteLeaseStore::delete_vm(const std::string& name) {
  return db_.execute(kDeleteVm, {name});
}

Status SqliteLeaseStore::write_batch(const std::map<std::string, Lease>& leases,
                                     const std::map<std::string, std::optional<VmRecord>>& vms) {
  return db_.transaction([&](Database::Tx& tx) -> Status {
    for (const auto& [id, l] : leases) ARMHIVE_RETURN_IF_ERROR(update_in(tx, l));
    for (const auto& [name, rec] : vms) {
      ARMHIVE_RETURN_IF_ERROR(rec ? put_vm_in(tx, *rec) : tx.execute(kDeleteVm, {name}));
    }
    return Status::ok();
  });
}

Result<std::vector<VmRecord>> SqliteLeaseStore::vms() {
  ARMHIVE_ASSIGN_OR_RETURN(
      std::vector<SqlRow> rows,
      db_.query("SELECT name, vm_id, pool, state, lease_id, address, cpus, created_at, host, "
                "host_keys FROM vms ORDER BY created_at"));
  std::vector<VmRecord> out;
  for (const SqlRow& r : rows) {
    VmRecord vm;
    vm.name = sql_text(r[0]);
    vm.vm_id = sql_text(r[1]);
    vm.pool = sql_text(r[2]);
    auto state = vm_state_from_string(sql_text(r[3]));
    if (!state) return bad_row("vm", vm.name, "state '" + sql_text(r[3]) + "' is unknown");
    vm.state = *state;
    vm.lease_id = sql_text(r[4]);
    vm.address = sql_text(r[5]);
    ARMHIVE_RETURN_IF_ERROR(json_column("vm", vm.name, "cpus", sql_text(r[6]), vm.cpus));
    vm.created_at = from_unix_ms(sql_int(r[7]));
    vm.host = sql_text(r[8]);
    ARMHIVE_RETURN_IF_ERROR(json_column("vm", vm.name, "host_keys", sql_text(r[9]), vm.host_keys));
    ARMHIVE_RETURN_IF_ERROR(stored_host_keys("vm", vm.name, vm.host_keys));
    out.push_back(std::move(vm));
  }
  return out;
}

Result<std::map<std::string, HostHealthTracker::Admin>> SqliteLeaseStore::host_admin() {
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<SqlRow> rows,
                           db_.query("SELECT host, admin FROM host_admin ORDER BY host"));
  std::map<std::string, HostHealthTracker::Admin> out;
  for (const SqlRow& r : rows) {
    std::string host = sql_text(r[0]);
    auto admin = host_admin_from_string(sql_text(r[1]));
    if (!admin) return bad_row("host_admin", host, "admin '" + sql_text(r[1]) + "' is unknown");
    if (*admin != HostHealthTracker::Admin::kNone) out[host] = *admin;
  }
  return out;
}

Status SqliteLeaseStore::put_host_admin(const std::string& host, HostHealthTracker::Admin admin) {
  if (admin == HostHealthTracker::Admin::kNone) {
    return db_.execute("DELETE FROM host_admin WHERE host = ?", {host});
  }
  return db_.execute(
      "INSERT INTO host_admin (host, admin) VALUES (?,?) ON CONFLICT(host) DO UPDATE SET "
      "admin=excluded.admin",
      {host, std::string(to_string(admin))});
}

}  // namespace armhive
