#include "daemon/store/pg_database.h"

#include <libpq-fe.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <regex>

namespace armhive {
namespace {

// Type OIDs of the columns and parameters this file converts (PostgreSQL's pg_type.dat; fixed
// since 7.x and part of its wire protocol).
constexpr Oid kBool = 16;
constexpr Oid kInt8 = 20;
constexpr Oid kInt2 = 21;
constexpr Oid kInt4 = 23;
constexpr Oid kText = 25;
constexpr Oid kFloat4 = 700;
constexpr Oid kFloat8 = 701;
constexpr Oid kNumeric = 1700;

struct ResultCloser {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultCloser>;

std::string trimmed(const char* s) {
  std::string out = s ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// What a failed result means to the caller, by SQLSTATE.
Status result_error(const PGresult* r, PGconn* conn, std::string_view sql,
                    const std::string& where) {
  const char* state_c = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const std::string state = state_c ? state_c : "";
  const std::string msg = trimmed(r ? PQresultErrorMessage(r) : PQerrorMessage(conn));
  const std::string context = where + ": " + std::string(sql.substr(0, 80));
  if (state.rfind("23", 0) == 0) return conflict("constraint violated: " + msg, where);
  if (state.empty() || state.rfind("08", 0) == 0 || state == "57P01" || state == "57P02" ||
      state == "57P03" || state == "40001" || state == "40P01" || state == "57014" ||
      PQstatus(conn) != CONNECTION_OK) {
    return unavailable("PostgreSQL: " + msg, context);
  }
  return internal_error("SQL failed (" + state + "): " + msg, context);
}

Result<SqlValue> column_value(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return SqlValue(nullptr);
  const char* text = PQgetvalue(r, row, col);
  const Oid type = PQftype(r, col);
  switch (type) {
    case kBool:
      return SqlValue(static_cast<int64_t>(text[0] == 't' ? 1 : 0));
    case kInt2:
    case kInt4:
    case kInt8:
    case kNumeric: {
      if (type == kNumeric && std::strpbrk(text, ".eEN") != nullptr) {  // fraction, NaN, Inf
        return SqlValue(std::strtod(text, nullptr));
      }
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(text, &end, 10);
      if (errno == ERANGE) return SqlValue(std::strtod(text, nullptr));  // a numeric sum past 2^63
      if (end == text || *end != '\0') {
        return internal_error("PostgreSQL returned a malformed integer", text);
      }
      return SqlValue(static_cast<int64_t>(v));
    }
    case kFloat4:
    case kFloat8:
      return SqlValue(std::strtod(text, nullptr));
    default:
      return SqlValue(std::string(text, static_cast<size_t>(PQgetlength(r, row, col))));
  }
}

}  // namespace

std::string PgDatabase::number_placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  int n = 0;
  char quote = 0;
  for (char c : sql) {
    if (quote != 0) {
      if (c == quote) quote = 0;  // a doubled quote closes and reopens: same result
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += '$';
      out += std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

Result<std::unique_ptr<PgDatabase>> PgDatabase::connect(const std::string& url) {
  // Where, for messages: libpq's reading of the URL, without the password.
  std::string where = "PostgreSQL";
  {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
    if (opts == nullptr) {
      std::string msg = trimmed(err);
      PQfreemem(err);
      return invalid_argument("store.url", "is not a PostgreSQL connection string: " + msg);
    }
    std::string host;
    std::string port;
    std::string db;
    for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
      if (o->val == nullptr) continue;
      if (std::strcmp(o->keyword, "host") == 0) host = o->val;
      if (std::strcmp(o->keyword, "port") == 0) port = o->val;
      if (std::strcmp(o->keyword, "dbname") == 0) db = o->val;
    }
    PQconninfoFree(opts);
    where = "PostgreSQL " + (host.empty() ? std::string("(default host)") : host) +
            (port.empty() ? "" : ":" + port) + (db.empty() ? "" : "/" + db);
  }
  std::unique_ptr<PgDatabase> pg(new PgDatabase(url, where));
  {
    MutexLock lock(pg->mu_);
    ARMHIVE_RETURN_IF_ERROR(pg->ensure_connected());
  }
  ARMHIVE_RETURN_IF_ERROR(pg->create_bookkeeping());
  return pg;
}

PgDatabase::~PgDatabase() {
  MutexLock lock(mu_);
  if (conn_ != nullptr) PQfinish(conn_);
}

Status PgDatabase::ensure_connected() {
  if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) return Status::ok();
  if (conn_ != nullptr) {
    PQfinish(conn_);
    conn_ = nullptr;
  }
  // Defaults first: what the URL says wins (expand_dbname applies it after them).
  const char* keys[] = {"connect_timeout",  "keepalives",
                        "keepalives_idle",  "keepalives_interval",
                        "keepalives_count", "tcp_user_timeout",
                        "application_name", "options",
                        "dbname",           nullptr};
  const char* values[] = {
      "5",          "1",     "5",        "2",
      "3",          "10000", "armhived", "-c statement_timeout=30000 -c lock_timeout=10000",
      url_.c_str(), nullptr};
  conn_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn_ == nullptr) return unavailable("cannot allocate a PostgreSQL connection", where_);
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = trimmed(PQerrorMessage(conn_));
    PQfinish(conn_);
    conn_ = nullptr;
    return unavailable("cannot connect to PostgreSQL: " + msg, where_);
  }
  // Notices (e.g. "relation already exists, skipping") would go to stderr.
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
  return Status::ok();
}

Result<std::vector<SqlRow>> PgDatabase::query_locked(std::string_view sql,
                                                     const std::vector<SqlValue>& params,
                                                     int64_t* changes) {
  ARMHIVE_RETURN_IF_ERROR(ensure_connected());
  const std::string text = number_placeholders(sql);
  std::vector<Oid> types;
  std::vector<std::string> storage;
  std::vector<const char*> values;
  types.reserve(params.size());
  storage.reserve(params.size());
  values.reserve(params.size());
  for (const SqlValue& p : params) {
    if (std::holds_alternative<std::nullptr_t>(p)) {
      types.push_back(0);  // the server infers it
      storage.emplace_back();
      values.push_back(nullptr);
      continue;
    }
    if (const auto* i = std::get_if<int64_t>(&p)) {
      types.push_back(kInt8);
      storage.push_back(std::to_string(*i));
    } else if (const auto* d = std::get_if<double>(&p)) {
      types.push_back(kFloat8);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", *d);
      storage.emplace_back(buf);
    } else {
      types.push_back(kText);
      storage.push_back(std::get<std::string>(p));
    }
    values.push_back(storage.back().c_str());
  }
  PgResult r(PQexecParams(conn_, text.c_str(), static_cast<int>(params.size()), types.data(),
                          values.data(), nullptr, nullptr, /*resultFormat=*/0));
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    return result_error(r.get(), conn_, sql, where_);
  }
  if (changes != nullptr) {
    const char* n = PQcmdTuples(r.get());
    *changes = n && *n ? std::strtoll(n, nullptr, 10) : 0;
  }
  std::vector<SqlRow> rows;
  const int nrows = PQntuples(r.get());
  const int ncols = PQnfields(r.get());
  rows.reserve(static_cast<size_t>(nrows));
  for (int i = 0; i < nrows; ++i) {
    SqlRow row;
    row.reserve(static_cast<size_t>(ncols));
    for (int c = 0; c < ncols; ++c) {
      ARMHIVE_ASSIGN_OR_RETURN(SqlValue v, column_value(r.get(), i, c));
      row.push_back(std::move(v));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

Status PgDatabase::script_locked(const std::string& sql) {
  ARMHIVE_RETURN_IF_ERROR(ensure_connected());
  // The simple-query protocol runs several statements in one call (no parameters).
  PgResult r(PQexec(conn_, sql.c_str()));
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    return result_error(r.get(), conn_, sql, where_);
  }
  return Status::ok();
}

void PgDatabase::set_fence(std::string holder, int64_t epoch) {
  MutexLock lock(mu_);
  fence_holder_ = std::move(holder);
  fence_epoch_ = epoch;
}

Status PgDatabase::execute(std::string_view sql, const std::vector<SqlValue>& params) {
  {
    MutexLock lock(mu_);
    if (fence_holder_.empty()) {
      auto rows = query_locked(sql, params, nullptr);
      return rows.is_ok() ? Status::ok() : rows.status();
    }
  }
  return transaction([&](Database::Tx& tx) { return tx.execute(sql, params); });
}

Result<std::vector<SqlRow>> PgDatabase::query(std::string_view sql,
                                              const std::vector<SqlValue>& params) {
  MutexLock lock(mu_);
  return query_locked(sql, params, nullptr);
}

Status PgDatabase::Tx::execute(std::string_view sql, const std::vector<SqlValue>& params) {
  auto rows = db_->query_locked(sql, params, &changes_);
  return rows.is_ok() ? Status::ok() : rows.status();
}
Result<std::vector<SqlRow>> PgDatabase::Tx::query(std::string_view sql,
                                                  const std::vector<SqlValue>& params) {
  return db_->query_locked(sql, params, &changes_);
}
Status PgDatabase::Tx::execute_script(const std::string& sql) { return db_->script_locked(sql); }

Status PgDatabase::commit_locked() {
  PgResult r(PQexec(conn_, "COMMIT"));
  if (!r || PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
    return result_error(r.get(), conn_, "COMMIT", where_);
  }
  // COMMIT of a transaction in which a statement failed (and the body went on) rolls back and
  // says so in its tag only: nothing of the body landed.
  if (std::strcmp(PQcmdStatus(r.get()), "COMMIT") != 0) {
    return internal_error("PostgreSQL rolled the transaction back (a statement in it failed)",
                          where_);
  }
  return Status::ok();
}

Status PgDatabase::transaction(const std::function<Status(Database::Tx&)>& body,
                               Durability durability) {
  (void)durability;  // every commit is durable here (the class comment says why)
  MutexLock lock(mu_);
  ARMHIVE_RETURN_IF_ERROR(script_locked("BEGIN"));
  Tx tx(this);
  Status s = Status::ok();
  if (!fence_holder_.empty()) {
    auto held = query_locked(
        "SELECT 1 FROM leader WHERE id = 1 AND holder = ? AND epoch = ? AND expires_at > "
        "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint FOR SHARE",
        {fence_holder_, fence_epoch_}, nullptr);
    if (!held.is_ok()) {
      s = held.status();
    } else if (held->empty()) {
      s = unavailable("this armhived no longer holds the leader lease (epoch " +
                          std::to_string(fence_epoch_) + "): nothing written",
                      where_);
    }
  }
  if (s.is_ok()) s = body(tx);
  if (s.is_ok()) before_commit(tx);
  if (s.is_ok()) s = commit_locked();
  // After a failed statement PostgreSQL refuses everything but ROLLBACK; a lost connection
  // has rolled back already (and the next call reconnects).
  if (!s.is_ok() && conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) {
    (void)script_locked("ROLLBACK");
  }
  return s;
}

std::string PgDatabase::adapt_schema(const std::string& step) const {
  static const std::regex kSerial(R"(\bINTEGER PRIMARY KEY AUTOINCREMENT\b)");
  static const std::regex kInteger(R"(\bINTEGER\b)");
  static const std::regex kReal(R"(\bREAL\b)");
  std::string out = std::regex_replace(step, kSerial, "BIGSERIAL PRIMARY KEY");
  out = std::regex_replace(out, kInteger, "BIGINT");
  return std::regex_replace(out, kReal, "DOUBLE PRECISION");
}

Status PgDatabase::lock_for_migration(Database::Tx& tx) {
  // One key (any constant of ours) for every component: migrations are rare and short.
  // Released at COMMIT or ROLLBACK.
  return tx.execute("SELECT pg_advisory_xact_lock(3641526)");
}

}  // namespace armhive
