#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "base/result.h"
#include "daemon/core/hypervisor.h"
#include "daemon/virt/guest_exec_stream.h"

namespace armhive {

struct FileTransferOptions {
  // Bytes per guest-file-read/-write. A reply or command carries them as base64 (4/3 larger)
  // and libvirt caps an agent message at a few MiB; 48 KiB keeps each call well below.
  size_t chunk = 48 * 1024;
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
