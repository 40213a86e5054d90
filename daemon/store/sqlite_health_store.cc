#include "daemon/store/sqlite_health_store.h"

#include <algorithm>

#include "daemon/store/state_schema.h"

namespace armhive {
namespace {

// Append-only (Database::migrate): never edit a released step.
const std::vector<std::string> kSchema = {R"sql(
CREATE TABLE health_results (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  host TEXT NOT NULL,
  pool TEXT NOT NULL,
  suite TEXT NOT NULL,
  figure TEXT NOT NULL,
  label TEXT NOT NULL,
  unit TEXT NOT NULL,
  higher_is_better INTEGER NOT NULL,
  value REAL NOT NULL,
  run_id TEXT NOT NULL,
  verdict TEXT NOT NULL,
  band_n INTEGER,
  band_median REAL,
  band_mad REAL,
  band_low REAL,
  band_high REAL,
  reason TEXT NOT NULL
);
CREATE INDEX health_results_series ON health_results(host, pool, id);
)sql"};

constexpr const char* kColumns =
    "id, at, host, pool, suite, figure, label, unit, higher_is_better, value, run_id, verdict, "
    "band_n, band_median, band_mad, band_low, band_high, reason";

HealthResult from_row(const SqlRow& r) {
  HealthResult h;
  h.id = sql_int(r[0]);
  h.at = from_unix_ms(sql_int(r[1]));
  h.host = sql_text(r[2]);
  h.pool = sql_text(r[3]);
  h.suite = sql_text(r[4]);
  h.figure = sql_text(r[5]);
  h.label = sql_text(r[6]);
  h.unit = sql_text(r[7]);
  h.higher_is_better = sql_int(r[8]) != 0;
  h.value = sql_double(r[9]);
  h.run_id = sql_text(r[10]);
  h.verdict = sql_text(r[11]);
  if (!sql_is_null(r[12])) {
    h.band = HealthBandValues{static_cast<size_t>(sql_int(r[12])), sql_double(r[13]),
                              sql_double(r[14]), sql_double(r[15]), sql_double(r[16])};
  }
  h.reason = sql_text(r[17]);
  return h;
}

SqlValue opt(const std::optional<HealthBandValues>& b, double HealthBandValues::*field) {
  if (!b) return nullptr;
  return (*b).*field;
}

}  // namespace

const std::vector<std::string>& health_schema_steps() { return kSchema; }

Result<std::unique_ptr<SqliteHealthStore>> SqliteHealthStore::open(Database& db,
                                                                   size_t keep_per_series) {
  ARMHIVE_RETURN_IF_ERROR(db.migrate("health", kSchema));
  return std::unique_ptr<SqliteHealthStore>(
      new SqliteHealthStore(db, std::max<size_t>(keep_per_series, 1)));
}

Result<int64_t> SqliteHealthStore::append(const HealthResult& r) {
  int64_t id = 0;
  Status s = db_.transaction([&](Database::Tx& tx) -> Status {
    SqlValue band_n = r.band ? SqlValue(static_cast<int64_t>(r.band->n)) : SqlValue(nullptr);
    ARMHIVE_ASSIGN_OR_RETURN(
        auto rows,
        tx.query(
            "INSERT INTO health_results (at, host, pool, suite, figure, label, unit, "
            "higher_is_better, value, run_id, verdict, band_n, band_median, band_mad, band_low, "
            "band_high, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "RETURNING id",
            {to_unix_ms(r.at), r.host, r.pool, r.suite, r.figure, r.label, r.unit,
             static_cast<int64_t>(r.higher_is_better ? 1 : 0), r.value, r.run_id, r.verdict, band_n,
             opt(r.band, &HealthBandValues::median), opt(r.band, &HealthBandValues::mad),
             opt(r.band, &HealthBandValues::low), opt(r.band, &HealthBandValues::high), r.reason}));
    id = sql_int(rows.at(0).at(0));
    return tx.execute(
        "DELETE FROM health_results WHERE host = ? AND pool = ? AND id NOT IN (SELECT id FROM "
        "health_results WHERE host = ? AND pool = ? ORDER BY id DESC LIMIT ?)",
        {r.host, r.pool, r.host, r.pool, static_cast<int64_t>(keep_)});
  });
  if (!s.is_ok()) return s.annotate("storing a health result");
  return id;
}

Result<std::vector<HealthResult>> SqliteHealthStore::recent(const std::string& host,
                                                            const std::string& pool,
                                                            const std::string& figure,
                                                            size_t limit) {
  ARMHIVE_ASSIGN_OR_RETURN(
      auto rows,
      db_.query(std::string("SELECT ") + kColumns +
                    " FROM health_results WHERE host = ? AND pool = ? AND (? = '' OR figure = ?) "
                    "ORDER BY id DESC LIMIT ?",
                {host, pool, figure, figure, static_cast<int64_t>(limit)}));
  std::vector<HealthResult> out;
  out.reserve(rows.size());
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) out.push_back(from_row(*it));
  return out;
}

Result<std::vector<HealthResult>> SqliteHealthStore::latest() {
  ARMHIVE_ASSIGN_OR_RETURN(
      auto rows, db_.query(std::string("SELECT ") + kColumns +
                           " FROM health_results WHERE id IN (SELECT MAX(id) FROM health_results "
                           "GROUP BY host, pool) ORDER BY host, pool"));
  std::vector<HealthResult> out;
  for (const SqlRow& r : rows) out.push_back(from_row(r));
  return out;
}

}  // namespace armhive
