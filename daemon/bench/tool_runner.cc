#include "daemon/bench/tool_runner.h"

namespace armhive {
namespace {

std::string tail(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (s.size() > 400) s = "..." + s.substr(s.size() - 400);
  return s;
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string s;
  for (int c : cpus) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

}  // namespace

const char* side_name(ToolSide side) { return side == ToolSide::kGuest ? "guest" : "host"; }

Result<ToolOutput> run_tool(const SuiteContext& ctx, ToolSide side, const std::string& what,
                            std::vector<std::string> argv, std::chrono::milliseconds timeout) {
  if (ctx.cancelled()) return unavailable("cancelled: the daemon is shutting down");
  ToolOutput o;
  if (side == ToolSide::kGuest) {
    auto r = ctx.agent.exec(ctx.target.vm_name, {.argv = std::move(argv), .timeout = timeout});
    if (!r.is_ok()) return r.status().annotate(what + " in the guest");
    if (r->timed_out) {
      return Status(
          ErrorCode::kTimeout,
          what + " in the guest timed out after " + std::to_string(timeout.count() / 1000) + " s",
          ctx.target.vm_name);
    }
    o.exit_code = r->exit_code;
    o.out = std::move(r->out);
    o.err = std::move(r->err);
    o.out_truncated = r->out_truncated;
    return o;
  }
  if (!ctx.target.cpus.empty()) {
    argv.insert(argv.begin(), {"taskset", "-c", cpu_list(ctx.target.cpus)});
  }
  auto r = ctx.processes.run({.argv = std::move(argv), .timeout = timeout});
  if (!r.is_ok()) {
    if (r.status().code() == ErrorCode::kNotFound)
      return unavailable(what + " on the host: not installed (" + r.status().message() + ")");
    return r.status().annotate(what + " on the host");
  }
  if (r->timed_out) {
    return Status(ErrorCode::kTimeout, what + " on the host timed out after " +
                                           std::to_string(timeout.count() / 1000) + " s");
  }
  o.exit_code = r->exit_code;
  o.out = std::move(r->out);
  o.err = std::move(r->err);
  return o;
}

Result<ToolOutput> run_tool_checked(const SuiteContext& ctx, ToolSide side, const std::string& what,
                                    std::vector<std::string> argv,
                                    std::chrono::milliseconds timeout) {
  ARMHIVE_ASSIGN_OR_RETURN(ToolOutput o, run_tool(ctx, side, what, std::move(argv), timeout));
  if (o.exit_code != 0) {
    std::string detail = tail(o.err.empty() ? o.out : o.err);
    std::string hint =
        o.exit_code == 127 ? std::string(" (not installed in the ") + side_name(side) + "?)" : "";
    return unavailable(what + " in the " + side_name(side) + " failed with exit code " +
                       std::to_string(o.exit_code) + hint + (detail.empty() ? "" : ": " + detail));
  }
  return o;
}

}  // namespace armhive
