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

}  // namespace armhive
