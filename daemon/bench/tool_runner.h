#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/result.h"
#include "daemon/bench/suites.h"

namespace armhive {

// Runs a benchmark tool in the guest (through the guest agent) or natively on the host (the
// host baselines; prefixed with `taskset -c CPUS` when the VM is pinned, so the host run uses
// the VM's cores). Blocking; the suite's worker thread.
struct ToolOutput {
  int exit_code = -1;
  std::string out;
  std::string err;
  bool out_truncated = false;
  std::string text() const { return out + "\n" + err; }
};

enum class ToolSide { kGuest, kHost };

// Errors only when the tool could not run at all (agent failure, missing binary on the host:
// kUnavailable naming `what`) or timed out (kTimeout); a non-zero exit is returned.
Result<ToolOutput> run_tool(const SuiteContext& ctx, ToolSide side, const std::string& what,
                            std::vector<std::string> argv, std::chrono::milliseconds timeout);

// As run_tool, and a non-zero exit is kUnavailable with the exit code, a hint for 127 ("not
// installed in the guest image?") and the tool's last words.
Result<ToolOutput> run_tool_checked(const SuiteContext& ctx, ToolSide side, const std::string& what,
                                    std::vector<std::string> argv,
                                    std::chrono::milliseconds timeout);

// "guest" / "host".
const char* side_name(ToolSide side);

}  // namespace armhive
