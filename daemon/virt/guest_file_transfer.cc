#include "daemon/virt/guest_file_transfer.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "base/base64.h"
#include "base/sha256.h"
#include "daemon/virt/guest_agent_reply.h"

namespace armhive {
namespace {

using json = nlohmann::json;

constexpr std::chrono::milliseconds kCallTimeout{10000};
constexpr std::chrono::milliseconds kPollInterval{20};
// Every helper script starts here: busybox images keep their applets in /run/bin.
constexpr const char* kPath =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/run/bin; ";
constexpr const char* kKindScript =
    R"(if [ -d "$1" ]; then echo dir; elif [ -f "$1" ]; then echo file; else echo none; fi)";
constexpr const char* kSizeSumScript = R"(wc -c < "$1" && sha256sum "$1")";
constexpr const char* kMkdirScript = R"(mkdir -p "$1")";
constexpr const char* kMoveScript = R"(mv -f "$1" "$2")";
constexpr const char* kUntarScript = R"(mkdir -p "$1" && tar -xf "$2" -C "$1")";
constexpr const char* kTarScript = R"(tar -cf "$2" -C "$1" .)";
constexpr const char* kRemoveScript = R"(rm -f "$1")";
constexpr size_t kMaxEmptyReads = 3;
// Room in a guest-file-read reply beside its base64: {"return":{"count":N,"buf-b64":"","eof":B}}
// and whitespace.
constexpr size_t kReplySlack = 4096;

std::string random_token() {
  std::random_device rd;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string out;
  for (int i = 0; i < 16; ++i) out += "0123456789abcdef"[hex(rd)];
  return out;
}

Result<std::string> dump(const json& j) {
  try {
    return j.dump();
  } catch (const json::exception& e) {
    return invalid_argument("path", std::string("must be UTF-8: ") + e.what());
  }
}

Status guest_error(std::string message, const std::string& path) {
  return Status(ErrorCode::kUnavailable, std::move(message), path);
}

// A short helper script in the guest, its output captured; bounded by `timeout`.
class GuestShell {
 public:
  GuestShell(const AgentCall& agent, std::chrono::milliseconds timeout)
      : agent_(agent), timeout_(timeout) {}

  Result<GuestExecResult> run(const char* script, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"-c", std::string(kPath) + script, "armhive-cp"};
    argv.insert(argv.end(), args.begin(), args.end());
    json a = {{"path", "/bin/sh"}, {"arg", argv}, {"capture-output", true}};
    ARMHIVE_ASSIGN_OR_RETURN(std::string cmd,
                             dump(json{{"execute", "guest-exec"}, {"arguments", a}}));
    ARMHIVE_ASSIGN_OR_RETURN(std::string started, agent_(cmd, kCallTimeout));
    ARMHIVE_ASSIGN_OR_RETURN(int64_t pid, parse_guest_exec_started(started));
    const std::string status =
        json{{"execute", "guest-exec-status"}, {"arguments", {{"pid", pid}}}}.dump();
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      ARMHIVE_ASSIGN_OR_RETURN(std::string reply, agent_(status, kCallTimeout));
      ARMHIVE_ASSIGN_OR_RETURN(std::optional<GuestExecResult> done, parse_guest_exec_status(reply));
      if (done) return std::move(*done);
      if (std::chrono::steady_clock::now() >= deadline) {
        return Status(ErrorCode::kTimeout,
                      std::string("a guest helper (") + script + ") did not finish in time");
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  }

  // run() that must exit 0; otherwise an error with what it printed.
  Result<std::string> check(const char* script, const std::vector<std::string>& args,
                            const std::string& what) {
    ARMHIVE_ASSIGN_OR_RETURN(GuestExecResult r, run(script, args));
    if (r.exit_code != 0) {
      std::string err = r.err.substr(0, 300);
      while (!err.empty() && (err.back() == '\n' || err.back() == '\r')) err.pop_back();
      return Status(ErrorCode::kUnprocessable,
                    what + " failed in the guest (exit " + std::to_string(r.exit_code) +
                        (err.empty() ? ")" : "): " + err),
                    args.empty() ? std::string() : args.front());
    }
    return std::move(r.out);
  }

 private:
  const AgentCall& agent_;
  std::chrono::milliseconds timeout_;
};

// A guest file opened through the agent; closed by the destructor if still open.
class GuestFile {
 public:
  GuestFile(const AgentCall& agent, std::chrono::milliseconds call_timeout)
      : agent_(agent), call_timeout_(call_timeout) {}
  ~GuestFile() noexcept { (void)close(); }
  GuestFile(const GuestFile&) = delete;
  GuestFile& operator=(const GuestFile&) = delete;

  Status open(const std::string& path, const char* mode) {
    ARMHIVE_ASSIGN_OR_RETURN(std::string cmd,
                             dump(json{{"execute", "guest-file-open"},
                                       {"arguments", {{"path", path}, {"mode", mode}}}}));
    ARMHIVE_ASSIGN_OR_RETURN(std::string reply, agent_(cmd, kCallTimeout));
    ARMHIVE_ASSIGN_OR_RETURN(int64_t h, parse_guest_file_open(reply));
    handle_ = h;
    return Status::ok();
  }
  Status write(std::string_view data) {
    const std::string cmd =
        json{{"execute", "guest-file-write"},
             {"arguments", {{"handle", *handle_}, {"buf-b64", base64_encode(data)}}}}
            .dump();
    ARMHIVE_ASSIGN_OR_RETURN(std::string reply, agent_(cmd, call_timeout_));
    return parse_guest_file_write(reply, data.size());
  }
  Result<GuestFileChunk> read(size_t count) {
    const std::string cmd = json{{"execute", "guest-file-read"},
                                 {"arguments", {{"handle", *handle_}, {"count", count}}}}
                                .dump();
    ARMHIVE_ASSIGN_OR_RETURN(std::string reply, agent_(cmd, call_timeout_));
    // Refused unparsed: a reply far beyond what `count` bytes of base64 need is not a read.
    const size_t bound = (count + 2) / 3 * 4 + kReplySlack;
    if (reply.size() > bound) {
      return internal_error("the guest agent's guest-file-read reply is " +
                            std::to_string(reply.size()) + " bytes, more than the " +
                            std::to_string(bound) + " a read of " + std::to_string(count) +
                            " bytes needs");
    }
    return parse_guest_file_read(reply, count);
  }
  Status close() {
    if (!handle_) return Status::ok();
    const std::string cmd =
        json{{"execute", "guest-file-close"}, {"arguments", {{"handle", *handle_}}}}.dump();
    handle_.reset();
    return agent_(cmd, kCallTimeout).status();
  }

 private:
  const AgentCall& agent_;
  const std::chrono::milliseconds call_timeout_;
  std::optional<int64_t> handle_;
};

// Removes a guest temporary file when the transfer ends, however it ends.
class GuestTemp {
 public:
  GuestTemp(GuestShell& shell, std::string path) : shell_(shell), path_(std::move(path)) {}
  ~GuestTemp() noexcept {
    if (!path_.empty()) (void)shell_.run(kRemoveScript, {path_});
  }
  GuestTemp(const GuestTemp&) = delete;
  GuestTemp& operator=(const GuestTemp&) = delete;
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }  // the file was moved into place

 private:
  GuestShell& shell_;
  std::string path_;
};

std::string parent_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

bool is_hex_digest(std::string_view s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// The output of kSizeSumScript: "SIZE\nHEX  PATH\n" (busybox's wc may pad the number).
Result<std::pair<uint64_t, std::string>> parse_size_sum(const std::string& out,
                                                        const std::string& path) {
  size_t nl = out.find('\n');
  std::string size_text = out.substr(0, nl);
  size_text.erase(0, size_text.find_first_not_of(' '));
  if (nl == std::string::npos || size_text.empty() || size_text.size() > 19 ||
      size_text.find_first_not_of("0123456789") != std::string::npos) {
    return guest_error("the guest's size of the file is not a number", path);
  }
  std::string sum = out.substr(nl + 1, 64);
  if (!is_hex_digest(sum)) return guest_error("the guest's sha256sum printed no digest", path);
  return std::make_pair(static_cast<uint64_t>(std::stoull(size_text)), sum);
}

}  // namespace

Result<GuestFileTransfer> put_guest_file(const AgentCall& agent, const GuestFilePut& put,
                                         ByteSource& source, const FileTransferOptions& options) {
  if (put.path.empty() || put.path.front() != '/') {
    return invalid_argument("path", "must be an absolute path");
  }
  if (options.write_chunk == 0) return invalid_argument("write_chunk", "must be positive");
  if (options.write_chunk > kMaxWriteChunk) {
    // libvirt would hang the agent channel on the command (guest_file_transfer.h).
    return invalid_argument("write_chunk",
                            "must be at most " + std::to_string(kMaxWriteChunk) + " bytes");
  }
  GuestShell shell(agent, options.command_timeout);
  const bool tar = put.kind == GuestFileKind::kTar;
  const std::string token = random_token();
  // A file is written beside its target (same file system: the move is a rename); a tar
  // stream is spooled, then unpacked.
  if (!tar) {
    ARMHIVE_RETURN_IF_ERROR(
        shell.check(kMkdirScript, {parent_of(put.path)}, "creating the parent directory").status());
  }
  GuestTemp temp(shell, tar ? options.spool_dir + "/.armhive-cp-" + token + ".tar"
                            : parent_of(put.path) + (parent_of(put.path) == "/" ? "" : "/") +
                                  ".armhive-cp-" + token);
  GuestFileTransfer result;
  result.kind = put.kind;
  {
    GuestFile file(agent, options.chunk_timeout);
    auto opened = file.open(temp.path(), "w");
    if (!opened.is_ok()) {
      return Status(opened.code(), "cannot create a file in the guest: " + opened.message(),
                    put.path, "path");
    }
    Sha256 sum;
    for (;;) {
      // Full chunks: every agent call costs the guest a JSON parse, so no short writes.
      std::string piece;
      while (piece.size() < options.write_chunk) {
        ARMHIVE_ASSIGN_OR_RETURN(std::string more, source.read(options.write_chunk - piece.size()));
        if (more.empty()) break;
        piece += more;
      }
      if (piece.empty()) break;
      result.bytes += piece.size();
      if (result.bytes > put.size) {
        return invalid_argument(
            "body", "is longer than its Content-Length of " + std::to_string(put.size) + " bytes");
      }
      sum.update(piece);
      ARMHIVE_RETURN_IF_ERROR(file.write(piece));
    }
    ARMHIVE_RETURN_IF_ERROR(file.close());
    result.sha256 = sum.hex_digest();
  }
  if (result.bytes != put.size) {
    return invalid_argument("body", "ended after " + std::to_string(result.bytes) + " of " +
                                        std::to_string(put.size) + " bytes");
  }
  if (!put.sha256.empty() && put.sha256 != result.sha256) {
    return invalid_argument(
        "sha256", "the body's sha256 is " + result.sha256 + ", the request says " + put.sha256);
  }
  ARMHIVE_ASSIGN_OR_RETURN(std::string out,
                           shell.check(kSizeSumScript, {temp.path()}, "checksumming the upload"));
  ARMHIVE_ASSIGN_OR_RETURN(auto size_sum, parse_size_sum(out, put.path));
  if (size_sum.first != result.bytes || size_sum.second != result.sha256) {
    return guest_error("the guest stored other bytes than were sent (" +
                           std::to_string(size_sum.first) + " bytes, sha256 " + size_sum.second +
                           "; sent " + std::to_string(result.bytes) + " bytes, sha256 " +
                           result.sha256 + ")",
                       put.path);
  }
  if (tar) {
    ARMHIVE_RETURN_IF_ERROR(
        shell.check(kUntarScript, {put.path, temp.path()}, "unpacking the tar stream").status());
  } else {
    ARMHIVE_RETURN_IF_ERROR(
        shell.check(kMoveScript, {temp.path(), put.path}, "moving the upload into place").status());
    temp.release();
  }
  return result;
}

Result<GuestFileTransfer> get_guest_file(const AgentCall& agent, const std::string& path,
                                         ByteSink& sink, const FileTransferOptions& options) {
  if (path.empty() || path.front() != '/') {
    return invalid_argument("path", "must be an absolute path");
  }
  if (options.read_chunk == 0) return invalid_argument("read_chunk", "must be positive");
  if (options.read_chunk > kMaxReadChunk) {
    return invalid_argument("read_chunk",
                            "must be at most " + std::to_string(kMaxReadChunk) + " bytes");
  }
  GuestShell shell(agent, options.command_timeout);
  ARMHIVE_ASSIGN_OR_RETURN(std::string kind, shell.check(kKindScript, {path}, "looking at"));
  GuestFileTransfer result;
  std::optional<GuestTemp> temp;
  std::string src = path;
  if (kind == "dir\n") {
    result.kind = GuestFileKind::kTar;
    temp.emplace(shell, options.spool_dir + "/.armhive-cp-" + random_token() + ".tar");
    ARMHIVE_RETURN_IF_ERROR(
        shell.check(kTarScript, {path, temp->path()}, "packing the directory").status());
    src = temp->path();
  } else if (kind == "none\n") {
    return Status(ErrorCode::kNotFound, "no file or directory '" + path + "' in the guest", path,
                  "path");
  } else if (kind != "file\n") {
    return guest_error("the guest could not say what '" + path + "' is", path);
  }
  ARMHIVE_ASSIGN_OR_RETURN(std::string out,
                           shell.check(kSizeSumScript, {src}, "checksumming the file"));
  ARMHIVE_ASSIGN_OR_RETURN(auto size_sum, parse_size_sum(out, path));
  const uint64_t announced = size_sum.first;
  ARMHIVE_RETURN_IF_ERROR(sink.begin(result.kind, announced, size_sum.second));

  GuestFile file(agent, options.chunk_timeout);
  ARMHIVE_RETURN_IF_ERROR(file.open(src, "r"));
  Sha256 sum;
  size_t empty_reads = 0;
  for (;;) {
    ARMHIVE_ASSIGN_OR_RETURN(GuestFileChunk chunk, file.read(options.read_chunk));
    if (chunk.data.empty() && !chunk.eof && ++empty_reads > kMaxEmptyReads) {
      return guest_error("the guest's agent keeps reading nothing before the end of the file",
                         path);
    }
    if (!chunk.data.empty()) {
      result.bytes += chunk.data.size();
      if (result.bytes > announced) {
        return guest_error(
            "the guest sent more than the " + std::to_string(announced) + " bytes it announced",
            path);
      }
      sum.update(chunk.data);
      ARMHIVE_RETURN_IF_ERROR(sink.write(chunk.data));
    }
    if (chunk.eof) break;
  }
  ARMHIVE_RETURN_IF_ERROR(file.close());
  result.sha256 = sum.hex_digest();
  if (result.bytes != announced || result.sha256 != size_sum.second) {
    return guest_error("the guest sent other bytes than it announced (" +
                           std::to_string(result.bytes) + " bytes, sha256 " + result.sha256 +
                           "; announced " + std::to_string(announced) + " bytes, sha256 " +
                           size_sum.second + ")",
                       path);
  }
  return result;
}

}  // namespace armhive
