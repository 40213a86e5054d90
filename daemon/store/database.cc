#include "daemon/store/database.h"

#include <chrono>

#include "base/version.h"
#include "daemon/store/sqlite_database.h"

namespace armhive {

Result<std::unique_ptr<Database>> Database::open(const std::string& path, int max_wal_pages) {
  ARMHIVE_ASSIGN_OR_RETURN(
      std::unique_ptr<SqliteDatabase> db,
      SqliteDatabase::open(
          path, max_wal_pages > 0 ? max_wal_pages : WalCheckpointer::kDefaultMaxWalPages));
  return std::unique_ptr<Database>(std::move(db));
}

Status Database::create_bookkeeping() {
  // BIGINT: SQLite reads it as INTEGER (64-bit either way); PostgreSQL's INTEGER is 32-bit.
  ARMHIVE_RETURN_IF_ERROR(
      execute("CREATE TABLE IF NOT EXISTS schema_migrations (component TEXT NOT NULL, step "
              "BIGINT NOT NULL, applied_at BIGINT NOT NULL, PRIMARY KEY (component, step))"));
  // Which armhived last migrated the database: named when an older one is refused (migrate()).
  return execute(
      "CREATE TABLE IF NOT EXISTS armhive_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
}

Status Database::migrate(std::string_view component, const std::vector<std::string>& steps) {
  // A step this binary does not know was applied by a newer armhived: its tables may mean
  // something this one would misread, so it stops here (a downgrade goes through a backup).
  auto newest = query("SELECT max(step) FROM schema_migrations WHERE component = ?",
                      {std::string(component)});
  if (!newest.is_ok()) return newest.status().annotate("migrating " + std::string(component));
  if (!newest->empty() && !sql_is_null(newest->front()[0]) &&
      sql_int(newest->front()[0]) >= static_cast<int64_t>(steps.size())) {
    auto by = query("SELECT value FROM armhive_meta WHERE key = 'written_by'");
    std::string writer =
        by.is_ok() && !by->empty() ? "armhived " + sql_text(by->front()[0]) : "a newer armhived";
    return conflict(path() + " was written by " + writer + " (" + std::string(component) +
                        " schema step " + std::to_string(sql_int(newest->front()[0]) + 1) +
                        "); this is armhived " + std::string(kVersion) + ", which knows " +
                        std::to_string(steps.size()) +
                        " steps: run the newer armhived, or restore a backup this version wrote",
                    "database");
  }
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  for (size_t i = 0; i < steps.size(); ++i) {
    Status s = transaction([&](Tx& tx) -> Status {
      ARMHIVE_RETURN_IF_ERROR(lock_for_migration(tx));
      auto done = tx.query("SELECT 1 FROM schema_migrations WHERE component = ? AND step = ?",
                           {std::string(component), static_cast<int64_t>(i)});
      if (!done.is_ok()) return done.status();
      if (!done->empty()) return Status::ok();
      ARMHIVE_RETURN_IF_ERROR(tx.execute_script(adapt_schema(steps[i])));
      return tx.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                        {std::string(component), static_cast<int64_t>(i), now_s});
    });
    if (!s.is_ok()) return s.annotate("migrating " + std::string(component));
  }
  return execute(
      "INSERT INTO armhive_meta (key, value) VALUES ('written_by', ?) "
      "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      {std::string(kVersion)});
}

}  // namespace armhive
