#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "base/result.h"
#include "daemon/core/hypervisor.h"
#include "daemon/virt/guest_exec_stream.h"

namespace armhive {

// The largest write_chunk put_guest_file accepts. A command larger than the agent channel
// socket's send buffer (net.core.wmem_default, 208 KiB here) is never answered and the channel
// stays dead (measured: a 341 KiB command; consistent with libvirt 9.0's write loop forgetting
// a partial write when the non-blocking socket then says EAGAIN). 128 KiB of data is a 175 KiB
// command (base64 and the JSON around it).
constexpr size_t kMaxWriteChunk = 128 * 1024;
// The largest read_chunk get_guest_file accepts. Replies come back through libvirt's RPC, whose
// payload limit a 4 MiB read (a 5.6 MB base64 reply) exceeded ("Unable to encode message
// payload", armhive-bench-cp --probe-read-mib 1 2 4); 2 MiB reads were answered.
constexpr size_t kMaxReadChunk = 2 * 1024 * 1024;

struct FileTransferOptions {
  // Bytes per guest-file-write (upload), at most kMaxWriteChunk. 48 KiB (a 64 KiB command):
  // 96 KiB measured 1.16x the MiB/s inside a 12-21 % spread (BENCHMARKS.md), not worth less
  // headroom below the channel's send buffer.
  size_t write_chunk = 48 * 1024;
  // Bytes per guest-file-read (download), at most kMaxReadChunk. 1 MiB (a 1.4 MB reply) measured
  // 1.31x the MiB/s of 48 KiB side by side (BENCHMARKS.md); one chunk is in memory at a time.
  size_t read_chunk = 1024 * 1024;
  // Bound of one guest-file-read/-write call (opening and closing keep 10 s).
  std::chrono::milliseconds chunk_timeout{std::chrono::seconds(60)};
  std::string spool_dir = "/tmp";  // guest directory for the tar files of directories
  // Each guest-side helper command (mkdir, sha256sum, tar, mv) is bounded by this.
  std::chrono::milliseconds command_timeout{std::chrono::minutes(10)};
};

// GuestAgent::put_file / get_file (daemon/core/hypervisor.h has the contract) through the
// agent only: qemu-ga's guest-file-open/-write/-read/-close move the bytes, and guest-exec runs
// the few helpers the guest needs (/bin/sh with mkdir, mv, rm, sha256sum, tar: busybox has
// them all) with the paths as arguments, never inside a script. The guest is untrusted: every
// reply is checked (a write count other than what was sent, a read count above what was asked
// or not matching its base64, garbage base64, more bytes than announced, a checksum that does
// not match) and ends the transfer with an error naming what the guest did.
//
// Threading: blocks the calling thread for the transfer; the source or sink is called on it.
Result<GuestFileTransfer> put_guest_file(const AgentCall& agent, const GuestFilePut& put,
                                         ByteSource& source,
                                         const FileTransferOptions& options = {});
Result<GuestFileTransfer> get_guest_file(const AgentCall& agent, const std::string& path,
                                         ByteSink& sink, const FileTransferOptions& options = {});

}  // namespace armhive
