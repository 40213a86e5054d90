#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/process_runner.h"
#include "base/result.h"
#include "daemon/bench/mtu_plan.h"

namespace armhive {

// What an MTU run changed on the host, kept on disk while it is changed, so that a crash (or a
// kill) between changing the shared bridge's MTU and restoring it does not leave every lease on
// that bridge at the benchmark's MTU: the next armhived restores it at start.
//
// One file per run, `<runs_dir>/mtu-journal-<run id>.json`: {"links": [{"link": L, "mtu": M}]},
// M the MTU L had before the run. Written (to a temporary file, then renamed) before the first
// host step; removed once the steps are undone. Pure file I/O plus `ip link set` on restore;
// blocking; any thread (each run its own file).
std::string mtu_journal_path(const std::string& runs_dir, const std::string& run_id);

// Records the links `steps` are about to change and the MTU each has now (`from`).
Status write_mtu_journal(const std::string& path, const std::vector<MtuStep>& steps);
// The run restored its links: the journal goes. A missing file is fine.
void remove_mtu_journal(const std::string& path);

// At armhived's start: for every journal left in `runs_dir` (newest first, so when two runs
// overlapped the oldest one's originals are set last), sets each link back to its recorded MTU
// (`ip link set dev L mtu M`, argv vector) and removes the journal. A link that cannot be set
// (a tap whose VM went with the crash) is reported in `errors`, the others still restored.
// Returns the steps it applied; an unreadable journal is left in place and reported too.
std::vector<MtuStep> restore_mtu_journals(ProcessRunner& processes, const std::string& runs_dir,
                                          std::chrono::milliseconds timeout,
                                          std::vector<std::string>& errors);

}  // namespace armhive
