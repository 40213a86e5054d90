#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace armhive {

// Files that hold secrets (the bootstrap token, TLS private keys, the SSH CA key): owner-only.
// Pure POSIX file calls; any thread.

// kPermissionDenied naming the file and the fix (`chmod 600 PATH`) when `path` is readable or
// writable by group or others, or is not a regular file; kUnavailable when it cannot be stat'ed.
// `what` says what the file is ("the TLS key").
Status check_secret_file(const std::string& path, std::string_view what);

// Creates `path` with mode 0600 from the start (never a moment with a wider mode), writes
// `content` and syncs it. kConflict if the file exists already (never follows a symlink);
// kUnavailable on I/O errors.
Status write_secret_file(const std::string& path, std::string_view content);

}  // namespace armhive
