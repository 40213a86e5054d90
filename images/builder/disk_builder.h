#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace armhive {

struct DiskSpec {
  std::string output;       // the qcow2 (compat 1.1) to create; must not exist
  uint64_t size_mib = 512;  // virtual size
  std::string rootfs_tar;   // uncompressed tar of the root filesystem
  std::string label = "armhive-root";
};

// Creates a qcow2 disk whose whole device is one ext4 filesystem (no partition table: the
// guest mounts /dev/vda) holding the unpacked root filesystem. Uses one libguestfs handle for
// every step (direct backend; LIBGUESTFS_BACKEND=direct and
// LIBGUESTFS_BACKEND_SETTINGS=force_tcg are set in this process if unset, since KVM aborts in
// QEMU on these hosts). The appliance is x86: only file operations run, nothing from the guest.
// Blocking (tens of seconds); one call per thread at a time. kUnavailable with libguestfs'
// message on failure; the partial output is removed.
Status build_ext4_disk(const DiskSpec& spec, const std::function<void(std::string_view)>& progress);

}  // namespace armhive
