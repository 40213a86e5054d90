#include "daemon/virt/guest_exec_stream.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "base/base64.h"
#include "daemon/virt/guest_agent_reply.h"

namespace armhive {
namespace {

using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kCallTimeout{10000};
// The command leads a session of its own (setsid(1) without a fork: the shell qemu-ga spawned
// is no process group leader, checked first so setsid never forks and the pid stays the
// command's), so a kill reaches everything it started, also what outlived its parent. A guest
// without setsid runs it as before.
constexpr const char* kRedirectScript =
    R"(o=$1 e=$2; shift 2; read -r _ _ _ _ g _ </proc/$$/stat; )"
    R"(if [ "$g" != "$$" ] && command -v setsid >/dev/null 2>&1; then )"
    R"(exec setsid "$@" >>"$o" 2>>"$e"; fi; exec "$@" >>"$o" 2>>"$e")";

std::string random_token() {
  std::random_device rd;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string out;
  for (int i = 0; i < 16; ++i) out += "0123456789abcdef"[hex(rd)];
  return out;
}

Result<std::string> dump(const json& j, const char* field) {
  try {
    return j.dump();
  } catch (const json::exception& e) {
    return invalid_argument(field, std::string("must be UTF-8: ") + e.what());
  }
}

// One output file in the guest: its agent handle and how far we have read it.
struct SpoolFile {
  ExecOutputStream stream;
  std::string path;
  std::optional<int64_t> handle;
  int64_t position = 0;
  bool at_eof = false;  // the last read hit EOF: seek before reading again (sticky EOF)
};

class StreamingExec {
 public:
  StreamingExec(const AgentCall& agent, ExecSink& sink, const ExecStreamOptions& options)
      : agent_(agent), sink_(sink), options_(options) {}

  ~StreamingExec() noexcept { cleanup(); }
  StreamingExec(const StreamingExec&) = delete;
  StreamingExec& operator=(const StreamingExec&) = delete;

  Result<GuestExecResult> run(const GuestExecRequest& request) {
    if (request.argv.empty()) return invalid_argument("argv", "must not be empty");
    const std::string token = random_token();
    files_[0] = {ExecOutputStream::kStdout,
                 options_.spool_dir + "/.armhive-exec-" + token + ".out"};
    files_[1] = {ExecOutputStream::kStderr,
                 options_.spool_dir + "/.armhive-exec-" + token + ".err"};
    for (auto& f : files_) ARMHIVE_RETURN_IF_ERROR(open(f));

    json args = {{"path", "/bin/sh"}, {"capture-output", false}};
    std::vector<std::string> argv = {"-c", kRedirectScript, "armhive-exec", files_[0].path,
                                     files_[1].path};
    argv.insert(argv.end(), request.argv.begin(), request.argv.end());
    args["arg"] = std::move(argv);
    if (!request.stdin_data.empty()) args["input-data"] = base64_encode(request.stdin_data);
    ARMHIVE_ASSIGN_OR_RETURN(std::string cmd,
                             dump(json{{"execute", "guest-exec"}, {"arguments", args}}, "argv"));
    ARMHIVE_ASSIGN_OR_RETURN(std::string started, agent_(cmd, kCallTimeout));
    ARMHIVE_ASSIGN_OR_RETURN(const int64_t pid, parse_guest_exec_started(started));
    sink_.started();

    const bool bounded = request.timeout > std::chrono::milliseconds::zero();
    const auto deadline = SteadyClock::now() + request.timeout;
    const std::string status_cmd =
        json{{"execute", "guest-exec-status"}, {"arguments", {{"pid", pid}}}}.dump();
    auto interval = options_.poll_interval;
    while (true) {
      // Status first, then drain: output written before the exit is then always read.
      ARMHIVE_ASSIGN_OR_RETURN(std::string reply, agent_(status_cmd, kCallTimeout));
      ARMHIVE_ASSIGN_OR_RETURN(std::optional<GuestExecResult> exited,
                               parse_guest_exec_status(reply));
      size_t got = 0;
      for (auto& f : files_) {
        ARMHIVE_ASSIGN_OR_RETURN(size_t n, drain(f, exited.has_value(), bounded, deadline));
        got += n;
      }
      if (exited) {
        exited->out.clear();
        exited->err.clear();
        // The output was cut short by the client or the deadline: say so with the exit code.
        exited->cancelled = drain_stop_ == DrainStop::kCancelled;
        exited->timed_out = drain_stop_ == DrainStop::kDeadline;
        return std::move(*exited);
      }
      const bool cancelled = sink_.cancelled();
      if (cancelled || (bounded && SteadyClock::now() >= deadline)) {
        kill(pid);
        GuestExecResult r;
        r.cancelled = cancelled;
        r.timed_out = !cancelled;
        r.signal = 9;
        return r;
      }
      interval =
          got > 0 ? options_.poll_interval : std::min(options_.idle_poll_interval, interval * 2);
      std::this_thread::sleep_for(interval);
    }
  }

 private:
  Status open(SpoolFile& f) {
    ARMHIVE_ASSIGN_OR_RETURN(std::string cmd,
                             dump(json{{"execute", "guest-file-open"},
                                       {"arguments", {{"path", f.path}, {"mode", "w+"}}}},
                                  "path"));
    ARMHIVE_ASSIGN_OR_RETURN(std::string reply, agent_(cmd, kCallTimeout));
    ARMHIVE_ASSIGN_OR_RETURN(int64_t handle, parse_guest_file_open(reply));
    f.handle = handle;
    return Status::ok();
  }

  // Reads what is there, at most max_reads_per_poll chunks unless `to_end`; returns the bytes
  // handed to the sink. The drain to the end (after the exit) still stops when the sink is
  // cancelled or the request's deadline passes: a child left behind may append to the file for
  // ever, and the client that went away must not keep this thread reading it.
  Result<size_t> drain(SpoolFile& f, bool to_end, bool bounded, SteadyClock::time_point deadline) {
    size_t total = 0;
    for (size_t reads = 0; to_end || reads < options_.max_reads_per_poll; ++reads) {
      if (to_end && drain_stop_ != DrainStop::kNo) break;
      if (to_end && reads > 0) {
        if (sink_.cancelled()) {
          drain_stop_ = DrainStop::kCancelled;
          break;
        }
        if (bounded && SteadyClock::now() >= deadline) {
          drain_stop_ = DrainStop::kDeadline;
          break;
        }
      }
      if (f.at_eof) {
        json seek = {
            {"execute", "guest-file-seek"},
            {"arguments", {{"handle", *f.handle}, {"offset", f.position}, {"whence", "set"}}}};
        ARMHIVE_ASSIGN_OR_RETURN(std::string r, agent_(seek.dump(), kCallTimeout));
        (void)r;  // the position is ours; the reply only says the seek happened
        f.at_eof = false;
      }
      json read = {{"execute", "guest-file-read"},
                   {"arguments", {{"handle", *f.handle}, {"count", options_.read_chunk}}}};
      ARMHIVE_ASSIGN_OR_RETURN(std::string reply, agent_(read.dump(), kCallTimeout));
      ARMHIVE_ASSIGN_OR_RETURN(GuestFileChunk chunk,
                               parse_guest_file_read(reply, options_.read_chunk));
      f.position += static_cast<int64_t>(chunk.data.size());
      f.at_eof = chunk.eof;
      if (!chunk.data.empty()) sink_.output(f.stream, chunk.data);
      total += chunk.data.size();
      if (chunk.eof || chunk.data.empty()) break;
    }
    return total;
  }

  void kill(int64_t pid) {
    auto r = agent_(guest_kill_command(pid), std::chrono::seconds(5));
    (void)r;  // best effort: the process may have exited meanwhile
  }

  // Best effort, never throws: closes the handles and removes the files.
  void cleanup() noexcept {
    try {
      std::vector<std::string> paths;
      for (auto& f : files_) {
        if (!f.handle) continue;
        json close = {{"execute", "guest-file-close"}, {"arguments", {{"handle", *f.handle}}}};
        auto r = agent_(close.dump(), kCallTimeout);
        (void)r;
        paths.push_back(f.path);
      }
      if (paths.empty()) return;
      paths.insert(paths.begin(), "-f");
      json rm = {{"execute", "guest-exec"}, {"arguments", {{"path", "/bin/rm"}, {"arg", paths}}}};
      auto r = agent_(rm.dump(), kCallTimeout);
      (void)r;
    } catch (...) {  // NOLINT(bugprone-empty-catch): cleanup of guest files must not throw
    }
  }

  enum class DrainStop { kNo, kCancelled, kDeadline };

  const AgentCall& agent_;
  ExecSink& sink_;
  const ExecStreamOptions& options_;
  DrainStop drain_stop_ = DrainStop::kNo;  // why the final drain ended before the files' end
  SpoolFile files_[2] = {{ExecOutputStream::kStdout, {}}, {ExecOutputStream::kStderr, {}}};
};

}  // namespace

std::string guest_kill_command(int64_t pid) {
  // The shell's own kill: "-PID" is the process group (dash, busybox ash and bash all take a
  // negative pid after the signal); a pid that leads no group fails with ESRCH and is killed
  // alone.
  json cmd = {{"execute", "guest-exec"},
              {"arguments",
               {{"path", "/bin/sh"},
                {"arg",
                 {"-c", R"(kill -9 "-$1" 2>/dev/null || kill -9 "$1")", "armhive-kill",
                  std::to_string(pid)}}}}};
  return cmd.dump();
}

Result<GuestExecResult> run_streaming_exec(const AgentCall& agent, const GuestExecRequest& request,
                                           ExecSink& sink, const ExecStreamOptions& options) {
  StreamingExec exec(agent, sink, options);
  return exec.run(request);
}

}  // namespace armhive
