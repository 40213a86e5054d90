#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "daemon/core/hypervisor.h"

namespace armhive {

// Pure parsers for qemu-guest-agent replies. The guest is untrusted (a CI job is root in it):
// every reply is data. Malformed JSON, a wrong type, a missing member or an out-of-range number
// gives kInternal naming the command, never an exception. Any thread.

// The pid of a `guest-exec` reply ({"return":{"pid":N}}); 1 <= N <= 2^31-1.
Result<int64_t> parse_guest_exec_started(std::string_view reply);

// A `guest-exec-status` reply: nullopt while the process runs ("exited": false), else its exit
// code, signal and decoded output. An exit code outside 0..255 or a signal outside 0..255 is
// rejected: no kernel reports them.
Result<std::optional<GuestExecResult>> parse_guest_exec_status(std::string_view reply);

// The handle of a `guest-file-open` reply ({"return":N}); 0 <= N <= 2^63-1.
Result<int64_t> parse_guest_file_open(std::string_view reply);

struct GuestFileChunk {
  std::string data;  // decoded bytes
  bool eof = false;
};

// A `guest-file-read` reply ({"return":{"count":N,"buf-b64":"...","eof":B}}) for a read of at
// most `max_count` bytes: a count above it, or one that differs from the decoded length, is
// rejected.
Result<GuestFileChunk> parse_guest_file_read(std::string_view reply, size_t max_count);

}  // namespace armhive
