#include "daemon/store/state_migration.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "daemon/store/state_schema.h"

namespace armhive {
namespace {

constexpr size_t kDefaultBatchRows = 500;
// Values bound to one INSERT (PostgreSQL takes at most 65,535).
constexpr size_t kMaxParams = 16384;

// Table and column names are spliced into statements (SQL binds values, not names): only the
// list's own names and the columns the list's migrations created, and only these characters.
bool is_identifier(std::string_view s) {
  if (s.empty() || s.size() > 63 || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string quoted(std::string_view identifier) { return "\"" + std::string(identifier) + "\""; }

Result<int64_t> count_rows(Database& db, std::string_view table) {
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<SqlRow> rows,
                           db.query("SELECT count(*) FROM " + quoted(table)));
  return sql_int(rows.at(0).at(0));
}

// What copying one table needs, found before the transaction.
struct TablePlan {
  const StateTable* table = nullptr;
  std::vector<std::string> columns;  // the target's, in its order
  std::vector<std::string> types;    // PostgreSQL's data_type of each
  int64_t source_rows = 0;
};

Status check_identifiers() {
  for (const StateComponent& c : state_components()) {
    for (const StateTable& t : c.tables) {
      if (!is_identifier(t.name) || (!t.serial_column.empty() && !is_identifier(t.serial_column))) {
        return internal_error(
            "state_components() names a table or column that is not a plain "
            "identifier",
            std::string(t.name));
      }
    }
  }
  return Status::ok();
}

// The source may hold only tables the list knows: anything else would be left behind.
Status check_source_tables(Database& source) {
  std::set<std::string, std::less<>> known(bookkeeping_tables().begin(),
                                           bookkeeping_tables().end());
  for (const StateComponent& c : state_components()) {
    for (const StateTable& t : c.tables) known.emplace(t.name);
  }
  ARMHIVE_ASSIGN_OR_RETURN(
      std::vector<SqlRow> rows,
      source.query("SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, 7) "
                   "!= 'sqlite_' ORDER BY name"));
  for (const SqlRow& r : rows) {
    if (known.count(sql_text(r[0])) == 0) {
      return conflict(
          "the source has a table this armhived does not know, whose rows would be "
          "lost: " +
              sql_text(r[0]) + " (was it written by a newer armhived?)",
          source.path());
    }
  }
  return Status::ok();
}

// Before anything is written: every table of the list that exists in the target is empty.
Status check_target_empty(Database& target) {
  for (const StateComponent& c : state_components()) {
    for (const StateTable& t : c.tables) {
      ARMHIVE_ASSIGN_OR_RETURN(
          std::vector<SqlRow> exists,
          target.query("SELECT to_regclass(?) IS NOT NULL", {std::string(t.name)}));
      if (sql_int(exists.at(0).at(0)) == 0) continue;
      ARMHIVE_ASSIGN_OR_RETURN(int64_t rows, count_rows(target, t.name));
      if (rows > 0) {
        return conflict("the target database is not empty: table " + std::string(t.name) + " has " +
                            std::to_string(rows) + " row" + (rows == 1 ? "" : "s") +
                            " (armhived migrate copies into an empty database only)",
                        target.path());
      }
    }
  }
  return Status::ok();
}

Result<TablePlan> plan_table(Database& source, Database& target, const StateTable& t) {
  TablePlan plan;
  plan.table = &t;
  const std::string name(t.name);
  ARMHIVE_ASSIGN_OR_RETURN(
      std::vector<SqlRow> target_columns,
      target.query("SELECT column_name, data_type FROM information_schema.columns WHERE "
                   "table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position",
                   {name}));
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<SqlRow> source_columns,
                           source.query("SELECT name FROM pragma_table_info(?)", {name}));
  std::set<std::string> on_source;
  for (const SqlRow& r : source_columns) on_source.insert(sql_text(r[0]));
  for (const SqlRow& r : target_columns) {
    const std::string& column = sql_text(r[0]);
    if (!is_identifier(column)) {
      return internal_error("column " + column + " is not a plain identifier", name);
    }
    if (on_source.erase(column) == 0) {
      return internal_error("column " + column + " is in the target but not in the source", name);
    }
    plan.columns.push_back(column);
    plan.types.push_back(sql_text(r[1]));
  }
  if (plan.columns.empty()) return internal_error("the target has no such table", name);
  if (!on_source.empty()) {
    return internal_error(
        "column " + *on_source.begin() + " is in the source but not in the target", name);
  }
  ARMHIVE_ASSIGN_OR_RETURN(plan.source_rows, count_rows(source, t.name));
  return plan;
}

const char* kind_of(const SqlValue& v) {
  if (std::holds_alternative<int64_t>(v)) return "an integer";
  if (std::holds_alternative<double>(v)) return "a real number";
  return "text";
}

// `v` as the target column's type expects it. SQLite's column affinities already stored each
// value in its column's kind; what remains is an integer in a REAL column (DOUBLE PRECISION).
Result<SqlValue> as_column_type(const SqlValue& v, const std::string& type) {
  if (sql_is_null(v)) return v;
  if (type == "bigint") {
    if (std::holds_alternative<int64_t>(v)) return v;
    if (const double* d = std::get_if<double>(&v);
        d != nullptr && std::trunc(*d) == *d && std::fabs(*d) < 9.2e18) {
      return SqlValue(static_cast<int64_t>(*d));
    }
  } else if (type == "double precision") {
    if (std::holds_alternative<double>(v)) return v;
    if (const int64_t* i = std::get_if<int64_t>(&v)) return SqlValue(static_cast<double>(*i));
  } else if (type == "text") {
    if (std::holds_alternative<std::string>(v)) return v;
  }
  return internal_error(std::string(kind_of(v)) + " where the target's column is " + type);
}

std::string insert_sql(const TablePlan& plan, size_t rows) {
  std::string columns, one_row = "(";
  for (size_t i = 0; i < plan.columns.size(); ++i) {
    columns += (i == 0 ? "" : ", ") + quoted(plan.columns[i]);
    one_row += i == 0 ? "?" : ",?";
  }
  one_row += ")";
  std::string sql = "INSERT INTO " + quoted(plan.table->name) + " (" + columns + ") VALUES ";
  for (size_t r = 0; r < rows; ++r) sql += (r == 0 ? "" : ",") + one_row;
  return sql;
}

Status copy_table(SqliteDatabase& source, Database::Tx& tx, const TablePlan& plan,
                  size_t batch_rows, const MigrationOptions& options) {
  const std::string name(plan.table->name);
  std::string select = "SELECT rowid";
  for (const std::string& c : plan.columns) select += ", " + quoted(c);
  select += " FROM " + quoted(name) + " WHERE rowid > ? ORDER BY rowid LIMIT ?";
  const size_t batch = std::max<size_t>(
      1, std::min(batch_rows, kMaxParams / std::max<size_t>(plan.columns.size(), 1)));
  if (options.progress) options.progress(name, 0, plan.source_rows);
  int64_t after = INT64_MIN;
  int64_t done = 0;
  for (;;) {
    ARMHIVE_ASSIGN_OR_RETURN(std::vector<SqlRow> rows,
                             source.query(select, {after, static_cast<int64_t>(batch)}));
    if (rows.empty()) break;
    std::vector<SqlValue> params;
    params.reserve(rows.size() * plan.columns.size());
    for (const SqlRow& r : rows) {
      after = sql_int(r[0]);
      for (size_t i = 0; i < plan.columns.size(); ++i) {
        auto v = as_column_type(r[i + 1], plan.types[i]);
        if (!v.is_ok()) {
          return v.status().annotate("table " + name + " row " + std::to_string(after) +
                                     " column " + plan.columns[i]);
        }
        params.push_back(std::move(v).value());
      }
    }
    ARMHIVE_RETURN_IF_ERROR(tx.execute(insert_sql(plan, rows.size()), params));
    done += static_cast<int64_t>(rows.size());
    if (options.progress) options.progress(name, done, plan.source_rows);
    if (rows.size() < batch) break;
  }
  if (plan.table->serial_column.empty()) return Status::ok();
  // The next id: past the copied ones and past SQLite's high-water mark, which AUTOINCREMENT
  // keeps after the newest rows are deleted.
  const std::string column(plan.table->serial_column);
  ARMHIVE_ASSIGN_OR_RETURN(
      std::vector<SqlRow> copied,
      tx.query("SELECT COALESCE(max(" + quoted(column) + "), 0) FROM " + quoted(name)));
  ARMHIVE_ASSIGN_OR_RETURN(std::vector<SqlRow> mark,
                           source.query("SELECT seq FROM sqlite_sequence WHERE name = ?", {name}));
  int64_t high = sql_int(copied.at(0).at(0));
  if (!mark.empty()) high = std::max(high, sql_int(mark[0][0]));
  ARMHIVE_ASSIGN_OR_RETURN(
      std::vector<SqlRow> set,
      tx.query("SELECT setval(pg_get_serial_sequence(?, ?), ?, false)", {name, column, high + 1}));
  if (set.empty() || sql_is_null(set[0][0])) {
    return internal_error("column " + column + " has no sequence in the target", name);
  }
  return Status::ok();
}

}  // namespace

Status MigrationReport::verification() const {
  for (const MigratedTable& t : tables) {
    if (t.source_rows != t.target_rows) {
      return internal_error("verification failed: table " + t.table + " has " +
                            std::to_string(t.target_rows) + " rows in the target, " +
                            std::to_string(t.source_rows) + " in the source");
    }
  }
  return Status::ok();
}

Result<MigrationReport> migrate_state_to_postgres(SqliteDatabase& source, PgDatabase& target,
                                                  const MigrationOptions& options) {
  ARMHIVE_RETURN_IF_ERROR(check_identifiers());
  if (Status s = migrate_state(source); !s.is_ok()) return s.annotate("the source");
  ARMHIVE_RETURN_IF_ERROR(check_source_tables(source));
  ARMHIVE_RETURN_IF_ERROR(check_target_empty(target));
  if (Status s = migrate_state(target); !s.is_ok()) return s.annotate("the target");

  std::vector<TablePlan> plans;
  for (const StateComponent& c : state_components()) {
    for (const StateTable& t : c.tables) {
      if (!t.copied) continue;
      ARMHIVE_ASSIGN_OR_RETURN(TablePlan plan, plan_table(source, target, t));
      plans.push_back(std::move(plan));
    }
  }
  const size_t batch_rows = options.batch_rows > 0 ? options.batch_rows : kDefaultBatchRows;
  Status copied = target.transaction([&](Database::Tx& tx) -> Status {
    for (const TablePlan& plan : plans) {
      ARMHIVE_RETURN_IF_ERROR(copy_table(source, tx, plan, batch_rows, options));
    }
    return Status::ok();
  });
  if (!copied.is_ok()) return copied.annotate("copying (the target's tables are left empty)");

  MigrationReport report;
  for (const TablePlan& plan : plans) {
    MigratedTable t;
    t.table = std::string(plan.table->name);
    ARMHIVE_ASSIGN_OR_RETURN(t.source_rows, count_rows(source, plan.table->name));
    ARMHIVE_ASSIGN_OR_RETURN(t.target_rows, count_rows(target, plan.table->name));
    report.tables.push_back(std::move(t));
  }
  return report;
}

}  // namespace armhive
