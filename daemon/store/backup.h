#pragma once

#include <string>

#include "base/status.h"

namespace armhive {

// Online backup and offline restore of armhived's SQLite database (`armhived backup FILE`,
// `armhived restore FILE`). PostgreSQL control planes back up with pg_dump instead.

// Copies the database at `source` to `dest` while armhived may be writing it: SQLite's online
// backup API copies every page inside one read transaction, which in WAL mode sees one commit
// and never blocks the writer, so the copy is of one moment. `dest` is written as a
// self-contained file (no -wal), owner-only (0600), checked (PRAGMA integrity_check) and only
// then renamed into place; an existing `dest` is refused rather than overwritten.
[[nodiscard]] Status backup_database(const std::string& source, const std::string& dest);

// Puts the backup `backup` in place of the database at `target` for the next start. The caller
// must have stopped armhived (hold_state_lock() tells). The backup is checked first (a SQLite
// file that passes integrity_check and carries armhived's tables); the database it
// replaces is kept beside it as `<target>.before-restore`, its -wal and -shm removed.
[[nodiscard]] Status restore_database(const std::string& backup, const std::string& target);

}  // namespace armhive
