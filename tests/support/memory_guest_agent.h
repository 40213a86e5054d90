#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"

namespace armhive {

// A qemu-guest-agent at the JSON level over an in-memory file system, for the guest file
// transfer (daemon/virt/guest_file_transfer.h): guest-file-open ("r", "w")/-read/-write/-close
// as qemu-ga does them, and guest-exec of /bin/sh running exactly the helper scripts the
// transfer uses (mkdir -p, mv -f, rm -f, wc -c + sha256sum, the file/dir test, tar -cf/-xf).
// Its "tar" is its own: -cf packs the files under a directory as NAME\0SIZE\0BYTES records
// that -xf unpacks, so a directory round-trips through it; a stream that is not such records
// fails like tar does (exit 1). The e2e runs the real tar. Anything else is an error naming
// the command. Knobs make it a hostile guest. Thread-safe (one mutex).
class MemoryGuestAgent {
 public:
  Result<std::string> operator()(const std::string& command, std::chrono::milliseconds timeout);

  // Test controls and inspection.
  void put(const std::string& path, std::string data);
  std::optional<std::string> file(const std::string& path) const;
  std::set<std::string> paths() const;  // every file, sorted
  size_t open_handles() const;

  // Hostile knobs.
  bool lie_write_count = false;  // guest-file-write says it wrote one byte less
  bool garbage_base64 = false;   // guest-file-read returns base64 that is not
  bool extra_bytes = false;      // reads return one byte more than the file holds
  bool wrong_sha256 = false;     // sha256sum prints another digest
  bool oversized_reply = false;  // guest-file-read replies carry a member 64 KiB + 8× the read
  size_t writes = 0;             // guest-file-write calls so far
  size_t reads = 0;              // guest-file-read calls so far

 private:
  struct Handle {
    std::string path;
    size_t pos = 0;
    bool write = false;
  };
  Result<std::string> exec(const std::string& script, const std::vector<std::string>& args);

  mutable std::mutex mu_;
  std::map<std::string, std::string> files_;
  std::set<std::string> dirs_ = {"/", "/tmp"};
  std::map<int64_t, Handle> handles_;
  std::map<int64_t, std::pair<int, std::string>> exited_;  // pid -> exit code, stdout
  int64_t next_handle_ = 1000;
  int64_t next_pid_ = 100;
};

}  // namespace armhive
