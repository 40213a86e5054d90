#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "daemon/core/hypervisor.h"
#include "daemon/core/lease.h"

namespace armhive {

// The rules `armhive cp` obeys in a pool's VMs (PoolConfig::files). Pure functions, any thread.

// The guest path in normal form ("/a//b/" -> "/a/b"), or why it is refused: kInvalidArgument
// naming `path` when it is empty, relative, holds NUL or another control character, or a "."
// or ".." segment (no path may climb out of the prefix); kPermissionDenied naming `path` when
// it lies outside policy.path_prefix (the message names the prefix).
Result<std::string> check_guest_path(const FilePolicy& policy, std::string_view path);

// kPayloadTooLarge naming the limit when `bytes` exceeds policy.max_bytes.
Status check_transfer_size(const FilePolicy& policy, const std::string& pool, uint64_t bytes);

// "/" or an absolute path without "." / ".." segments, in normal form; kInvalidArgument naming
// `field` otherwise (for the configuration's files.path_prefix).
Result<std::string> normalize_path_prefix(const std::string& field, std::string_view prefix);

// Passes a download through, refusing it in begin() (kPayloadTooLarge naming the limit) when
// the guest announces more than the pool allows: before any byte reaches `inner`.
class PolicyCheckedSink final : public ByteSink {
 public:
  PolicyCheckedSink(ByteSink& inner, FilePolicy policy, std::string pool)
      : inner_(inner), policy_(std::move(policy)), pool_(std::move(pool)) {}
  Status begin(GuestFileKind kind, uint64_t size, const std::string& sha256) override {
    ARMHIVE_RETURN_IF_ERROR(check_transfer_size(policy_, pool_, size));
    return inner_.begin(kind, size, sha256);
  }
  Status write(std::string_view data) override { return inner_.write(data); }

 private:
  ByteSink& inner_;
  FilePolicy policy_;
  std::string pool_;
};

}  // namespace armhive
