#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "daemon/store/pg_database.h"
#include "daemon/store/sqlite_database.h"

namespace armhive {

// One table after a migration: its rows in the source and in the target.
struct MigratedTable {
  std::string table;
  int64_t source_rows = 0;
  int64_t target_rows = 0;
};

struct MigrationReport {
  std::vector<MigratedTable> tables;  // every copied table, in the order copied
  // Ok when every table holds as many rows in the target as in the source; else kInternal
  // naming the first that does not.
  Status verification() const;
};

struct MigrationOptions {
  // Rows per INSERT, further bounded so that one statement binds at most 16,384 values; 0:
  // 500. Tests make it small to cross batch boundaries.
  size_t batch_rows = 0;
  // Per table: once before its first row (done 0), then after each batch. Runs on the
  // caller's thread, inside the target's transaction: it must not use the target.
  std::function<void(std::string_view table, int64_t done, int64_t total)> progress;
};

// `armhived migrate --to`: copies armhived's state from its SQLite file into an empty
// PostgreSQL database, for an armhived that is stopped (the caller holds the StateLock: nothing
// else may write the source meanwhile).
//
// The tables and their order come from state_components() (daemon/store/state_schema.h), the
// list the daemon migrates through, never from either database. In order:
// - the source is migrated to this version's schema (what a start would do; a file a newer
//   armhived wrote is refused with kConflict), and one holding a table that list does not
//   know is refused (kConflict): its rows would be lost;
// - a target holding rows in any of the list's tables is refused before anything is written
//   (kConflict: "the target database is not empty: table leases has 12 rows");
// - the target gets its schema through the very migrations every store runs (component
//   "leader" included, empty: the new cluster elects its own leader);
// - every copied table's rows go over in batches of bound values typed as the target's column
//   (SqlValue: an integer where a double is expected is converted, anything else that does not
//   fit is kInternal naming the table, row and column), all tables in ONE transaction, so that
//   a failure at any point (a lost connection, an interrupted process) leaves the target's
//   tables empty and the migration can simply run again; PostgreSQL holds 10^5 leases' history
//   in one transaction without trouble;
// - each BIGSERIAL sequence is moved past the copied ids and past SQLite's own high-water mark
//   (AUTOINCREMENT never reuses a deleted row's id: pruned audit entries), in that transaction;
// - after the commit every table is counted on both sides (MigrationReport::verification).
// Never copied: the leader lease and the databases' own bookkeeping (bookkeeping_tables(),
// which the migrations recreate).
//
// The copy reads the source inside the target's transaction body, which Database otherwise
// forbids: the target connection is this call's alone, and the source is only read here, so
// neither waits on anything another thread holds.
//
// Threading: a call uses both databases alone; nothing else may use them meanwhile.
Result<MigrationReport> migrate_state_to_postgres(SqliteDatabase& source, PgDatabase& target,
                                                  const MigrationOptions& options = {});

}  // namespace armhive
