#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "base/result.h"
#include "daemon/core/hypervisor.h"

namespace armhive {

// One raw guest-agent command: JSON in, the agent's JSON reply out (LibvirtHypervisor's
// agent_command bound to a domain, or a scripted agent in tests).
using AgentCall =
    std::function<Result<std::string>(const std::string& command, std::chrono::milliseconds)>;

struct ExecStreamOptions {
  // Polling starts at `poll_interval` and doubles while the command is silent, up to
  // `idle_poll_interval`; output resets it.
  std::chrono::milliseconds poll_interval{100};
  std::chrono::milliseconds idle_poll_interval{500};
  size_t read_chunk = 48 * 1024;   // bytes per guest-file-read (its reply is base64: ~64 KiB)
  size_t max_reads_per_poll = 16;  // per stream, while the command runs (~768 KiB)
  std::string spool_dir = "/tmp";  // guest directory for the output files
};

// Streaming exec through the guest agent only (no network, no SSH). Why files: qemu-ga's
// own capture (guest-exec "capture-output") hands the output over only once the process has
// exited, so it cannot stream. Instead the command runs as
//   /bin/sh -c 'o=$1 e=$2; shift 2; exec "$@" >>"$o" 2>>"$e"' armhive-exec OUT ERR ARGV...
// (the argv travels as arguments, never inside the script; `exec` keeps the guest pid that of
// the command itself) with OUT and ERR two fresh files under spool_dir that we opened first
// with guest-file-open "w+". Each poll reads what was appended through guest-file-read in
// bounded chunks (a reply is checked: count ≤ asked, equal to the decoded length) and asks
// guest-exec-status; after the exit both files are drained to their end. glibc's end-of-file
// is sticky, so a read that hit EOF is followed by a guest-file-seek to our position before
// the next read. The files are closed and removed at the end (also after errors).
//
// The command runs in a session of its own (setsid, when the guest has it) so that it and
// everything it started form one process group, as GitLab Runner's own executors run a stage.
//
// Cancellation and timeout: when sink.cancelled() turns true, or request.timeout (if
// positive) passes, the command's process group gets SIGKILL (guest_kill_command): also its
// children, and those that outlived their parent (a `sleep &` of a cancelled CI stage). Both
// also end the drain
// after the exit (a child left behind may append to the files for ever): the result then has
// the exit code with `cancelled` or `timed_out` set, its output cut short. Each agent call is
// capped at 10 s. Errors of the agent (the VM went away) end the call with that error.
//
// Threading: blocks the calling thread for the command's lifetime; the sink is called on it.
// The guest-exec command that sends SIGKILL to process group `pid`, or to process `pid` alone
// when it leads no group (a command qemu-ga started directly).
std::string guest_kill_command(int64_t pid);

Result<GuestExecResult> run_streaming_exec(const AgentCall& agent, const GuestExecRequest& request,
                                           ExecSink& sink, const ExecStreamOptions& options = {});

}  // namespace armhive
