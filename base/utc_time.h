#pragma once

#include <string>

namespace armhive {

// The wall clock now as RFC 3339 UTC with seconds ("2026-12-01T08:45:53Z"), for the records
// tools write (image manifests, benchmark results). Daemon logic reads time through its
// injected Clock instead. Any thread.
std::string utc_now();

}  // namespace armhive
